// Accounts (C4, C5): registration, credential checks and lookups, and what the API shows of one.
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { Tier } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
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

function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: string }).code === '23505') return true;
  }
  return false;
}

/** Accounts: registration, credential checks, lookups (C4, C5). */
export class AccountService {
  readonly #db: Db;
  readonly #hashCost: number;
  /**
   * The account by id, prepared once (docs/scaling.md): every plan-gated REST call reads it (its plan is
   * never cached: a plan change applies to the next call), so it is not rebuilt and planned anew
   * each time.
   */
  readonly #byId;
  /** `passwordHashCost`: `auth.passwordHashCost`, log2 of scrypt's N for new hashes. */
  constructor(db: Db, opts: { passwordHashCost?: number } = {}) {
    this.#db = db;
    this.#hashCost = opts.passwordHashCost ?? DEFAULT_HASH_COST;
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
      if (isUniqueViolation(err)) throw new HttpError('EMAIL_TAKEN', 'An account with this e-mail already exists');
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
    return row;
  }
}
