import type { Config, PlanLimits, Tier } from '../config/schema.ts';
import { ApiKeyRevokedError, InvalidApiKeyError, type RpcError } from '../errors/rpc.ts';
import { effectiveLimits } from '../metering/plans.ts';
import { hashKey } from './crypto.ts';
import type { KeyService } from './service.ts';

/** What the RPC hot path needs to know about a key: no storage round trip once cached. */
export interface ResolvedKey {
  keyId: string;
  keyHash: string;
  userId: string;
  tier: Tier;
  status: 'active' | 'inactive' | 'revoked';
  /** Epoch ms, or null for no expiry. */
  expiresAt: number | null;
  networks: ReadonlySet<string>;
  /** The key's own per-minute limit; null = the plan's. */
  rateLimit: number | null;
  limits: PlanLimits;
}

interface Entry {
  value: ResolvedKey | null;
  until: number;
}

// Unknown keys are remembered briefly too, so a flood of bad keys does not reach storage.
const NEGATIVE_TTL_MS = 5_000;

/**
 * Key lookups by SHA-256 hash, cached in process. Every key change (PATCH, revoke, rotate,
 * delete, tier or limit change) evicts at once through KeyService.onChange (C20); the TTL only
 * bounds staleness for changes made elsewhere (another instance, before cross-instance
 * propagation).
 */
export class KeyCache {
  readonly #keys: KeyService;
  readonly #config: Config;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #entries = new Map<string, Entry>();
  readonly #inflight = new Map<string, Promise<ResolvedKey | null>>();
  readonly #off: () => void;
  /** Bumped by every change, so a lookup that raced a change is not cached. */
  #generation = 0;
  /** Storage lookups done (tests and metrics read it). */
  misses = 0;

  constructor(keys: KeyService, config: Config, opts: { ttlMs: number; maxEntries?: number }) {
    this.#keys = keys;
    this.#config = config;
    this.#ttlMs = opts.ttlMs;
    this.#maxEntries = opts.maxEntries ?? 100_000;
    this.#off = keys.onChange((change) => {
      this.#generation++;
      for (const h of change.keyHashes) this.#entries.delete(h);
      if (change.type === 'account') {
        for (const [h, e] of this.#entries) if (e.value?.userId === change.userId) this.#entries.delete(h);
      }
    });
  }

  close(): void {
    this.#off();
    this.#entries.clear();
  }

  /** Forget every cached lookup (after changes may have been missed). */
  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }

  /**
   * The usable key for `apiKey`, or the JSON-RPC error to answer: -32001 unknown, deleted or
   * inactive; -32002 revoked or expired (C20).
   */
  async authenticate(apiKey: string | undefined): Promise<ResolvedKey | RpcError> {
    if (!apiKey || apiKey.length > 256) return new InvalidApiKeyError('Invalid or inactive API key');
    const key = await this.get(hashKey(apiKey));
    if (!key || key.status === 'inactive') return new InvalidApiKeyError('Invalid or inactive API key');
    if (key.status === 'revoked') return new ApiKeyRevokedError('API key revoked or expired', { data: { reason: 'revoked' } });
    if (key.expiresAt !== null && key.expiresAt <= Date.now()) {
      return new ApiKeyRevokedError('API key revoked or expired', { data: { reason: 'expired' } });
    }
    return key;
  }

  async get(keyHash: string): Promise<ResolvedKey | null> {
    const now = Date.now();
    const hit = this.#entries.get(keyHash);
    if (hit && hit.until > now) return hit.value;
    // Concurrent misses for one key share one storage lookup.
    let pending = this.#inflight.get(keyHash);
    if (!pending) {
      pending = this.#load(keyHash).finally(() => this.#inflight.delete(keyHash));
      this.#inflight.set(keyHash, pending);
    }
    return pending;
  }

  async #load(keyHash: string): Promise<ResolvedKey | null> {
    this.misses++;
    const generation = this.#generation;
    const row = await this.#keys.lookupByHash(keyHash);
    const value: ResolvedKey | null = row
      ? {
          keyId: row.key.id,
          keyHash,
          userId: row.user.id,
          tier: row.user.tier as Tier,
          status: row.key.status,
          expiresAt: row.key.expiresAt?.getTime() ?? null,
          networks: new Set(row.key.networks),
          rateLimit: row.key.rateLimit,
          limits: effectiveLimits(this.#config, row.user),
        }
      : null;
    if (generation !== this.#generation) return value;
    if (this.#entries.size >= this.#maxEntries) {
      // Oldest first: Map keeps insertion order.
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(keyHash, { value, until: Date.now() + (value ? this.#ttlMs : Math.min(this.#ttlMs, NEGATIVE_TTL_MS)) });
    return value;
  }
}
