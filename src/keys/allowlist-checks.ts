// A key's allowlists on the RPC path: origins, client IPs, request JWTs, methods and contracts
// (judged by C50's rules), compiled once per key and checked per request and per call.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { bytesToHex, fromRlp } from 'viem/utils';
import { KeyAccessDeniedError } from '../errors/rpc.ts';
import { methodFacts } from '../methods/catalogue.ts';
import { BLOCK_STATE_MEMBERS, SIMULATE_MEMBERS, TRANSACTION_MEMBERS } from '../methods/judge.ts';
import { type KeyAccessSettings, normaliseAddress } from './allowlist-settings.ts';

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
const OVERRIDES_REFUSED = new KeyAccessDeniedError(
  'contract',
  'This API key allows calls to its allowed contracts only: state and block overrides, authorization lists and call members the gateway does not know (names are exact) are refused',
);
const RAW_TX_REFUSED = new KeyAccessDeniedError(
  'contract',
  'This API key allows transactions to its allowed contracts only: a deployment, a set-code (EIP-7702) transaction or one that cannot be read is refused',
);

const FREE_SUBSCRIPTIONS: ReadonlySet<string> = new Set(['newHeads', 'newPendingTransactions', 'syncing']);

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
    return this.#checkContracts(method, Array.isArray(call.params) ? (call.params as unknown[]) : []);
  }

  /**
   * C50: the call judged against the contract list by its method's rule in the method catalogue
   * (src/methods/catalogue.ts); a method it does not know is refused, so the list fails closed. The
   * params are the judged ones (C54): member names canonical, as the node will read them.
   */
  #checkContracts(method: string, params: readonly unknown[]): KeyAccessDeniedError | null {
    switch (methodFacts(method)?.contract) {
      case 'none':
        return null;
      case 'call':
        // eth_call's state and block overrides (params 2 and 3), eth_estimateGas' state override (param 2).
        return this.#checkCallObject(method, params[0]) ?? (emptyFrom(params, 2) ? null : OVERRIDES_REFUSED);
      case 'logs':
        return this.#checkTargets(method, fieldOf(params[0], 'address'), true);
      case 'account':
        return this.#checkTargets(method, params[0], false);
      case 'accounts':
        // eth_getStorageValues: the member names of param 0 are the accounts read.
        return isObject(params[0]) ? this.#checkTargets(method, Object.keys(params[0]), true) : CONTRACT_MISSING;
      case 'simulate':
        return this.#checkSimulate(method, params);
      case 'subscribe':
        // A logs subscription names its contracts as eth_getLogs does.
        if (params[0] === 'logs') return this.#checkTargets(method, fieldOf(params[1], 'address'), true);
        if (typeof params[0] === 'string' && FREE_SUBSCRIPTIONS.has(params[0])) return null;
        return cannotJudge(method);
      case 'rawTx': {
        const to = rawTransactionTarget(params[0]);
        return to === null ? RAW_TX_REFUSED : this.#checkTargets(method, to, false);
      }
      default:
        return cannotJudge(method);
    }
  }

  /** A transaction object as eth_call runs it: `to` listed (a deployment names none), no member that could change code. */
  #checkCallObject(method: string, tx: unknown): KeyAccessDeniedError | null {
    if (!isObject(tx)) return CONTRACT_MISSING;
    for (const name in tx) {
      if (!TRANSACTION_MEMBERS.has(name)) return OVERRIDES_REFUSED;
    }
    if (!isEmpty(tx.authorizationList)) return OVERRIDES_REFUSED;
    return this.#checkTargets(method, tx.to, false);
  }

  /** eth_simulateV1: `[{blockStateCalls: [{blockOverrides?, stateOverrides?, calls?}], ...flags}, block?]`. */
  #checkSimulate(method: string, params: readonly unknown[]): KeyAccessDeniedError | null {
    const opts = params[0];
    if (!isObject(opts) || !emptyFrom(params, 2)) return cannotJudge(method);
    for (const name in opts) if (!SIMULATE_MEMBERS.has(name)) return cannotJudge(method);
    const blocks = opts.blockStateCalls;
    if (!Array.isArray(blocks)) return cannotJudge(method);
    let calls = 0;
    for (const block of blocks) {
      if (!isObject(block)) return cannotJudge(method);
      for (const name in block) if (!BLOCK_STATE_MEMBERS.has(name)) return cannotJudge(method);
      if (!isEmpty(block.stateOverrides) || !isEmpty(block.blockOverrides)) return OVERRIDES_REFUSED;
      if (block.calls === undefined || block.calls === null) continue;
      if (!Array.isArray(block.calls)) return cannotJudge(method);
      for (const c of block.calls) {
        const err = this.#checkCallObject(method, c);
        if (err) return err;
        calls++;
      }
    }
    return calls === 0 ? CONTRACT_MISSING : null;
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

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function fieldOf(v: unknown, name: string): unknown {
  return isObject(v) ? v[name] : undefined;
}

/** Absent, null, `{}` or `[]`: an override or list that changes nothing. */
function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  return isObject(v) && Object.keys(v).length === 0;
}

/** Whether every param from `index` on is empty (overrides a node would apply). */
function emptyFrom(params: readonly unknown[], index: number): boolean {
  for (let i = index; i < params.length; i++) if (!isEmpty(params[i])) return false;
  return true;
}

function cannotJudge(method: string): KeyAccessDeniedError {
  return new KeyAccessDeniedError('contract', `Method ${method} is not available to an API key with allowed contracts: the gateway cannot tell which contracts it runs`, { method });
}

/**
 * The `to` of a signed transaction (`eth_sendRawTransaction`'s param), as lower-case `0x` hex;
 * null for a deployment, a set-code transaction (type 4: it installs code at accounts), an
 * unknown type, or bytes that are not one. Decoded by viem's RLP decoder, which refuses
 * non-canonical or cut-short RLP and bytes after it. The fields: legacy `[nonce, gasPrice, gas,
 * to, ...]`, type 1 `[chainId, nonce, gasPrice, gas, to, ...]`, types 2 and 3 `[chainId, nonce,
 * tip, maxFee, gas, to, ...]`; a type 3 sent with its blobs wraps those fields as
 * `[fields, blobs, commitments, proofs]`. Only the RLP is read, not the values (viem's
 * parseTransaction would check them too, but turns every blob into hex text first: tens of
 * milliseconds for a 1 MiB body); the node judges those.
 */
export function rawTransactionTarget(raw: unknown): string | null {
  if (typeof raw !== 'string' || raw.length < 4 || raw.length % 2 !== 0 || !/^0x[0-9a-fA-F]+$/.test(raw)) return null;
  const bytes = Buffer.from(raw.slice(2), 'hex');
  const type = bytes[0] as number;
  let at: number;
  let index: number;
  if (type >= 0xc0) [at, index] = [0, 3];
  else if (type === 1) [at, index] = [1, 4];
  else if (type === 2 || type === 3) [at, index] = [1, 5];
  else return null;
  let fields: readonly unknown[];
  try {
    const decoded: unknown = fromRlp(bytes.subarray(at), 'bytes');
    if (!Array.isArray(decoded)) return null;
    fields = decoded as unknown[];
  } catch {
    return null;
  }
  const first = fields[0];
  if (type === 3 && fields.length === 4 && Array.isArray(first)) fields = first as unknown[];
  const to = fields[index];
  return to instanceof Uint8Array && to.length === 20 ? bytesToHex(to) : null;
}

/** The token of `Authorization: Bearer <jwt>`; undefined without one. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length > 8192) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}
