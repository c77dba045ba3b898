import { createPublicKey, type KeyObject } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { KeyAccessDeniedError } from '../errors/rpc.ts';
import { type KeyAccessSettings, normaliseAddress } from './access.ts';

/** Longest a request JWT may live (exp minus iat, or minus now without iat). */
export const MAX_JWT_LIFETIME_SECONDS = 86_400;
const CLOCK_TOLERANCE_SECONDS = 30;
/** How far in the future a request JWT's `iat` may be (a clock ahead); more is refused. */
export const MAX_JWT_IAT_AHEAD_SECONDS = 60;
/** Verified tokens remembered per key, so a token sent again costs a map lookup. */
const MAX_VERIFIED = 1_000;

/** Who sent a request, as the allowlists see it. */
export interface RequestOrigin {
  /** The `Origin` header as sent; undefined without one. */
  origin?: string | undefined;
  ip: string;
  /** The `Authorization` header as sent (`Bearer <jwt>`; a WebSocket's `jwt` query parameter comes this way too). */
  authorization?: string | undefined;
}

/** What the method and contract lists read of one JSON-RPC call. */
export interface CallOfKey {
  method: string;
  params: unknown;
}

// Each error object is made once and shared: they are immutable.
const ORIGIN_MISSING = new KeyAccessDeniedError('origin', 'This API key accepts requests from its allowed origins only, and this request has no Origin');
const ORIGIN_REFUSED = new KeyAccessDeniedError('origin', 'Origin not allowed for this API key');
const IP_REFUSED = new KeyAccessDeniedError('ip', 'Client IP address not allowed for this API key');
const JWT_MISSING = new KeyAccessDeniedError('jwt', 'This API key requires a JWT: send Authorization: Bearer <jwt>');
const JWT_INVALID = new KeyAccessDeniedError(
  'jwt',
  'Invalid JWT: not signed by a public key of this API key, expired, or not within the rules (exp required, at most 1 day, iat at most 60 s ahead, kid and aud = ids of this key when present)',
);
const CONTRACT_MISSING = new KeyAccessDeniedError('contract', 'This API key allows calls to its allowed contracts only, and this call names none');

// C24-style exact lists: which parameter names the contract of each method.
const TARGET_IN_TO = new Set(['eth_call', 'eth_estimateGas', 'eth_createAccessList']);
const TARGET_IN_ADDRESS = new Set(['eth_getLogs', 'eth_newFilter']);

interface Wildcard {
  scheme: string;
  /** `.example.com` */
  suffix: string;
  port: string;
}

/**
 * A key's allowlists and JWT option, compiled for the RPC path (held by the key cache, so a
 * check costs no storage round trip). A key without any is `null` there: the path pays one null
 * check. Lists are ANDed, entries of one list ORed; an empty list allows everything.
 */
export class KeyAccess {
  readonly #keyId: string;
  readonly #origins: ReadonlySet<string> | null;
  readonly #wildcards: readonly Wildcard[];
  readonly #requireOrigin: boolean;
  readonly #ips: BlockList | null;
  readonly #methods: ReadonlySet<string> | null;
  readonly #contracts: ReadonlySet<string> | null;
  readonly #jwtKeys: ReadonlyArray<{ id: string; alg: string; key: KeyObject }> | null;
  /** Verified tokens and when they expire (epoch ms). */
  readonly #verified = new Map<string, number>();
  /** Tokens that failed, until when they are not verified again (one with a future nbf may pass later). */
  readonly #rejected = new Map<string, number>();

  private constructor(keyId: string, s: KeyAccessSettings) {
    this.#keyId = keyId;
    const exact = s.allowedOrigins.filter((o) => !o.includes('://*.'));
    const wild = s.allowedOrigins.filter((o) => o.includes('://*.'));
    this.#origins = s.allowedOrigins.length > 0 ? new Set(exact) : null;
    this.#wildcards = wild.map((o) => {
      const [scheme = '', rest = ''] = o.split('://*');
      const colon = rest.lastIndexOf(':');
      return colon > 0 ? { scheme, suffix: rest.slice(0, colon), port: rest.slice(colon + 1) } : { scheme, suffix: rest, port: '' };
    });
    this.#requireOrigin = s.requireOrigin;
    if (s.allowedIps.length > 0) {
      const list = new BlockList();
      for (const entry of s.allowedIps) {
        const [address = '', prefix] = entry.split('/');
        const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
        if (prefix === undefined) list.addAddress(address, type);
        else list.addSubnet(address, Number(prefix), type);
      }
      this.#ips = list;
    } else this.#ips = null;
    this.#methods = s.allowedMethods.length > 0 ? new Set(s.allowedMethods) : null;
    this.#contracts = s.allowedContracts.length > 0 ? new Set(s.allowedContracts) : null;
    this.#jwtKeys = s.requireJwt ? s.jwtPublicKeys.map((k) => ({ id: k.id, alg: k.alg, key: createPublicKey(k.publicKey) })) : null;
  }

  /** The compiled form, or null when the settings restrict nothing. */
  static compile(keyId: string, s: KeyAccessSettings | null): KeyAccess | null {
    if (!s) return null;
    const restricts = s.allowedOrigins.length > 0 || s.allowedIps.length > 0 || s.allowedMethods.length > 0 || s.allowedContracts.length > 0 || s.requireJwt;
    return restricts ? new KeyAccess(keyId, s) : null;
  }

  /** Whether calls themselves are checked (methods, contracts), not only who sends them. */
  get checksCalls(): boolean {
    return this.#methods !== null || this.#contracts !== null;
  }

  /**
   * The request as a whole (origin, client IP, JWT): null when allowed, else the refusal.
   * Synchronous except for a JWT not verified before.
   */
  checkRequest(req: RequestOrigin): KeyAccessDeniedError | null | Promise<KeyAccessDeniedError | null> {
    if (this.#origins !== null) {
      const err = this.#checkOrigin(req.origin);
      if (err) return err;
    }
    if (this.#ips !== null && !this.#ipAllowed(req.ip)) return IP_REFUSED;
    if (this.#jwtKeys !== null) return this.#checkJwt(bearerToken(req.authorization));
    return null;
  }

  /** One call (method and contract lists): null when allowed, else the refusal. */
  checkCall(call: CallOfKey): KeyAccessDeniedError | null {
    const { method } = call;
    if (this.#methods !== null && !this.#methods.has(method)) {
      return new KeyAccessDeniedError('method', `Method ${method} not allowed for this API key`, { method });
    }
    if (this.#contracts === null) return null;
    const first = Array.isArray(call.params) ? (call.params[0] as unknown) : undefined;
    if (TARGET_IN_TO.has(method)) return this.#checkTargets(method, fieldOf(first, 'to'), false);
    if (TARGET_IN_ADDRESS.has(method)) return this.#checkTargets(method, fieldOf(first, 'address'), true);
    // A logs subscription names its contracts as eth_getLogs does.
    if (method === 'eth_subscribe' && Array.isArray(call.params) && call.params[0] === 'logs') {
      return this.#checkTargets(method, fieldOf(call.params[1], 'address'), true);
    }
    return null;
  }

  #checkOrigin(origin: string | undefined): KeyAccessDeniedError | null {
    if (origin === undefined) return this.#requireOrigin ? ORIGIN_MISSING : null;
    const o = origin.toLowerCase();
    if ((this.#origins as ReadonlySet<string>).has(o)) return null;
    if (this.#wildcards.length > 0) {
      const m = /^([a-z][a-z0-9+.-]*):\/\/([^/:]+)(?::(\d+))?$/.exec(o);
      if (m) {
        const [, scheme, host = '', port = ''] = m;
        for (const w of this.#wildcards) {
          if (w.scheme === scheme && w.port === port && host.length > w.suffix.length && host.endsWith(w.suffix)) return null;
        }
      }
    }
    return ORIGIN_REFUSED;
  }

  #ipAllowed(ip: string): boolean {
    const family = isIP(ip);
    return family !== 0 && (this.#ips as BlockList).check(ip, family === 6 ? 'ipv6' : 'ipv4');
  }

  #checkTargets(method: string, value: unknown, listAllowed: boolean): KeyAccessDeniedError | null {
    const contracts = this.#contracts as ReadonlySet<string>;
    const targets = listAllowed && Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
    if (targets.length === 0) return CONTRACT_MISSING;
    for (const t of targets) {
      const address = typeof t === 'string' ? normaliseAddress(t) : null;
      if (address === null || !contracts.has(address)) {
        return new KeyAccessDeniedError('contract', `Contract ${typeof t === 'string' ? t.slice(0, 48) : 'address'} not allowed for this API key`, { method });
      }
    }
    return null;
  }

  #checkJwt(token: string | undefined): KeyAccessDeniedError | null | Promise<KeyAccessDeniedError | null> {
    if (!token) return JWT_MISSING;
    const rejectedUntil = this.#rejected.get(token);
    if (rejectedUntil !== undefined && rejectedUntil > Date.now()) return JWT_INVALID;
    const until = this.#verified.get(token);
    if (until !== undefined) {
      if (until > Date.now()) return null;
      this.#verified.delete(token);
      return JWT_INVALID;
    }
    return this.#verify(token);
  }

  async #verify(token: string): Promise<KeyAccessDeniedError | null> {
    const denied = await this.#verifyOnce(token);
    if (denied) {
      if (this.#rejected.size >= MAX_VERIFIED) this.#rejected.delete(this.#rejected.keys().next().value as string);
      this.#rejected.set(token, Date.now() + 60_000);
    }
    return denied;
  }

  async #verifyOnce(token: string): Promise<KeyAccessDeniedError | null> {
    let header: { alg?: string; kid?: string };
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return JWT_INVALID;
    }
    const keys = this.#jwtKeys ?? [];
    // A `kid` names the one key to try: one naming none of this key's public keys is refused,
    // never tried against the others. Without a `kid`, every key of the token's alg is tried.
    const candidates = header.kid === undefined ? keys.filter((k) => k.alg === header.alg) : keys.filter((k) => k.id === header.kid);
    for (const k of candidates) {
      try {
        const { payload } = await jwtVerify(token, k.key, { algorithms: [k.alg], clockTolerance: CLOCK_TOLERANCE_SECONDS, requiredClaims: ['exp'] });
        const now = Math.floor(Date.now() / 1000);
        const exp = payload.exp as number;
        // jose checks iat only against a maximum age: one issued in the future is judged here.
        if (typeof payload.iat === 'number' && payload.iat > now + MAX_JWT_IAT_AHEAD_SECONDS) return JWT_INVALID;
        const from = typeof payload.iat === 'number' ? Math.min(payload.iat, now) : now;
        if (exp - from > MAX_JWT_LIFETIME_SECONDS + CLOCK_TOLERANCE_SECONDS) return JWT_INVALID;
        if (payload.aud !== undefined) {
          const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
          if (!aud.includes(this.#keyId)) return JWT_INVALID;
        }
        if (this.#verified.size >= MAX_VERIFIED) this.#verified.delete(this.#verified.keys().next().value as string);
        this.#verified.set(token, (exp + CLOCK_TOLERANCE_SECONDS) * 1000);
        return null;
      } catch {
        // not this key (or expired): the next candidate, if any
      }
    }
    return JWT_INVALID;
  }
}

function fieldOf(v: unknown, name: string): unknown {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[name] : undefined;
}

/** The token of `Authorization: Bearer <jwt>`; undefined without one. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length > 8192) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}
