// C29: faucet grants in storage: cooldowns, nonce allocation, and each grant's record from pending to mined or failed.
import { randomUUID } from 'node:crypto';
import { and, asc, eq, gte, lte, ne, or, sql } from 'drizzle-orm';
import type { Hex } from 'viem';
import { keccak256 } from 'viem/utils';
import { CooldownError, type CooldownWait } from '../errors/domain.ts';
import type { Db } from '../storage/db.ts';
import { faucetGrants as g, type GrantStatus } from './schema.ts';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** A grant as stored. Addresses are lower-case 0x. */
export interface Grant {
  id: string;
  userId: string | null;
  network: string;
  faucetAddress: string;
  recipient: string;
  amountWei: bigint;
  nonce: number;
  txHash: Hex;
  rawTx: Hex;
  status: GrantStatus;
}

export interface NewGrant {
  userId: string;
  network: string;
  faucetAddress: string;
  recipient: string;
  amountWei: bigint;
}

const toGrant = (r: typeof g.$inferSelect): Grant => ({
  id: r.id,
  userId: r.userId,
  network: r.network,
  faucetAddress: r.faucetAddress,
  recipient: r.recipient,
  amountWei: BigInt(r.amountWei),
  nonce: r.nonce,
  txHash: r.txHash as Hex,
  rawTx: r.rawTx as Hex,
  status: r.status,
});

/** Faucet grants in storage: cooldowns, nonce allocation and the pending → sent → mined (or failed) record (C29). */
export class GrantStore {
  readonly #db: Db;
  readonly #cooldownSeconds: number;

  constructor(db: Db, cooldownSeconds: number) {
    this.#db = db;
    this.#cooldownSeconds = cooldownSeconds;
  }

  /** How long until `recipient` and `userId` may each receive again on `network`. Failed grants do not count. */
  async cooldown(q: { network: string; recipient: string; userId: string }, tx: Db | Tx = this.#db): Promise<CooldownWait> {
    const window = sql`(${this.#cooldownSeconds}::int * interval '1 second')`;
    const wait = (filter: ReturnType<typeof eq>) =>
      sql<number | null>`ceil(extract(epoch from (max(${g.createdAt}) filter (where ${filter}) + ${window} - now())))::int`;
    const [row] = await (tx as Db)
      .select({ address: wait(eq(g.recipient, q.recipient)), account: wait(eq(g.userId, q.userId)) })
      .from(g)
      .where(
        and(
          eq(g.network, q.network),
          ne(g.status, 'failed'),
          sql`${g.createdAt} > now() - ${window}`,
          sql`(${g.recipient} = ${q.recipient} or ${g.userId} = ${q.userId})`,
        ),
      );
    return { address: Math.max(0, row?.address ?? 0), account: Math.max(0, row?.account ?? 0) };
  }

  /**
   * Records a grant as `pending` with its signed transaction, before anything is sent (C29). In
   * one transaction holding an advisory lock per (faucet wallet, network), so that instances
   * sharing a database take turns: checks both cooldowns, picks the nonce (the lowest at or
   * above the node's pending count that no live grant holds: a failed grant's nonce is reused,
   * so no gap stalls the wallet), signs with it and inserts.
   *
   * @throws CooldownError when a cooldown is running; nothing is recorded.
   */
  async reserve(grant: NewGrant, nodeNonce: number, sign: (nonce: number) => Promise<Hex>): Promise<Grant> {
    return this.#db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`faucet:${grant.network}:${grant.faucetAddress}`}, 0))`);
      const wait = await this.cooldown({ network: grant.network, recipient: grant.recipient, userId: grant.userId }, tx);
      if (wait.address > 0 || wait.account > 0) throw new CooldownError(wait);
      const held = await tx
        .select({ nonce: g.nonce })
        .from(g)
        .where(
          and(eq(g.network, grant.network), eq(g.faucetAddress, grant.faucetAddress), ne(g.status, 'failed'), gte(g.nonce, nodeNonce)),
        )
        .orderBy(asc(g.nonce));
      let nonce = nodeNonce;
      for (const { nonce: n } of held) {
        if (n > nonce) break;
        if (n === nonce) nonce++;
      }
      const rawTx = await sign(nonce);
      const row = {
        id: randomUUID(),
        userId: grant.userId,
        network: grant.network,
        faucetAddress: grant.faucetAddress,
        recipient: grant.recipient,
        amountWei: grant.amountWei.toString(),
        nonce,
        txHash: keccak256(rawTx),
        rawTx,
        status: 'pending' as const,
      };
      await tx.insert(g).values(row);
      return toGrant({ ...row, error: null, createdAt: new Date(), updatedAt: new Date() });
    });
  }

  /** A node accepted the transaction. Only a pending grant changes. */
  async markSent(id: string): Promise<void> {
    await this.#db
      .update(g)
      .set({ status: 'sent', error: null, updatedAt: sql`now()` })
      .where(and(eq(g.id, id), eq(g.status, 'pending')));
  }

  /**
   * The node refused it: its nonce is free again and it uses up no cooldown (the cooldown is given
   * back). Only a grant still in status `from` changes: pending (first broadcast) or sent (a
   * re-send after the node dropped it).
   */
  async markFailed(id: string, error: string, from: 'pending' | 'sent' = 'pending'): Promise<void> {
    await this.#db
      .update(g)
      .set({ status: 'failed', error: error.slice(0, 500), updatedAt: sql`now()` })
      .where(and(eq(g.id, id), eq(g.status, from)));
  }

  /** The transaction is in a block: nothing is left to check. Only a sent grant changes. */
  async markMined(id: string): Promise<void> {
    await this.#db
      .update(g)
      .set({ status: 'mined', updatedAt: sql`now()` })
      .where(and(eq(g.id, id), eq(g.status, 'sent')));
  }

  /** A sent grant was sent again (the node had dropped it): its next check waits from now. */
  async markResent(id: string): Promise<void> {
    await this.#db
      .update(g)
      .set({ updatedAt: sql`now()` })
      .where(and(eq(g.id, id), eq(g.status, 'sent')));
  }

  /**
   * Grants not known to be settled, per network and wallet in nonce order: pending ones recorded
   * at least `minAgeMs` ago, and sent ones last sent at least `minAgeMs` ago (not mined yet, as
   * far as this record knows). At most `limit`, lowest nonces first.
   */
  async unsettled(minAgeMs = 0, limit = 500): Promise<Grant[]> {
    const age = sql`now() - (${minAgeMs}::int * interval '1 millisecond')`;
    const rows = await this.#db
      .select()
      .from(g)
      .where(or(and(eq(g.status, 'pending'), lte(g.createdAt, age)), and(eq(g.status, 'sent'), lte(g.updatedAt, age))))
      .orderBy(asc(g.network), asc(g.faucetAddress), asc(g.nonce))
      .limit(limit);
    return rows.map(toGrant);
  }
}
