// Accounts (C4, C5): registration, credential checks and lookups, and what the API shows of one.
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { Tier } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
import { uniqueViolation } from '../errors/storage.ts';
import type { Db } from '../storage/db.ts';
import { DEFAULT_HASH_COST, dummyHash, hashPassword, verifyPassword } from './passwords.ts';
import { users } from './schema.ts';

export type UserRow = typeof users.$inferSelect;

/** What the API shows of an account (spec: User). */
export interface PublicUser {
  id: string;
  email: string;
  name: string;
  tier: Tier;
}

export function toPublicUser(u: UserRow): PublicUser {
  return { id: u.id, email: u.email, name: u.name, tier: u.tier as Tier };
}

export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/**
 * C20, as for keys: the longest a signed-in account's row serves REST requests after it was read,
 * when no change was heard of (a tier or limits change drops it at once: `forget`).
 */
export const SIGNED_IN_TTL_MS = 1_000;
/** Signed-in accounts kept at most (the oldest read first out). */
const SIGNED_IN_MAX = 10_000;

/** Accounts: registration, credential checks, lookups (C4, C5). */
export class AccountService {
  readonly #db: Db;
  readonly #hashCost: number;
  /** The account by id, prepared once (docs/scaling.md), not rebuilt and planned anew each time. */
  readonly #byId;
  /**
   * Signed-in accounts' reads by id (`signedIn`), each kept from its start: requests of one account
   * at once share one read, and later ones use it for SIGNED_IN_TTL_MS.
   */
  readonly #signedIn = new Map<string, { read: Promise<UserRow | undefined>; until: number }>();
  readonly #signedInMax: number;
  readonly #signedInTtlMs: number;
  /**
   * `passwordHashCost`: `auth.passwordHashCost`, log2 of scrypt's N for new hashes.
   * `signedIn`: how many signed-in accounts are kept at most and for how long (SIGNED_IN_MAX,
   * SIGNED_IN_TTL_MS; a test sets its own).
   */
  constructor(db: Db, opts: { passwordHashCost?: number; signedIn?: { max: number; ttlMs: number } } = {}) {
    this.#db = db;
    this.#hashCost = opts.passwordHashCost ?? DEFAULT_HASH_COST;
    this.#signedInMax = opts.signedIn?.max ?? SIGNED_IN_MAX;
    this.#signedInTtlMs = opts.signedIn?.ttlMs ?? SIGNED_IN_TTL_MS;
    this.#byId = db.select().from(users).where(eq(users.id, sql.placeholder('id'))).prepare('account_by_id');
  }

  async register(input: { email: string; password: string; name: string }): Promise<UserRow> {
    const email = normaliseEmail(input.email);
    const passwordHash = await hashPassword(input.password, this.#hashCost);
    try {
      const [row] = await this.#db
        .insert(users)
        .values({ id: randomUUID(), email, name: input.name.trim(), passwordHash, tier: 'free' })
        .returning();
      return row as UserRow;
    } catch (err) {
      if (uniqueViolation(err) !== undefined) throw new HttpError('EMAIL_TAKEN', 'An account with this e-mail already exists');
      throw err;
    }
  }

  /** The account if the password matches; one error for "no account" and "wrong password". */
  async authenticate(emailRaw: string, password: string): Promise<UserRow> {
    const user = await this.findByEmail(emailRaw);
    const ok = await verifyPassword(password, user?.passwordHash ?? (await dummyHash(this.#hashCost)));
    if (!user || !ok) throw new HttpError('INVALID_CREDENTIALS', 'E-mail or password is wrong');
    return user;
  }

  /** Whether `password` is this account's (a bounded hash: may throw 503 when all slots are busy). */
  checkPassword(user: UserRow, password: string): Promise<boolean> {
    return verifyPassword(password, user.passwordHash);
  }

  async setPassword(id: string, password: string): Promise<void> {
    const passwordHash = await hashPassword(password, this.#hashCost);
    await this.#db.update(users).set({ passwordHash, updatedAt: new Date() }).where(eq(users.id, id));
  }

  async findById(id: string): Promise<UserRow | undefined> {
    const [row] = await this.#byId.execute({ id });
    return row;
  }

  /**
   * The signed-in account's row for the REST API's plan checks and limits (C13, C36, C37, C46),
   * without a storage read per request (docs/scaling.md): a read is shared by the requests of that
   * account that come while it is under way and serves those of the next SIGNED_IN_TTL_MS. A tier
   * or limits change drops it at once, on this instance and, over the key-change bus or the
   * workers' primary, on the others (C20: `forget`); a read under way when the change came serves
   * only the requests already waiting on it. A failed read, or no such account, is not kept.
   */
  signedIn(id: string): Promise<UserRow | undefined> {
    const now = Date.now();
    const kept = this.#signedIn.get(id);
    if (kept && kept.until > now) return kept.read;
    if (kept) this.#signedIn.delete(id);
    const entry = { read: this.findById(id), until: now + this.#signedInTtlMs };
    this.#signedIn.set(id, entry);
    const drop = () => {
      if (this.#signedIn.get(id) === entry) this.#signedIn.delete(id);
    };
    entry.read.then((row) => row === undefined && drop(), drop);
    if (this.#signedIn.size > this.#signedInMax) this.#signedIn.delete(this.#signedIn.keys().next().value as string);
    return entry.read;
  }

  /** The account changed (its tier or limits, C20): its next signed-in request reads it again. */
  forget(id: string): void {
    this.#signedIn.delete(id);
  }

  /** Accounts oldest first, a page at a time (C52: the admin's list). */
  async list(page: { limit: number; offset: number }): Promise<UserRow[]> {
    return this.#db.select().from(users).orderBy(users.createdAt, users.id).limit(page.limit).offset(page.offset);
  }

  async findByEmail(emailRaw: string): Promise<UserRow | undefined> {
    const [row] = await this.#db.select().from(users).where(eq(users.email, normaliseEmail(emailRaw)));
    return row;
  }

  async update(
    id: string,
    patch: Partial<Pick<UserRow, 'tier' | 'requestsPerMinute' | 'dailyLimit' | 'monthlyLimit'>>,
  ): Promise<UserRow | undefined> {
    const [row] = await this.#db
      .update(users)
      .set({ ...patch, updatedAt: new Date() })
      .where(eq(users.id, id))
      .returning();
    this.forget(id);
    return row;
  }
}
