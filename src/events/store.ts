// C33: the follower's cursors and leases in storage. Every check uses the database's clock, so
// instances with skewed clocks still agree on who holds a lease.
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../storage/db.ts';
import { followerCursors, followerLeases } from './schema.ts';
import { StorageError } from '../errors/storage.ts';

export class FollowerStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /**
   * Takes or renews the lease on a network for `seconds`, in one atomic upsert: it succeeds when
   * nobody holds it, when it expired, or when it is already `holder`'s.
   */
  async acquire(network: string, holder: string, seconds: number): Promise<boolean> {
    const rows = await this.#db
      .insert(followerLeases)
      .values({ network, holder, expiresAt: sql`now() + make_interval(secs => ${seconds})` })
      .onConflictDoUpdate({
        target: followerLeases.network,
        set: { holder: sql`excluded.holder`, expiresAt: sql`excluded.expires_at` },
        setWhere: sql`${followerLeases.expiresAt} <= now() or ${followerLeases.holder} = excluded.holder`,
      })
      .returning({ holder: followerLeases.holder });
    return rows.length === 1;
  }

  /** Gives the lease up (a graceful stop), so another instance takes over at once. */
  async release(network: string, holder: string): Promise<void> {
    await this.#db.delete(followerLeases).where(and(eq(followerLeases.network, network), eq(followerLeases.holder, holder)));
  }

  /** The next block to hand on, or null for a network never followed. */
  async cursor(network: string): Promise<number | null> {
    const [row] = await this.#db.select({ next: followerCursors.nextBlock }).from(followerCursors).where(eq(followerCursors.network, network));
    return row?.next ?? null;
  }

  /** Makes the cursor of a network never followed (no history replay) and returns the cursor now in storage. */
  async initCursor(network: string, next: number): Promise<number> {
    await this.#db.insert(followerCursors).values({ network, nextBlock: next }).onConflictDoNothing({ target: followerCursors.network });
    const now = await this.cursor(network);
    if (now === null) throw new StorageError(`the cursor of ${network} could not be written`);
    return now;
  }

  /**
   * Moves the cursor from `from` to `to` if it is still at `from` and `holder`'s lease has not
   * expired; false otherwise (the caller rolls back). Inside a block's transaction this is the
   * first statement: it locks the cursor row, so a paused former holder and the new one cannot
   * both commit a block, and a consumer's writes commit only with the cursor moving past it.
   */
  async advance(tx: Db, network: string, from: number, to: number, holder: string): Promise<boolean> {
    const rows = await tx
      .update(followerCursors)
      .set({ nextBlock: to, updatedAt: sql`now()` })
      .where(
        and(
          eq(followerCursors.network, network),
          eq(followerCursors.nextBlock, from),
          sql`exists (select 1 from ${followerLeases} where ${followerLeases.network} = ${network} and ${followerLeases.holder} = ${holder} and ${followerLeases.expiresAt} > now())`,
        ),
      )
      .returning({ next: followerCursors.nextBlock });
    return rows.length === 1;
  }
}
