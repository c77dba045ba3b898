// One admission decision for an RPC request (C16, C20): the key, its network, its allowlists and
// the limits, the same on HTTP and WebSocket.
import { ApiKeyRevokedError, InvalidApiKeyError, KeyAccessDeniedError, NetworkNotAllowedError, type RpcError, StorageUnavailableRpcError } from '../errors/rpc.ts';
import { isStorageUnavailable, STORAGE_RETRY_AFTER_SECONDS } from '../errors/storage.ts';
import type { KeyCache, ResolvedKey } from './cache.ts';
import type { RequestOrigin } from './allowlist-checks.ts';

/**
 * Why a request was refused, as analytics counts refusals (C46a): `key` unknown, inactive,
 * revoked or expired; `network` the key does not cover; `access` the key's own allowlists or JWT
 * option; `rate` and `quota` the limits. (`method` is the method policy's, after admission.)
 */
export type RefusalReason = 'key' | 'network' | 'access' | 'method' | 'rate' | 'quota';

/** A request the admission step refuses: the JSON-RPC error to answer (its class gives the code) and why. */
export class Refusal {
  readonly error: RpcError;
  readonly reason: RefusalReason;
  /** The key as stored, when it exists (inactive, revoked, expired, network, access): whom the refusal concerns. */
  readonly key: ResolvedKey | null;
  /**
   * Headers of the refusal itself: an unknown key's, or a refused key lookup's, C13 headers of the
   * address's failed-lookup window (C17; and its Retry-After); a storage outage's Retry-After.
   */
  readonly headers: Record<string, string> | undefined;

  constructor(error: RpcError, reason: RefusalReason, key: ResolvedKey | null = null, headers?: Record<string, string>) {
    this.error = error;
    this.reason = reason;
    this.key = key;
    this.headers = headers;
  }

  /** The key itself cannot be used here (unknown, inactive, revoked, expired, network not covered): a WebSocket on it closes. */
  get keyRefused(): boolean {
    return this.reason === 'key' || this.reason === 'network';
  }
}

/** A usable key, or the refusal. */
export type Admission = ResolvedKey | Refusal;

/** C17: the client address's allowance of failed key lookups (the meter's). */
export interface LookupAllowance {
  reserveKeyLookup(ip: string): Promise<{ error: RpcError | null; headers: Record<string, string>; release(): Promise<void> }>;
}

/**
 * The one admission decision for a key on the RPC path: the key as sent -> its state (C20) ->
 * the network (the key's list, which a plan change narrows, C16) -> the key's own origin, IP and
 * JWT rules. Answers the usable key (its plan and limits with it) or the refusal. The
 * HTTP pipeline, the WebSocket upgrade and the WebSocket's recheck after a key change all ask here.
 *
 * Synchronous for a key in memory without a JWT to verify (the hot path allocates nothing);
 * a promise only when storage must be asked or a new JWT verified. With `allowance`, a lookup
 * in storage first takes a place in the client address's failed-lookup allowance, given back
 * when the key exists (C17), so guessing keys cannot make a storage round trip each.
 */
export function admit(keys: KeyCache, apiKey: string | undefined, network: string, from: RequestOrigin, allowance?: LookupAllowance): Admission | Promise<Admission> {
  const known = keys.peek(apiKey);
  if (known === undefined) return admitFromStorage(keys, apiKey, network, from, allowance);
  const key = usable(known, Date.now());
  return key instanceof Refusal ? key : judge(key, network, from);
}

async function admitFromStorage(keys: KeyCache, apiKey: string | undefined, network: string, from: RequestOrigin, allowance: LookupAllowance | undefined): Promise<Admission> {
  let found: ResolvedKey | null;
  try {
    if (allowance) {
      // C17: one place per lookup of a key from an address, shared by every request waiting on it;
      // given back when storage knows the key (whatever its state), kept when it found nothing.
      const looked = await keys.lookupAllowed(apiKey, from.ip, () => allowance.reserveKeyLookup(from.ip));
      if (looked.refused) return new Refusal(looked.refused.error as RpcError, 'rate', null, looked.refused.headers);
      // C13: storage does not know it; the -32001 carries the window the failed lookup counted in.
      if (looked.key === null) return unknownKey(looked.place?.headers);
      found = looked.key;
    } else found = await keys.lookup(apiKey);
  } catch (err) {
    if (!isStorageUnavailable(err)) throw err;
    // C48: the key is not in memory and the database cannot tell: try again later, not a 500.
    const error = new StorageUnavailableRpcError('Storage unavailable: this API key cannot be checked now; retry later', { details: { retryAfter: STORAGE_RETRY_AFTER_SECONDS } });
    return new Refusal(error, 'key', null, { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) });
  }
  const key = usable(found, Date.now());
  return key instanceof Refusal ? key : judge(key, network, from);
}

/** C20: a key storage does not know, -32001 (with the headers of the failed lookup's window, when one was counted). */
function unknownKey(headers?: Record<string, string>): Refusal {
  return new Refusal(new InvalidApiKeyError('Invalid or inactive API key'), 'key', null, headers);
}

/** C20: unknown, deleted or inactive -32001; revoked or expired -32002; else the key. */
function usable(key: ResolvedKey | null, now: number): ResolvedKey | Refusal {
  if (key === null) return unknownKey();
  if (key.status === 'inactive') return new Refusal(new InvalidApiKeyError('Invalid or inactive API key'), 'key', key);
  if (key.status === 'revoked') return new Refusal(new ApiKeyRevokedError('API key revoked or expired', { details: { reason: 'revoked' } }), 'key', key);
  if (key.expiresAt !== null && key.expiresAt <= now) return new Refusal(new ApiKeyRevokedError('API key revoked or expired', { details: { reason: 'expired' } }), 'key', key);
  return key;
}

/** C20: whether a key as stored can be used now (not inactive, revoked or expired), as admission judges it. */
export function isUsable(key: ResolvedKey, now: number = Date.now()): boolean {
  return !(usable(key, now) instanceof Refusal);
}

/** The network, then the key's origin, IP and JWT rules (a key without any costs one null check). */
function judge(key: ResolvedKey, network: string, from: RequestOrigin): Admission | Promise<Admission> {
  if (!key.networks.has(network)) {
    // The refusal says what would allow it: the key's networks, and how many the plan allows (C16).
    const max = key.limits.maxNetworks;
    const allowance = max === null ? `the ${key.tier} plan allows every network` : `the ${key.tier} plan allows ${max} networks over all of the account's keys`;
    const err = new NetworkNotAllowedError(`API key not authorized for network ${network}. Add it to the key's networks with PATCH /api/v1/api-keys/{id}: ${allowance}.`, {
      details: { network, allowed: [...key.networks] },
    });
    return new Refusal(err, 'network', key);
  }
  if (key.access === null) return key;
  const denied = key.access.checkRequest(from);
  if (denied === null) return key;
  if (denied instanceof KeyAccessDeniedError) return new Refusal(denied, 'access', key);
  return denied.then((d) => (d === null ? key : new Refusal(d, 'access', key)));
}
