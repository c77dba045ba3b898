// Verifies the gateway's own HS256 access tokens (C5) in one synchronous step.
import { createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';

/** A token's claims, or why it was refused: `expired` (C5: TOKEN_EXPIRED) or anything else (`invalid`). */
export type Verified = { ok: true; claims: Record<string, unknown> } | { ok: false; reason: 'invalid' | 'expired' };
const INVALID: Verified = { ok: false, reason: 'invalid' };
const EXPIRED: Verified = { ok: false, reason: 'expired' };

const PART = /^[A-Za-z0-9_-]+$/;
/** An HMAC-SHA256 is 32 bytes: 43 base64url characters without padding. */
const SIGNATURE_CHARS = 43;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The JSON object a part holds, or undefined. */
function json(part: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(Buffer.from(part, 'base64url')));
  } catch {
    return undefined;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/**
 * Verifies a compact HS256 JWT in one synchronous step (node:crypto): its claims, or why not.
 *
 * For scale (docs/scaling.md): every REST call behind the bearer hook verifies its access token. jose's `jwtVerify`
 * goes through WebCrypto, whose HMAC runs as a thread-pool job with promises around it: ~50 µs of
 * CPU and a thread handover per call, against ~5 µs here. The checks are those `jwtVerify` makes
 * with the options the gateway gave it (`algorithms: ['HS256']`, `issuer`, `requiredClaims`), and a
 * few stricter ones (test/auth/jwt-verify.test.ts compares the two on valid and mutated tokens):
 * - three non-empty base64url parts, nothing else (no padding, no stray characters);
 * - a JSON object header with `alg` exactly `HS256` and no `crit` (no extension is understood);
 * - the signature: HMAC-SHA256 of `header.payload` under `key`, compared in constant time with the
 *   token's text in canonical base64url (43 characters);
 * - a JSON object payload holding every claim of `required`, `iss` equal to `issuer`, `iat` a
 *   number, `nbf` (if present) a number not after now, `exp` a number after now (else `expired`).
 * Signing stays with jose (tokens.ts): it runs once per login or refresh.
 */
export function verifyHs256(token: string, key: KeyObject, opts: { issuer: string; required: readonly string[]; nowS?: number }): Verified {
  const parts = token.split('.');
  if (parts.length !== 3) return INVALID;
  const [h, p, s] = parts as [string, string, string];
  if (!PART.test(h) || !PART.test(p) || s.length !== SIGNATURE_CHARS || !PART.test(s)) return INVALID;
  const header = json(h);
  if (header?.alg !== 'HS256' || Object.hasOwn(header, 'crit')) return INVALID;
  const expected = Buffer.from(createHmac('sha256', key).update(`${h}.${p}`).digest('base64url'));
  if (!timingSafeEqual(expected, Buffer.from(s))) return INVALID;
  const claims = json(p);
  if (!claims) return INVALID;
  for (const c of opts.required) if (!Object.hasOwn(claims, c)) return INVALID;
  if (claims.iss !== opts.issuer) return INVALID;
  const now = opts.nowS ?? Math.floor(Date.now() / 1000);
  const { iat, nbf, exp } = claims;
  if (iat !== undefined && typeof iat !== 'number') return INVALID;
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf > now)) return INVALID;
  if (exp !== undefined && typeof exp !== 'number') return INVALID;
  if (typeof exp === 'number' && exp <= now) return EXPIRED;
  return { ok: true, claims };
}
