// C41: intents and the solver's transactions in storage. Everything that must not happen twice
// (reserving liquidity, claiming a fill, choosing a nonce) happens in one transaction holding an
// advisory lock, so instances sharing a database take turns; the unique indexes back it up.
import { randomUUID } from 'node:crypto';
import { and, asc, desc, eq, gt, gte, inArray, notInArray, or, type SQL, sql } from 'drizzle-orm';
import type { Hex } from 'viem';
import { keccak256 } from 'viem/utils';
import { AwaitingOpenError, LiquidityError, type ReserveCap, ReserveCapError } from '../errors/domain.ts';
import type { Db } from '../storage/db.ts';
import type { ReserveShares } from './setup.ts';
import { intents as i, intentTransactions as t, type IntentStatus, type IntentTxKind, type IntentTxStatus, LIVE_STATUSES } from './schema.ts';

export type IntentRow = typeof i.$inferSelect;
export type NewIntentRow = typeof i.$inferInsert;
export type IntentTxRow = typeof t.$inferSelect;

/** Statuses whose destination liquidity is spoken for: not filled yet, and may still be. */
const RESERVING: IntentStatus[] = ['awaiting_open', 'opened'];

/** `percent` of `balanceWei`, rounded down to the wei (the percent counted to 1/10,000 of a percent). */
export function shareOf(balanceWei: bigint, percent: number): bigint {
  if (balanceWei <= 0n) return 0n;
  return (balanceWei * BigInt(Math.round(percent * 10_000))) / 1_000_000n;
}

/** What claims a new solver transaction: its intent, kind, network and wallet. */
export interface TxClaim {
  intentId: string;
  kind: IntentTxKind;
  network: string;
  /** Lower-case 0x. */
  fromAddress: string;
  /** The intent must still satisfy this (read under the lock), else nothing is recorded. */
  guard: SQL | undefined;
}

export class IntentStore {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  /**
   * Records a new intent once the destination wallet can cover it (C41): under an advisory lock
   * per (destination network, solver wallet), the wallet's balance minus what the intents not yet
   * filled there reserve (output plus fill gas) must cover this one's. Concurrent creations take
   * turns on the lock, so together they never reserve more than the balance.
   *
   * The balance was read at block `balanceBlock`, before the lock: an intent whose fill was mined
   * after that block (and recorded meanwhile) is no longer reserving, but its payment is not in
   * that balance either, so it is counted as reserved too. (A fill mined by then but not recorded
   * yet is counted twice: the error is on the safe side.)
   *
   * C51, with `shares`: under the same lock, this intent may reserve at most
   * `maxReservePerIntent` percent of the wallet's liquidity, the account's intents reserving there
   * (this one included) at most `maxReservePerAccount` percent, and the intents waiting for their
   * open there (this one included) at most `maxReserveAwaitingOpen` percent. The liquidity the
   * shares are of is the balance itself (what is reserved is still in it): reserving does not
   * lower it, so no series of intents can shrink the shares left to others.
   *
   * An account may have at most `maxAwaitingOpen` intents waiting for their open: counted under
   * a lock per account, taken before the liquidity lock (always in that order), so N+k creations
   * at once leave exactly N.
   *
   * @throws AwaitingOpenError, ReserveCapError or LiquidityError when it does not fit; nothing is recorded.
   */
  async create(
    row: NewIntentRow & { outputWei: string; gasReserveWei: string },
    balanceWei: bigint,
    balanceBlock: number,
    maxAwaitingOpen = Number.POSITIVE_INFINITY,
    shares?: ReserveShares,
  ): Promise<IntentRow> {
    return this.#db.transaction(async (tx) => {
      const userId = row.userId;
      if (userId && maxAwaitingOpen !== Number.POSITIVE_INFINITY) {
        await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`intents:account:${userId}`}, 0))`);
        const [waiting] = await tx
          .select({ n: sql<number>`count(*)::int` })
          .from(i)
          .where(and(eq(i.userId, userId), eq(i.status, 'awaiting_open')));
        if ((waiting?.n ?? 0) >= maxAwaitingOpen) throw new AwaitingOpenError(maxAwaitingOpen);
      }
      await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`intents:liquidity:${row.toNetwork}:${row.solver}`}, 0))`);
      const needed = BigInt(row.outputWei) + BigInt(row.gasReserveWei);
      const share = (cap: ReserveCap): bigint => shareOf(balanceWei, shares?.[cap] ?? 100);
      // C51: one intent's share needs nothing stored.
      if (shares && needed > share('maxReservePerIntent')) throw new ReserveCapError('maxReservePerIntent', shares.maxReservePerIntent, share('maxReservePerIntent'), 0n, needed);
      const each = sql`${i.outputWei} + ${i.gasReserveWei}`;
      const [sum] = await tx
        .select({
          reserved: sql<string | null>`sum(${each})`,
          account: sql<string | null>`sum(${each}) filter (where ${userId ? eq(i.userId, userId) : sql`false`})`,
          awaitingOpen: sql<string | null>`sum(${each}) filter (where ${eq(i.status, 'awaiting_open')})`,
        })
        .from(i)
        .where(and(eq(i.toNetwork, row.toNetwork), eq(i.solver, row.solver), or(inArray(i.status, RESERVING), gt(i.fillBlock, balanceBlock))));
      if (shares && userId) {
        const account = BigInt(sum?.account ?? '0');
        const limit = share('maxReservePerAccount');
        if (account + needed > limit) throw new ReserveCapError('maxReservePerAccount', shares.maxReservePerAccount, limit, account, needed);
      }
      const available = balanceWei - BigInt(sum?.reserved ?? '0');
      if (available < needed) throw new LiquidityError(available < 0n ? 0n : available, needed);
      if (shares) {
        const waiting = BigInt(sum?.awaitingOpen ?? '0');
        const limit = share('maxReserveAwaitingOpen');
        if (waiting + needed > limit) throw new ReserveCapError('maxReserveAwaitingOpen', shares.maxReserveAwaitingOpen, limit, waiting, needed);
      }
      const [created] = await tx.insert(i).values(row).returning();
      return created as IntentRow;
    });
  }

  /** The account's intents, newest first; `before` (an intent id of the account) pages back. */
  async list(userId: string, limit: number, before?: string): Promise<IntentRow[] | null> {
    const where = [eq(i.userId, userId)];
    if (before !== undefined) {
      const [anchor] = await this.#db.select({ createdAt: i.createdAt, id: i.id }).from(i).where(and(eq(i.id, before), eq(i.userId, userId)));
      if (!anchor) return null;
      where.push(sql`(${i.createdAt}, ${i.id}) < (${anchor.createdAt}, ${anchor.id})`);
    }
    return this.#db
      .select()
      .from(i)
      .where(and(...where))
      .orderBy(desc(i.createdAt), desc(i.id))
      .limit(limit);
  }

  async get(id: string): Promise<IntentRow | undefined> {
    const [row] = await this.#db.select().from(i).where(eq(i.id, id));
    return row;
  }

  /** The solver's transactions of these intents, oldest first. */
  async transactionsOf(ids: readonly string[], db: Db = this.#db): Promise<IntentTxRow[]> {
    if (!ids.length) return [];
    return db.select().from(t).where(inArray(t.intentId, [...ids])).orderBy(asc(t.createdAt));
  }

  /** C33: the networks of intents the solver still works on (origins and destinations). */
  async liveNetworks(): Promise<string[]> {
    const rows = await this.#db
      .selectDistinct({ from: i.fromNetwork, to: i.toNetwork })
      .from(i)
      .where(inArray(i.status, [...LIVE_STATUSES]));
    return [...new Set(rows.flatMap((r) => [r.from, r.to]))];
  }

  /**
   * Whether the solver has anything to look at: a live intent or a transaction not yet settled.
   * One query on two partial indexes, so an idle round costs one look instead of one per step.
   */
  async hasWork(): Promise<boolean> {
    const result: unknown = await this.#db.execute(
      sql`select (exists (select 1 from ${i} where ${inArray(i.status, [...LIVE_STATUSES])}) or exists (select 1 from ${t} where ${inArray(t.status, ['pending', 'sent'])})) as work`,
    );
    return (result as { rows: Array<{ work: boolean }> }).rows[0]?.work === true;
  }

  /** Intents in `statuses` matching `where`, oldest first, at most `limit`. */
  async due(statuses: IntentStatus[], where: SQL | undefined, limit = 100): Promise<IntentRow[]> {
    return this.#db
      .select()
      .from(i)
      .where(and(inArray(i.status, statuses), where))
      .orderBy(asc(i.createdAt))
      .limit(limit);
  }

  /**
   * Changes an intent found by (network column, order id) when its status is one of `from`;
   * returns the changed row, or undefined when nothing matched (another status, or another order).
   */
  async transition(
    db: Db,
    by: { network: 'from' | 'to'; slug: string; orderId: string } | { id: string },
    from: readonly IntentStatus[],
    set: Partial<NewIntentRow>,
  ): Promise<IntentRow | undefined> {
    const which = 'id' in by ? eq(i.id, by.id) : and(eq(by.network === 'from' ? i.fromNetwork : i.toNetwork, by.slug), eq(i.orderId, by.orderId.toLowerCase()));
    const [row] = await db
      .update(i)
      .set({ ...set, updatedAt: sql`now()` })
      .where(and(which, inArray(i.status, [...from])))
      .returning();
    return row;
  }

  /** Sets columns of an intent without a status change (e.g. a fill seen before its open). */
  async annotate(db: Db, by: { network: 'from' | 'to'; slug: string; orderId: string }, set: Partial<NewIntentRow>, only?: SQL): Promise<IntentRow | undefined> {
    const [row] = await db
      .update(i)
      .set({ ...set, updatedAt: sql`now()` })
      .where(and(eq(by.network === 'from' ? i.fromNetwork : i.toNetwork, by.slug), eq(i.orderId, by.orderId.toLowerCase()), only))
      .returning();
    return row;
  }

  /**
   * Records a solver transaction as `pending` with its signed bytes, before anything is sent. In
   * one transaction holding an advisory lock per (network, wallet): checks the intent still
   * satisfies the claim's guard and has no live transaction of this kind (the claim: one fill per
   * order, whatever the instances), picks the nonce (the lowest at or above the node's pending
   * count that no live transaction holds, as the faucet does), signs and inserts.
   *
   * @returns the record, or null when the claim was taken or the guard no longer holds.
   */
  async reserveTx(claim: TxClaim, nodeNonce: number, sign: (nonce: number) => Promise<Hex>): Promise<IntentTxRow | null> {
    return this.#db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`intents:wallet:${claim.network}:${claim.fromAddress}`}, 0))`);
      const [ok] = await tx
        .select({ id: i.id })
        .from(i)
        .where(and(eq(i.id, claim.intentId), claim.guard))
        .for('update');
      if (!ok) return null;
      const [live] = await tx
        .select({ id: t.id })
        .from(t)
        .where(and(eq(t.intentId, claim.intentId), eq(t.kind, claim.kind), notInArray(t.status, ['failed', 'reverted'])));
      if (live) return null;
      const held = await tx
        .select({ nonce: t.nonce })
        .from(t)
        .where(and(eq(t.network, claim.network), eq(t.fromAddress, claim.fromAddress), sql`${t.status} <> 'failed'`, gte(t.nonce, nodeNonce)))
        .orderBy(asc(t.nonce));
      let nonce = nodeNonce;
      for (const { nonce: n } of held) {
        if (n > nonce) break;
        if (n === nonce) nonce++;
      }
      const rawTx = await sign(nonce);
      const [row] = await tx
        .insert(t)
        .values({
          id: randomUUID(),
          intentId: claim.intentId,
          kind: claim.kind,
          network: claim.network,
          fromAddress: claim.fromAddress,
          nonce,
          txHash: keccak256(rawTx),
          rawTx,
          status: 'pending',
        })
        .returning();
      return row ?? null;
    });
  }

  /** Moves a solver transaction from one of `from` to `to`. */
  async markTx(id: string, from: readonly IntentTxStatus[], to: IntentTxStatus, error?: string, db: Db = this.#db): Promise<void> {
    await db
      .update(t)
      .set({ status: to, updatedAt: sql`now()`, ...(error === undefined ? {} : { error: error.slice(0, 500) }) })
      .where(and(eq(t.id, id), inArray(t.status, [...from])));
  }

  /** The solver's transaction with this hash became part of a confirmed block (seen in an event). */
  async minedByHash(db: Db, txHash: string): Promise<void> {
    await db
      .update(t)
      .set({ status: 'mined', updatedAt: sql`now()` })
      .where(and(eq(t.txHash, txHash.toLowerCase()), inArray(t.status, ['pending', 'sent'])));
  }

  /** A sent transaction was sent again (the node had dropped it): its next check waits from now. */
  async touchTx(id: string): Promise<void> {
    await this.#db.update(t).set({ updatedAt: sql`now()` }).where(eq(t.id, id));
  }

  /**
   * Solver transactions not known to be in a block, last touched at least `minAgeMs` ago, per
   * network and wallet in nonce order.
   */
  async unsettledTxs(minAgeMs: number, limit = 500): Promise<IntentTxRow[]> {
    return this.#db
      .select()
      .from(t)
      .where(and(inArray(t.status, ['pending', 'sent']), sql`${t.updatedAt} <= now() - (${minAgeMs}::int * interval '1 millisecond')`))
      .orderBy(asc(t.network), asc(t.fromAddress), asc(t.nonce))
      .limit(limit);
  }

  /** Whether the intent has a transaction of `kind` in one of `statuses`. */
  static hasTx(kind: IntentTxKind, statuses: readonly IntentTxStatus[]): SQL {
    return sql`exists (select 1 from ${t} where ${t.intentId} = ${i.id} and ${t.kind} = ${kind} and ${inArray(t.status, [...statuses])})`;
  }
}
