import { createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';

/** Why a token was refused: `expired` (C5: TOKEN_EXPIRED) or anything else (`invalid`). */
export class TokenRefused extends Error {
  constructor(readonly reason: 'invalid' | 'expired') {
    super(reason === 'expired' ? 'token expired' : 'token invalid');
  }
}

const PART = /^[A-Za-z0-9_-]+$/;
/** An HMAC-SHA256 is 32 bytes: 43 base64url characters without padding. */
const SIGNATURE_CHARS = 43;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function json(part: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(Buffer.from(part, 'base64url')));
  } catch {
    throw new TokenRefused('invalid');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TokenRefused('invalid');
  return value as Record<string, unknown>;
}

/**
 * Verifies a compact HS256 JWT in one synchronous step (node:crypto) and returns its claims.
 *
 * Issue 28: every REST call behind the bearer hook verifies its access token. jose's `jwtVerify`
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
export function verifyHs256(token: string, key: KeyObject, opts: { issuer: string; required: readonly string[]; nowS?: number }): Record<string, unknown> {
  const parts = token.split('.');
  if (parts.length !== 3) throw new TokenRefused('invalid');
  const [h, p, s] = parts as [string, string, string];
  if (!PART.test(h) || !PART.test(p) || s.length !== SIGNATURE_CHARS || !PART.test(s)) throw new TokenRefused('invalid');
  const header = json(h);
  if (header.alg !== 'HS256' || Object.hasOwn(header, 'crit')) throw new TokenRefused('invalid');
  const expected = Buffer.from(createHmac('sha256', key).update(`${h}.${p}`).digest('base64url'));
  if (!timingSafeEqual(expected, Buffer.from(s))) throw new TokenRefused('invalid');
  const claims = json(p);
  for (const c of opts.required) if (!Object.hasOwn(claims, c)) throw new TokenRefused('invalid');
  if (claims.iss !== opts.issuer) throw new TokenRefused('invalid');
  const now = opts.nowS ?? Math.floor(Date.now() / 1000);
  const { iat, nbf, exp } = claims;
  if (iat !== undefined && typeof iat !== 'number') throw new TokenRefused('invalid');
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf > now)) throw new TokenRefused('invalid');
  if (exp !== undefined && typeof exp !== 'number') throw new TokenRefused('invalid');
  if (typeof exp === 'number' && exp <= now) throw new TokenRefused('expired');
  return claims;
}
