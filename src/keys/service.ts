// The key records of an account (C19-C21): create, list, change, revoke, rotate and delete, each
// change published to the instance's key-change listeners (changes.ts). What the plan allows is
// judged by plan-rules.ts; lookups for the RPC path are cache.ts's.
import { randomUUID } from 'node:crypto';
import { and, eq, ne, sql } from 'drizzle-orm';
import type { UserRow } from '../auth/accounts.ts';
import { users } from '../auth/schema.ts';
import type { Networks } from '../chains/networks.ts';
import type { KeysConfig } from '../config/schema.ts';
import { HttpError, notFound } from '../errors/http.ts';
import { uniqueViolation } from '../errors/storage.ts';
import { type AccountLimitsInput, effectiveLimits } from '../metering/plans.ts';
import type { Db } from '../storage/db.ts';
import { accessView, applyAccessInput, hasAccessInput, type KeyAccessInput, type KeyAccessSettings } from './allowlist-settings.ts';
import { generateKey, hashKey, KeyCipher } from './crypto.ts';
import { apiKeys } from './schema.ts';
import { KeyChanges } from './changes.ts';
import { type PlanEnforcement, PlanRules, type PlanRulesSettings } from './plan-rules.ts';

export type KeyRow = typeof apiKeys.$inferSelect;
export type KeyStatus = 'active' | 'inactive' | 'revoked' | 'expired';

/** What the API shows of a key (spec: API key; C20 adds status and expiresAt; and its allowlists). */
export interface ApiKeyView extends KeyAccessSettings {
  id: string;
  name: string;
  key: string;
  prefix: string;
  /** The networks the key covers now: the plan's list for a key made for every network (C52). */
  networks: string[];
  /** Made for every network the plan allows (networks omitted or empty): follows a plan change (C16, C52). */
  allNetworks: boolean;
  rateLimit: number | null;
  /** The rate set on the key itself; null when it follows the plan's (C14), which `rateLimit` then shows. */
  ownRateLimit: number | null;
  status: KeyStatus;
  expiresAt: string | null;
  createdAt: string;
}

export interface ApiKeyListItem extends ApiKeyView {
  usage: { daily: number; monthly: number };
  lastUsedAt: string | null;
}

/** Counts for the key list (C21); the metering feature provides the real one. */
export interface KeyUsageReader {
  usageByKey(userId: string, keyIds: readonly string[]): Promise<Map<string, { daily: number; monthly: number }>>;
}
const NO_USAGE: KeyUsageReader = { usageByKey: async () => new Map() };

export interface CreateKeyInput extends KeyAccessInput {
  name: string;
  networks?: string[] | undefined;
  rateLimit?: number | undefined;
  expiresAt?: string | null | undefined;
}

export interface PatchKeyInput extends KeyAccessInput {
  name?: string | undefined;
  networks?: string[] | undefined;
  rateLimit?: number | null | undefined;
  status?: 'active' | 'inactive' | undefined;
  expiresAt?: string | null | undefined;
}

/** What an admin may change on an account (C8). */
export type AccountLimitsPatch = Partial<Pick<UserRow, 'tier' | 'requestsPerMinute' | 'dailyLimit' | 'monthlyLimit'>>;

/** The settings the key service reads: the key prefix, and what its plan rules read. */
export interface KeyServiceSettings extends PlanRulesSettings {
  keys: Pick<KeysConfig, 'prefix'>;
}

/** What the RPC key lookup reads of a key and its account (`lookupByHash`). */
export interface KeyLookupRow {
  key: Pick<KeyRow, 'id' | 'status' | 'expiresAt' | 'networks' | 'allNetworks' | 'rateLimit' | 'access'>;
  user: Pick<UserRow, 'id' | 'tier' | 'requestsPerMinute' | 'dailyLimit' | 'monthlyLimit'>;
}

/** API keys of an account: create, list, change, revoke, rotate, delete (C14–C16, C19–C21). */
export class KeyService {
  readonly #db: Db;
  /** The RPC key lookup by hash, prepared once (`lookupByHash`). */
  readonly #byHash;
  readonly #settings: KeyServiceSettings;
  readonly #cipher: KeyCipher;
  /** C20: every change to a key is published here (caches drop it; the bus relays it). */
  readonly changes = new KeyChanges();
  /** What the account's plan allows its keys (C14-C16, C52). */
  readonly plan: PlanRules;
  /** Counts for the key list (C21): the usage service, given when the app builds this service. */
  readonly usage: KeyUsageReader;
  /** Makes a key value and its prefix (C19); a test may give one that repeats a prefix. */
  readonly #newKey: typeof generateKey;

  constructor(deps: { db: Db; settings: KeyServiceSettings; networks: Networks; encryptionSecret: string; usage?: KeyUsageReader; newKey?: typeof generateKey }) {
    this.#db = deps.db;
    this.#newKey = deps.newKey ?? generateKey;
    this.#settings = deps.settings;
    this.#cipher = new KeyCipher(deps.encryptionSecret);
    this.plan = new PlanRules(deps.settings, deps.networks);
    this.usage = deps.usage ?? NO_USAGE;
    // Only what a key in memory holds (keys/cache.ts): the whole two rows (the password hash,
    // the ciphertext, six timestamps) cost PGlite ~15% more per lookup, ~25% at the p99.
    this.#byHash = this.#db
      .select({
        key: { id: apiKeys.id, status: apiKeys.status, expiresAt: apiKeys.expiresAt, networks: apiKeys.networks, allNetworks: apiKeys.allNetworks, rateLimit: apiKeys.rateLimit, access: apiKeys.access },
        user: { id: users.id, tier: users.tier, requestsPerMinute: users.requestsPerMinute, dailyLimit: users.dailyLimit, monthlyLimit: users.monthlyLimit },
      })
      .from(apiKeys)
      .innerJoin(users, eq(users.id, apiKeys.userId))
      .where(eq(apiKeys.keyHash, sql.placeholder('keyHash')))
      .prepare('api_key_by_hash');
  }

  decryptKey(row: KeyRow): string {
    return this.#cipher.decrypt(row.keyCiphertext, row.id);
  }

  /** The networks a key covers now (C52): see PlanRules.networksOf. */
  networksOf(row: Pick<KeyRow, 'networks' | 'allNetworks'>, account: AccountLimitsInput): string[] {
    return this.plan.networksOf(row, account);
  }

  /** The owner's plan fills `rateLimit` for a key that has none of its own (C14: omitted = plan rate) and an all-networks key's list (C52). */
  view(row: KeyRow, account: AccountLimitsInput, now = new Date()): ApiKeyView {
    let status: KeyStatus = row.status;
    if (status !== 'revoked' && row.expiresAt && row.expiresAt <= now) status = 'expired';
    return {
      id: row.id,
      name: row.name,
      key: this.decryptKey(row),
      prefix: row.prefix,
      networks: this.networksOf(row, account),
      allNetworks: row.allNetworks,
      rateLimit: row.rateLimit ?? effectiveLimits(this.#settings.plans, account).requestsPerMinute,
      ownRateLimit: row.rateLimit,
      status,
      expiresAt: row.expiresAt?.toISOString() ?? null,
      createdAt: row.createdAt.toISOString(),
      ...accessView(row.access),
    };
  }

  async list(userId: string, account: AccountLimitsInput): Promise<ApiKeyListItem[]> {
    const rows = await this.#db.select().from(apiKeys).where(eq(apiKeys.userId, userId)).orderBy(apiKeys.createdAt);
    const usage = await this.usage.usageByKey(
      userId,
      rows.map((r) => r.id),
    );
    const now = new Date();
    return rows.map((r) => ({
      ...this.view(r, account, now),
      usage: usage.get(r.id) ?? { daily: 0, monthly: 0 },
      lastUsedAt: r.lastUsedAt?.toISOString() ?? null,
    }));
  }

  /** An account's keys as stored, oldest first (C52: the admin's view, which never shows key values). */
  async rows(userId: string): Promise<KeyRow[]> {
    return this.#db.select().from(apiKeys).where(eq(apiKeys.userId, userId)).orderBy(apiKeys.createdAt, apiKeys.id);
  }

  async get(userId: string, id: string): Promise<KeyRow> {
    const [row] = await this.#db
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId)));
    // Another account's key is "no such key" too (C7).
    if (!row) throw notFound('API key');
    return row;
  }

  async create(userId: string, input: CreateKeyInput): Promise<KeyRow> {
    const row = await this.#withNewKey(({ key, prefix }) => this.#db.transaction(async (tx) => {
      const user = await lockUser(tx, userId);
      const limits = effectiveLimits(this.#settings.plans, user);
      const others = await tx
        .select({ networks: apiKeys.networks, allNetworks: apiKeys.allNetworks })
        .from(apiKeys)
        .where(and(eq(apiKeys.userId, userId), ne(apiKeys.status, 'revoked')));
      // C15: revoked keys are dead and do not use up the allowance.
      if (limits.maxKeys !== null && others.length >= limits.maxKeys) {
        throw new HttpError('PLAN_LIMIT', `The ${user.tier} plan allows ${limits.maxKeys} API keys`, {
          details: { limit: limits.maxKeys },
        });
      }
      const networks = this.plan.resolveNetworks(user, input.networks, others.map((o) => this.networksOf(o, user)));
      const rateLimit = this.plan.checkRateLimit(user, input.rateLimit);
      const access = hasAccessInput(input) ? applyAccessInput(null, input, this.plan.planMethods(user)) : null;
      const id = randomUUID();
      const [created] = await tx
        .insert(apiKeys)
        .values({
          id,
          userId,
          name: input.name.trim(),
          prefix,
          keyHash: hashKey(key),
          keyCiphertext: this.#cipher.encrypt(key, id),
          networks,
          // C52: none named means every network the plan allows, now and after a plan change.
          allNetworks: !input.networks?.length,
          rateLimit,
          access,
          expiresAt: parseDate(input.expiresAt),
        })
        .returning();
      return created as KeyRow;
    }));
    this.changes.emit({ type: 'created', userId, keyId: row.id, keyHashes: [row.keyHash] });
    return row;
  }

  async update(userId: string, id: string, input: PatchKeyInput): Promise<KeyRow> {
    const row = await this.#db.transaction(async (tx) => {
      const user = await lockUser(tx, userId);
      // The key's row lock orders this PATCH against a concurrent revoke: one sees the other's result.
      const current = await getIn(tx, userId, id, true);
      // C20: revoked is permanent; 409 rather than 400, since the body itself is valid.
      if (current.status === 'revoked') throw new HttpError('CONFLICT', 'A revoked key cannot be changed');
      const patch: Partial<KeyRow> = { updatedAt: new Date() };
      if (input.name !== undefined) patch.name = input.name.trim();
      if (input.networks !== undefined) {
        const others = await tx
          .select({ networks: apiKeys.networks, allNetworks: apiKeys.allNetworks })
          .from(apiKeys)
          .where(and(eq(apiKeys.userId, userId), ne(apiKeys.status, 'revoked'), ne(apiKeys.id, id)));
        patch.networks = this.plan.resolveNetworks(user, input.networks, others.map((o) => this.networksOf(o, user)));
        patch.allNetworks = input.networks.length === 0;
      }
      if (input.rateLimit !== undefined) patch.rateLimit = this.plan.checkRateLimit(user, input.rateLimit ?? undefined);
      if (input.status === 'active' && current.status !== 'active') await this.plan.checkActiveAllowance(tx, user, id);
      if (input.status !== undefined) patch.status = input.status;
      if (input.expiresAt !== undefined) patch.expiresAt = parseDate(input.expiresAt);
      if (hasAccessInput(input)) patch.access = applyAccessInput(current.access, input, this.plan.planMethods(user));
      const [updated] = await tx.update(apiKeys).set(patch).where(eq(apiKeys.id, id)).returning();
      return updated as KeyRow;
    });
    this.changes.emit({ type: 'updated', userId, keyId: id, keyHashes: [row.keyHash] });
    return row;
  }

  /** Revoked for good (C20). Under the key's row lock, so a PATCH running at the same time cannot bring it back. */
  async revoke(userId: string, id: string): Promise<KeyRow> {
    const { row, before } = await this.#db.transaction(async (tx) => {
      const current = await getIn(tx, userId, id, true);
      if (current.status === 'revoked') return { row: current, before: undefined };
      const [updated] = await tx
        .update(apiKeys)
        .set({ status: 'revoked', revokedAt: new Date(), updatedAt: new Date() })
        .where(eq(apiKeys.id, id))
        .returning();
      return { row: updated as KeyRow, before: current };
    });
    if (before) this.changes.emit({ type: 'revoked', userId, keyId: id, keyHashes: [before.keyHash] });
    return row;
  }

  /** A new key value under the same id; the old value stops working at once (C20). */
  async rotate(userId: string, id: string): Promise<KeyRow> {
    const { row, oldHash } = await this.#withNewKey(({ key, prefix }) => this.#db.transaction(async (tx) => {
      const current = await getIn(tx, userId, id, true);
      if (current.status === 'revoked') throw new HttpError('CONFLICT', 'A revoked key cannot be rotated');
      const [updated] = await tx
        .update(apiKeys)
        .set({ prefix, keyHash: hashKey(key), keyCiphertext: this.#cipher.encrypt(key, id), updatedAt: new Date() })
        .where(eq(apiKeys.id, id))
        .returning();
      return { row: updated as KeyRow, oldHash: current.keyHash };
    }));
    this.changes.emit({ type: 'rotated', userId, keyId: id, keyHashes: [oldHash] });
    return row;
  }

  /**
   * C19: writes a new key value, made anew when its prefix is taken. The prefix carries 32 random
   * bits and is unique, so among N stored keys one write in 2^32/N draws a taken one (one in ~4,300
   * at a million keys): that write is tried again with a new value instead of failing with a 500.
   */
  async #withNewKey<T>(write: (made: { key: string; prefix: string }) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write(this.#newKey(this.#settings.keys.prefix));
      } catch (err) {
        if (attempt >= 5 || uniqueViolation(err) !== 'api_keys_prefix_key') throw err;
      }
    }
  }

  async delete(userId: string, id: string): Promise<void> {
    const [row] = await this.#db
      .delete(apiKeys)
      .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId)))
      .returning({ keyHash: apiKeys.keyHash });
    if (!row) throw notFound('API key');
    this.changes.emit({ type: 'deleted', userId, keyId: id, keyHashes: [row.keyHash] });
  }

  /**
   * One key with its account's plan fields, by key hash: the cache-miss path of the RPC key lookup.
   * For scale (docs/scaling.md): a named prepared statement, so PostgreSQL plans the join once per connection, not
   * once per key it has not seen (planning was most of its time: 1.4 ms against 0.4 ms, pgbench, 8 clients).
   */
  async lookupByHash(keyHash: string): Promise<KeyLookupRow | undefined> {
    const [row] = await this.#byHash.execute({ keyHash });
    return row;
  }

  /**
   * Changes an account's tier or limit overrides (C8) and, in the same transaction, brings its
   * keys within the limits that now apply (a downgrade must not leave more usable than the plan
   * allows). Keys that are not revoked are considered, oldest first:
   * - C15: at most `maxKeys` stay `active` (non-expired ones before expired ones, then the
   *   oldest); the others become `inactive`, and their owner can switch one back on only in place
   *   of another.
   * - C16: when the keys name more distinct networks than `maxNetworks`, the first ones named
   *   (keys that stay active first, each key's networks in its order) are kept and the others
   *   removed; if that would leave a key with no network, the plan's defaults (the two native
   *   networks) are among those kept and that key gets them.
   * - C14: a `rateLimit` above the plan rate is lowered to it.
   * Then every cached lookup of the account's keys is dropped, here and over the key-change bus
   * on other instances (C20), so the RPC path sees the change at once.
   *
   * @returns undefined when there is no such account.
   */
  async changeAccountLimits(userId: string, patch: AccountLimitsPatch): Promise<{ user: UserRow; keys: PlanEnforcement } | undefined> {
    const out = await this.#db.transaction(async (tx) => {
      const [locked] = await tx.select().from(users).where(eq(users.id, userId)).for('update');
      if (!locked) return undefined;
      const [user] = await tx
        .update(users)
        .set({ ...patch, updatedAt: new Date() })
        .where(eq(users.id, userId))
        .returning();
      // Locked too: a PATCH or revoke of one of these keys waits for this change, or this for it.
      const rows = await tx.select().from(apiKeys).where(eq(apiKeys.userId, userId)).orderBy(apiKeys.createdAt, apiKeys.id).for('update');
      const changes = this.plan.fitToPlan(user as UserRow, rows);
      const keys: PlanEnforcement = { deactivated: [], networksChanged: [], rateLimited: [] };
      for (const [id, change] of changes) {
        await tx.update(apiKeys).set({ ...change, updatedAt: new Date() }).where(eq(apiKeys.id, id));
        if (change.status) keys.deactivated.push(id);
        if (change.networks) keys.networksChanged.push(id);
        if (change.rateLimit !== undefined) keys.rateLimited.push(id);
      }
      return { user: user as UserRow, keys, hashes: rows.map((r) => r.keyHash) };
    });
    if (!out) return undefined;
    this.changes.emit({ type: 'account', userId, keyHashes: out.hashes });
    return { user: out.user, keys: out.keys };
  }

  /** Hashes of all of an account's keys: a tier or limit change makes their cached lookups stale. */
  async accountChanged(userId: string): Promise<void> {
    const rows = await this.#db.select({ keyHash: apiKeys.keyHash }).from(apiKeys).where(eq(apiKeys.userId, userId));
    this.changes.emit({ type: 'account', userId, keyHashes: rows.map((r) => r.keyHash) });
  }

}


function parseDate(v: string | null | undefined): Date | null {
  return v ? new Date(v) : null;
}

async function lockUser(db: Db, userId: string): Promise<UserRow> {
  const [user] = await db.select().from(users).where(eq(users.id, userId)).for('update');
  if (!user) throw new HttpError('UNAUTHORIZED', 'The account no longer exists');
  return user;
}

/** One key of the account; `lock`: SELECT ... FOR UPDATE (inside a transaction). */
async function getIn(db: Db, userId: string, id: string, lock = false): Promise<KeyRow> {
  const q = db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId)));
  const [row] = lock ? await q.for('update') : await q;
  if (!row) throw notFound('API key');
  return row;
}

