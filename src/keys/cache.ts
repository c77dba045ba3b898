// The RPC path's key lookup (C19, C20): resolved keys cached in memory, unknown keys remembered briefly.
import type { PlansConfig, Tier } from '../config/schema.ts';
import type { MeteredKey } from '../metering/meter.ts';
import { effectiveLimits } from '../metering/plans.ts';
import { hashKey } from './crypto.ts';
import { KeyAccess } from './allowlist-checks.ts';
import type { KeyService } from './service.ts';

/** What the RPC hot path needs to know about a key: no storage round trip once cached. */
export interface ResolvedKey extends MeteredKey {
  keyHash: string;
  tier: Tier;
  status: 'active' | 'inactive' | 'revoked';
  /** Epoch ms, or null for no expiry. */
  expiresAt: number | null;
  networks: ReadonlySet<string>;
  /** The key's allowlists and JWT option, compiled; null when it has none. */
  access: KeyAccess | null;
}

interface Entry {
  value: ResolvedKey | null;
  until: number;
}

// Unknown keys are remembered briefly too, so a flood of bad keys does not reach storage; in a
// bounded map of their own, so they can never push good keys out.
const NEGATIVE_TTL_MS = 5_000;
const MAX_UNKNOWN = 10_000;

/** How soon an expired key whose lookup failed (storage away, C48) is looked up again. */
const STALE_RETRY_MS = 5_000;

interface RawEntry {
  value: ResolvedKey;
  until: number;
}

/** A place in a caller's failed-lookup allowance (C17), taken before storage is asked about a key. */
export interface LookupPlace {
  /** Set when the allowance is spent: no place was taken, storage is not asked. */
  error: unknown;
  /** Gives the place back (the key was found). */
  release(): Promise<void>;
}

/**
 * What a lookup under an allowance answered: the key (null: storage does not know it, and `place`
 * is the place it kept, whose C13 headers the refusal carries), or the refused place.
 */
export type AllowedLookup<P extends LookupPlace> = { key: ResolvedKey | null; place?: P; refused?: undefined } | { refused: P };

/**
 * Key lookups by SHA-256 hash, cached in process. Every key change (PATCH, revoke, rotate,
 * delete, tier or limit change) evicts at once through KeyService.onChange (C20); the TTL only
 * bounds staleness for changes made elsewhere (another instance, before cross-instance
 * propagation).
 */
export class KeyCache {
  readonly #keys: KeyService;
  readonly #plans: PlansConfig;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #entries = new Map<string, Entry>();
  /** Known keys by the key as sent: a hit costs no SHA-256 (the hot path). */
  readonly #byRaw = new Map<string, RawEntry>();
  /** Keys as sent that storage does not know, until when. */
  readonly #unknown = new Map<string, number>();
  readonly #inflight = new Map<string, Promise<ResolvedKey | null>>();
  /** Lookups under an allowance in flight, by party and key as sent: joined, never made twice. */
  readonly #allowed = new Map<string, Promise<AllowedLookup<LookupPlace>>>();
  /** Keys as sent whose expired entry is being looked up again in the background. */
  readonly #refreshing = new Set<string>();
  readonly #off: () => void;
  /** Bumped by every change, so a lookup that raced a change is not cached. */
  #generation = 0;
  /** Storage lookups done (tests and metrics read it). */
  misses = 0;

  constructor(keys: KeyService, plans: PlansConfig, opts: { ttlMs: number; maxEntries?: number }) {
    this.#keys = keys;
    this.#plans = plans;
    this.#ttlMs = opts.ttlMs;
    this.#maxEntries = opts.maxEntries ?? 100_000;
    this.#off = keys.changes.on((change) => {
      this.#generation++;
      for (const h of change.keyHashes) this.#entries.delete(h);
      if (change.type === 'account') {
        for (const [h, e] of this.#entries) if (e.value?.userId === change.userId) this.#entries.delete(h);
      }
      // Changes are rare: a pass over the raw entries is cheaper than an index kept per call.
      const hashes = new Set(change.keyHashes);
      for (const [raw, e] of this.#byRaw) {
        if (hashes.has(e.value.keyHash) || (change.type === 'account' && e.value.userId === change.userId)) this.#byRaw.delete(raw);
      }
      // A key just created may have been looked up (and remembered as unknown) a moment before.
      if (change.type !== 'account') this.#unknown.clear();
    });
  }

  close(): void {
    this.#off();
    this.#clearAll();
  }

  /** Forget every cached lookup (after changes may have been missed). */
  clear(): void {
    this.#generation++;
    this.#clearAll();
  }

  #clearAll(): void {
    this.#entries.clear();
    this.#byRaw.clear();
    this.#unknown.clear();
  }

  /**
   * The key as sent, when memory can tell: the key (whatever its status), null for a key storage
   * does not know (or that cannot be one), undefined when only storage can tell. Its status and
   * expiry are judged by the admission step (admission.ts), not here.
   */
  peek(apiKey: string | undefined): ResolvedKey | null | undefined {
    if (!apiKey || apiKey.length > 256) return null;
    const now = Date.now();
    const hit = this.#byRaw.get(apiKey);
    if (hit) {
      // Least recently used goes first (docs/scaling.md): a hit moves to the end of the Map's order, only
      // once the cache is half full (before that nothing is evicted, and the hot path skips it).
      if (this.#byRaw.size > this.#maxEntries >> 1) {
        this.#byRaw.delete(apiKey);
        this.#byRaw.set(apiKey, hit);
      }
      // Expired: served as it is while storage is asked again in the background (C48: a known key
      // keeps being served while the database is away or hung, and no call waits on it). Changes
      // made here or published by another instance evict at once (C20); the TTL only bounds what
      // a missed change can cost, now by one lookup's time more.
      if (hit.until <= now) this.#refresh(apiKey, hit);
      return hit.value;
    }
    const unknownUntil = this.#unknown.get(apiKey);
    if (unknownUntil !== undefined && unknownUntil > now) return null;
    return undefined;
  }

  /** {@link peek}, asking storage when memory cannot tell (the answer is then remembered by the key as sent). */
  async lookup(apiKey: string | undefined): Promise<ResolvedKey | null> {
    const known = this.peek(apiKey);
    if (known !== undefined) return known;
    const raw = apiKey as string;
    const generation = this.#generation;
    // Hashed only on a miss.
    const key = await this.get(hashKey(raw));
    if (generation === this.#generation) {
      if (key) {
        this.#byRaw.set(raw, { value: key, until: Date.now() + this.#ttlMs });
        if (this.#byRaw.size > this.#maxEntries) this.#byRaw.delete(this.#byRaw.keys().next().value as string);
      } else {
        this.#unknown.set(raw, Date.now() + Math.min(this.#ttlMs, NEGATIVE_TTL_MS));
        if (this.#unknown.size > MAX_UNKNOWN) this.#unknown.delete(this.#unknown.keys().next().value as string);
      }
    }
    return key;
  }

  /**
   * {@link lookup} for a caller with an allowance of failed lookups (C17): a place is taken by
   * `reserve` before storage is asked, and given back when storage knows the key, so only a
   * lookup that found nothing keeps it. Lookups of one key by one `party` (a client address)
   * while one is in flight join it: one place, one storage read, however many ask at once (a
   * burst of WebSocket upgrades with a new key), and every one of them gets that place (its
   * headers) with the answer. Different keys each take their own place, so concurrency cannot
   * pass the allowance.
   */
  async lookupAllowed<P extends LookupPlace>(apiKey: string | undefined, party: string, reserve: () => Promise<P>): Promise<AllowedLookup<P>> {
    const known = this.peek(apiKey);
    if (known !== undefined) return { key: known };
    const id = `${party}\n${apiKey as string}`;
    let flight = this.#allowed.get(id) as Promise<AllowedLookup<P>> | undefined;
    if (!flight) {
      flight = this.#lookupWithPlace(apiKey as string, reserve).finally(() => this.#allowed.delete(id));
      this.#allowed.set(id, flight);
    }
    return flight;
  }

  async #lookupWithPlace<P extends LookupPlace>(raw: string, reserve: () => Promise<P>): Promise<AllowedLookup<P>> {
    const place = await reserve();
    if (place.error) return { refused: place };
    let key: ResolvedKey | null;
    try {
      key = await this.lookup(raw);
    } catch (err) {
      // Storage could not tell: not a failed lookup.
      await place.release();
      throw err;
    }
    if (key !== null) {
      await place.release();
      return { key };
    }
    return { key, place };
  }

  /** Looks an expired key up again; until it is answered, and while storage cannot answer, the entry is served as it was. */
  #refresh(raw: string, hit: RawEntry): void {
    if (this.#refreshing.has(raw)) return;
    this.#refreshing.add(raw);
    const generation = this.#generation;
    this.#entries.delete(hit.value.keyHash);
    this.get(hit.value.keyHash)
      .then(
        (key) => {
          // A change in the meantime evicted the entry already; its next call looks it up anew.
          if (generation !== this.#generation || this.#byRaw.get(raw) !== hit) return;
          if (key) this.#byRaw.set(raw, { value: key, until: Date.now() + this.#ttlMs });
          else this.#byRaw.delete(raw);
        },
        () => {
          // Storage unreachable or failing: asked again after a short while, the key served meanwhile.
          if (this.#byRaw.get(raw) === hit) hit.until = Date.now() + Math.min(this.#ttlMs, STALE_RETRY_MS);
        },
      )
      .finally(() => this.#refreshing.delete(raw));
  }

  async get(keyHash: string): Promise<ResolvedKey | null> {
    const now = Date.now();
    const hit = this.#entries.get(keyHash);
    if (hit && hit.until > now) {
      if (this.#entries.size > this.#maxEntries >> 1) {
        this.#entries.delete(keyHash);
        this.#entries.set(keyHash, hit);
      }
      return hit.value;
    }
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
          // C52: a key made for every network covers its plan's list as it is now.
          networks: new Set(this.#keys.networksOf(row.key, row.user)),
          rateLimit: row.key.rateLimit,
          limits: effectiveLimits(this.#plans, row.user),
          access: KeyAccess.compile(row.key.id, row.key.access),
        }
      : null;
    // Unknown keys are remembered by the key as sent (authenticate), never here among good ones.
    if (generation !== this.#generation || value === null) return value;
    if (this.#entries.size >= this.#maxEntries) {
      // Least recently used first: Map keeps insertion order, and a hit re-inserts.
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
    this.#entries.set(keyHash, { value, until: Date.now() + (value ? this.#ttlMs : Math.min(this.#ttlMs, NEGATIVE_TTL_MS)) });
    return value;
  }
}
