import { randomUUID } from 'node:crypto';
import { and, eq, ne } from 'drizzle-orm';
import type { UserRow } from '../auth/accounts.ts';
import { users } from '../auth/schema.ts';
import type { NetworkRegistry } from '../chains/registry.ts';
import type { Config } from '../config/schema.ts';
import { HttpError, notFound } from '../errors/http.ts';
import { effectiveLimits } from '../metering/plans.ts';
import type { Db } from '../storage/db.ts';
import { generateKey, hashKey, KeyCipher } from './crypto.ts';
import { apiKeys } from './schema.ts';

export type KeyRow = typeof apiKeys.$inferSelect;
export type KeyStatus = 'active' | 'inactive' | 'revoked' | 'expired';

/** What the API shows of a key (spec: API key; C20 adds status and expiresAt). */
export interface ApiKeyView {
  id: string;
  name: string;
  key: string;
  prefix: string;
  networks: string[];
  rateLimit: number | null;
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

/** Published after every change to a key, so caches of key lookups drop it at once (C20). */
export interface KeyChange {
  type: 'created' | 'updated' | 'revoked' | 'rotated' | 'deleted' | 'account';
  userId: string;
  keyId?: string;
  /** Hashes whose cached lookups are stale now. */
  keyHashes: string[];
}

export interface CreateKeyInput {
  name: string;
  networks?: string[] | undefined;
  rateLimit?: number | undefined;
  expiresAt?: string | null | undefined;
}

export interface PatchKeyInput {
  name?: string | undefined;
  networks?: string[] | undefined;
  rateLimit?: number | null | undefined;
  status?: 'active' | 'inactive' | undefined;
  expiresAt?: string | null | undefined;
}

const FREE_DEFAULT_NETWORKS = ['native-mainnet', 'native-testnet'];

/** API keys of an account: create, list, change, revoke, rotate, delete (C14–C16, C19–C21). */
export class KeyService {
  readonly #db: Db;
  readonly #cfg: Config;
  readonly #registry: NetworkRegistry;
  readonly #cipher: KeyCipher;
  readonly #listeners = new Set<(c: KeyChange, remote: boolean) => void>();
  usage: KeyUsageReader = NO_USAGE;

  constructor(deps: { db: Db; config: Config; registry: NetworkRegistry; encryptionSecret: string }) {
    this.#db = deps.db;
    this.#cfg = deps.config;
    this.#registry = deps.registry;
    this.#cipher = new KeyCipher(deps.encryptionSecret);
  }

  /** Subscribe to key changes; returns the unsubscribe function. */
  onChange(listener: (c: KeyChange, remote: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** `remote`: the change was made on another instance and arrived over the bus (C20). */
  emit(change: KeyChange, remote = false): void {
    for (const l of this.#listeners) l(change, remote);
  }

  decryptKey(row: KeyRow): string {
    return this.#cipher.decrypt(row.keyCiphertext, row.id);
  }

  /** `planRate` fills `rateLimit` for a key that has none of its own (C14: omitted = plan rate). */
  view(row: KeyRow, planRate: number | null, now = new Date()): ApiKeyView {
    let status: KeyStatus = row.status;
    if (status !== 'revoked' && row.expiresAt && row.expiresAt <= now) status = 'expired';
    return {
      id: row.id,
      name: row.name,
      key: this.decryptKey(row),
      prefix: row.prefix,
      networks: row.networks,
      rateLimit: row.rateLimit ?? planRate,
      status,
      expiresAt: row.expiresAt?.toISOString() ?? null,
      createdAt: row.createdAt.toISOString(),
    };
  }

  async list(userId: string, planRate: number | null): Promise<ApiKeyListItem[]> {
    const rows = await this.#db.select().from(apiKeys).where(eq(apiKeys.userId, userId)).orderBy(apiKeys.createdAt);
    const usage = await this.usage.usageByKey(
      userId,
      rows.map((r) => r.id),
    );
    const now = new Date();
    return rows.map((r) => ({
      ...this.view(r, planRate, now),
      usage: usage.get(r.id) ?? { daily: 0, monthly: 0 },
      lastUsedAt: r.lastUsedAt?.toISOString() ?? null,
    }));
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
    const row = await this.#db.transaction(async (tx) => {
      const user = await lockUser(tx as unknown as Db, userId);
      const limits = effectiveLimits(this.#cfg, user);
      const others = await tx
        .select({ networks: apiKeys.networks })
        .from(apiKeys)
        .where(and(eq(apiKeys.userId, userId), ne(apiKeys.status, 'revoked')));
      // C15: revoked keys are dead and do not use up the allowance.
      if (limits.maxKeys !== null && others.length >= limits.maxKeys) {
        throw new HttpError('PLAN_LIMIT', `The ${user.tier} plan allows ${limits.maxKeys} API keys`, {
          details: { limit: limits.maxKeys },
        });
      }
      const networks = this.#resolveNetworks(user, input.networks, others.map((o) => o.networks));
      const rateLimit = this.#checkRateLimit(user, input.rateLimit);
      const id = randomUUID();
      const { key, prefix } = generateKey(this.#cfg.keys.prefix);
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
          rateLimit,
          expiresAt: parseDate(input.expiresAt),
        })
        .returning();
      return created as KeyRow;
    });
    this.emit({ type: 'created', userId, keyId: row.id, keyHashes: [row.keyHash] });
    return row;
  }

  async update(userId: string, id: string, input: PatchKeyInput): Promise<KeyRow> {
    const row = await this.#db.transaction(async (tx) => {
      const user = await lockUser(tx as unknown as Db, userId);
      // The key's row lock orders this PATCH against a concurrent revoke: one sees the other's result.
      const current = await getIn(tx as unknown as Db, userId, id, true);
      // C20: revoked is permanent; 409 rather than 400, since the body itself is valid.
      if (current.status === 'revoked') throw new HttpError('CONFLICT', 'A revoked key cannot be changed');
      const patch: Partial<KeyRow> = { updatedAt: new Date() };
      if (input.name !== undefined) patch.name = input.name.trim();
      if (input.networks !== undefined) {
        const others = await tx
          .select({ networks: apiKeys.networks })
          .from(apiKeys)
          .where(and(eq(apiKeys.userId, userId), ne(apiKeys.status, 'revoked'), ne(apiKeys.id, id)));
        patch.networks = this.#resolveNetworks(user, input.networks, others.map((o) => o.networks));
      }
      if (input.rateLimit !== undefined) patch.rateLimit = this.#checkRateLimit(user, input.rateLimit ?? undefined);
      if (input.status !== undefined) patch.status = input.status;
      if (input.expiresAt !== undefined) patch.expiresAt = parseDate(input.expiresAt);
      const [updated] = await tx.update(apiKeys).set(patch).where(eq(apiKeys.id, id)).returning();
      return updated as KeyRow;
    });
    this.emit({ type: 'updated', userId, keyId: id, keyHashes: [row.keyHash] });
    return row;
  }

  /** Revoked for good (C20). Under the key's row lock, so a PATCH running at the same time cannot bring it back. */
  async revoke(userId: string, id: string): Promise<KeyRow> {
    const { row, before } = await this.#db.transaction(async (tx) => {
      const current = await getIn(tx as unknown as Db, userId, id, true);
      if (current.status === 'revoked') return { row: current, before: undefined };
      const [updated] = await tx
        .update(apiKeys)
        .set({ status: 'revoked', revokedAt: new Date(), updatedAt: new Date() })
        .where(eq(apiKeys.id, id))
        .returning();
      return { row: updated as KeyRow, before: current };
    });
    if (before) this.emit({ type: 'revoked', userId, keyId: id, keyHashes: [before.keyHash] });
    return row;
  }

  /** A new key value under the same id; the old value stops working at once (C20). */
  async rotate(userId: string, id: string): Promise<KeyRow> {
    const { key, prefix } = generateKey(this.#cfg.keys.prefix);
    const { row, oldHash } = await this.#db.transaction(async (tx) => {
      const current = await getIn(tx as unknown as Db, userId, id, true);
      if (current.status === 'revoked') throw new HttpError('CONFLICT', 'A revoked key cannot be rotated');
      const [updated] = await tx
        .update(apiKeys)
        .set({ prefix, keyHash: hashKey(key), keyCiphertext: this.#cipher.encrypt(key, id), updatedAt: new Date() })
        .where(eq(apiKeys.id, id))
        .returning();
      return { row: updated as KeyRow, oldHash: current.keyHash };
    });
    this.emit({ type: 'rotated', userId, keyId: id, keyHashes: [oldHash] });
    return row;
  }

  async delete(userId: string, id: string): Promise<void> {
    const [row] = await this.#db
      .delete(apiKeys)
      .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId)))
      .returning({ keyHash: apiKeys.keyHash });
    if (!row) throw notFound('API key');
    this.emit({ type: 'deleted', userId, keyId: id, keyHashes: [row.keyHash] });
  }

  /** One key with its account's plan fields, by key hash: the cache-miss path of the RPC key lookup. */
  async lookupByHash(keyHash: string): Promise<{ key: KeyRow; user: UserRow } | undefined> {
    const [row] = await this.#db
      .select({ key: apiKeys, user: users })
      .from(apiKeys)
      .innerJoin(users, eq(users.id, apiKeys.userId))
      .where(eq(apiKeys.keyHash, keyHash));
    return row;
  }

  /** Hashes of all of an account's keys: a tier or limit change makes their cached lookups stale. */
  async accountChanged(userId: string): Promise<void> {
    const rows = await this.#db.select({ keyHash: apiKeys.keyHash }).from(apiKeys).where(eq(apiKeys.userId, userId));
    this.emit({ type: 'account', userId, keyHashes: rows.map((r) => r.keyHash) });
  }

  /** C16: known slugs only; empty means the plan's default; a free account's keys share 5 networks. */
  #resolveNetworks(user: UserRow, requested: string[] | undefined, otherKeys: string[][]): string[] {
    const unknown = (requested ?? []).filter((s) => !this.#registry.has(s));
    if (unknown.length) {
      throw new HttpError('VALIDATION_ERROR', `Unknown network: ${unknown.join(', ')}`, {
        details: unknown.map((s) => ({ field: 'body.networks', message: `unknown network "${s}"` })),
      });
    }
    let networks = [...new Set(requested ?? [])];
    const limits = effectiveLimits(this.#cfg, user);
    if (networks.length === 0) {
      networks = limits.maxNetworks === null ? this.#registry.all.map((n) => n.slug) : [...FREE_DEFAULT_NETWORKS];
    }
    if (limits.maxNetworks !== null) {
      const distinct = new Set([...otherKeys.flat(), ...networks]);
      if (distinct.size > limits.maxNetworks) {
        throw new HttpError(
          'PLAN_LIMIT',
          `The ${user.tier} plan allows ${limits.maxNetworks} distinct networks across all keys (this would make ${distinct.size})`,
          { details: { limit: limits.maxNetworks, networks: [...distinct] } },
        );
      }
    }
    return networks;
  }

  /** C14: 1 <= rateLimit <= the plan's rate (any >= 1 when the plan is unlimited); omitted = plan rate. */
  #checkRateLimit(user: UserRow, rateLimit: number | undefined): number | null {
    if (rateLimit === undefined) return null;
    const max = effectiveLimits(this.#cfg, user).requestsPerMinute;
    if (rateLimit < 1 || (max !== null && rateLimit > max)) {
      throw new HttpError('VALIDATION_ERROR', `rateLimit must be between 1 and ${max ?? 'any'} requests per minute`, {
        details: [{ field: 'body.rateLimit', message: `must be between 1 and ${max ?? 'any'}` }],
      });
    }
    return rateLimit;
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

