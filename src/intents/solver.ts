// C41: the solver. Driven by the block follower (C33) on the origin and destination networks of
// open intents, it moves each intent awaiting_open -> opened -> filled -> settled, or to expired
// or refunded, and sends the solver's transactions (fill, settle, refund) recorded before sending.
import { and, isNotNull, isNull, not, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Address, Hex } from 'viem';
import { decodeFunctionResult, encodeFunctionData, pad, toHex } from 'viem/utils';
import type { EventsConfig } from '../config/schema.ts';
import type { BlockConsumer, FollowedBlock } from '../events/types.ts';
import { SerialJob } from '../jobs/serial.ts';
import type { Db } from '../storage/db.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import type { Webhooks } from '../webhooks/service.ts';
import type { IntentsSetup } from './setup.ts';
import { decodeSettlerLog, encodeFill, encodeOriginData, encodeRefund, encodeSettle, originAbi, type RawLog, type SettlerEvent, settlerTopics } from './contracts.ts';
import { intents as i, type IntentStatus, type IntentTxKind } from './schema.ts';
import type { IntentService } from './service.ts';
import { SolverTransactions } from './solver-txs.ts';
import { IntentStore, type IntentRow } from './store.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';

export interface SolverOptions {
  db: Db;
  /** C33: how deep a block must be before the solver reads it, as for the block follower. */
  settings: { events: Pick<EventsConfig, 'confirmations'> };
  intents: IntentService;
  upstreams: Upstreams;
  webhooks: Webhooks;
  logger: Logger;
}

/** Counters of this instance's solver (tests, metrics). */
export interface SolverStats {
  rounds: number;
  /** Rounds that found no live intent and no unsettled transaction, and so asked storage once. */
  idle: number;
  sent: Record<IntentTxKind, number>;
}

/** How often an intent awaiting its open is looked up directly (an open the follower did not see). */
const OPEN_LOOKUP_EVERY_MS = 15_000;
/** Blocks back the direct lookup searches for an Open event. */
const OPEN_LOOKUP_BLOCKS = 5_000;

const errText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Solver implements BlockConsumer {
  readonly name = 'intents';
  readonly stats: SolverStats = { rounds: 0, idle: 0, sent: { fill: 0, settle: 0, refund: 0 } };
  readonly #db: Db;
  readonly #setup: IntentsSetup;
  readonly #store: IntentStore;
  readonly #intents: IntentService;
  readonly #upstreams: Upstreams;
  readonly #webhooks: Webhooks;
  readonly #log: Logger;
  readonly #confirmations: number;
  /** Blocks whose changes are to be acted on once committed (afterCommit). */
  readonly #changed = new Set<string>();
  /** By block hash: the settler logs `prepare` read for it, outside the storage transaction. */
  readonly #preparedLogs = new Map<string, RawLog[]>();
  /** Per intent awaiting its open: when it was last looked up directly. */
  readonly #lookedUp = new Map<string, number>();
  readonly #txs: SolverTransactions;
  #timer: NodeJS.Timeout | undefined;
  /** C33: a round now, or right after the one running. */
  readonly #rounds = new SerialJob(() => this.#round());
  /** C48: a database outage is said once, not by each step of each round. */
  readonly #outage: StorageOutageLog;
  #first = true;
  #closed = false;

  constructor(opts: SolverOptions) {
    this.#db = opts.db;
    this.#intents = opts.intents;
    this.#setup = opts.intents.setup;
    this.#store = opts.intents.store;
    this.#upstreams = opts.upstreams;
    this.#webhooks = opts.webhooks;
    this.#log = opts.logger.child({ component: 'solver' });
    this.#outage = new StorageOutageLog(this.#log, 'solver');
    this.#confirmations = Math.max(1, opts.settings.events.confirmations);
    this.#txs = new SolverTransactions({ setup: this.#setup, store: this.#store, upstreams: this.#upstreams, logger: this.#log, stats: this.stats, closed: () => this.#closed });
  }

  /** C33: the origins and destinations of intents still in progress (those with settlers). */
  async networks(): Promise<string[]> {
    return (await this.#store.liveNetworks()).filter((n) => this.#setup.settlers.has(n));
  }

  /**
   * Reads the settler events of a confirmed block (only for blocks with a transaction to one of
   * the network's settlers: one eth_getLogs by block hash) and applies them in the follower's
   * transaction, with the intent.updated events they cause.
   */
  async onBlock(block: FollowedBlock, tx: Db): Promise<void> {
    const s = this.#setup.settlers.get(block.network);
    if (!s) return;
    const origin = s.origin.toLowerCase();
    const destination = s.destination.toLowerCase();
    // Read by prepare, before the transaction; a block handed without it (a direct call) reads them here.
    const prepared = this.#preparedLogs.get(block.hash);
    this.#preparedLogs.delete(block.hash);
    if (!prepared && !block.transactions.some((t) => t.to === origin || t.to === destination)) return;
    const logs = prepared ?? (await this.#settlerLogs(block, origin, destination));
    let changed = false;
    for (const log of logs) {
      if (log.removed) continue;
      const ev = decodeSettlerLog(log);
      if (!ev) continue;
      // Each event only from the contract that emits it.
      const from = log.address.toLowerCase();
      if (ev.kind === 'filled' ? from !== destination : from !== origin) continue;
      if (await this.#apply(tx, block.network, { number: block.number, timestamp: block.timestamp }, ev, log.transactionHash.toLowerCase())) changed = true;
    }
    if (changed) this.#changed.add(`${block.network}:${block.number}`);
  }

  /** Before the blocks' transaction (C33): the settler logs of those that call a settler, so storage never waits on a node. */
  async prepare(blocks: readonly FollowedBlock[]): Promise<void> {
    // More than this were prepared and never handed on (rolled back): dropped.
    if (this.#preparedLogs.size > 1_000) this.#preparedLogs.clear();
    await Promise.all(
      blocks.map(async (block) => {
        const s = this.#setup.settlers.get(block.network);
        if (!s) return;
        const origin = s.origin.toLowerCase();
        const destination = s.destination.toLowerCase();
        if (!block.transactions.some((t) => t.to === origin || t.to === destination)) return;
        this.#preparedLogs.set(block.hash, await this.#settlerLogs(block, origin, destination));
      }),
    );
  }

  #settlerLogs(block: FollowedBlock, origin: string, destination: string): Promise<RawLog[]> {
    return this.#upstreams.pool(block.network).request<RawLog[]>('eth_getLogs', [{ blockHash: block.hash, address: [origin, destination] }]);
  }

  afterCommit(block: FollowedBlock): void {
    if (!this.#changed.delete(`${block.network}:${block.number}`)) return;
    this.#webhooks.wake();
    this.kick();
  }

  /** Starts the rounds: at once (re-sending what a restart left pending), then every `checkIntervalMs`. */
  start(): void {
    if (this.#timer || this.#closed) return;
    this.kick();
    this.#timer = setInterval(() => this.kick(), this.#setup.checkIntervalMs);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#rounds.stop();
  }

  /** Runs a round now (or right after the one running). */
  kick(): void {
    if (this.#closed) return;
    void this.#rounds.request();
  }

  async #round(): Promise<void> {
    // Nothing live and nothing in flight: no step would find anything (each looks only at live
    // intents or unsettled transactions), so the round stops after one look.
    if (!(await this.#hasWork())) {
      this.#first = false;
      this.stats.rounds += 1;
      this.stats.idle += 1;
      return;
    }
    const steps: Array<[string, () => Promise<void>]> = [
      ['re-sending transactions', () => this.#txs.reconcile(this.#first ? 0 : this.#setup.resendAfterMs)],
      ['expiring intents', () => this.#awaitingOpen()],
      ['filling', () => this.#fills()],
      ['settling', () => this.#settles()],
      ['refunding', () => this.#refunds()],
    ];
    let storageFailed = false;
    for (const [what, step] of steps) {
      if (this.#closed) return;
      try {
        await step();
      } catch (err) {
        if (this.#outage.failed(err)) storageFailed = true;
        else this.#log.warn({ err: errText(err) }, `solver: ${what} failed; retried next round`);
      }
    }
    if (!storageFailed) this.#outage.ok();
    this.#first = false;
    this.stats.rounds += 1;
  }

  /** Whether a round has anything to do; on a storage error, yes (the steps then say what failed). */
  async #hasWork(): Promise<boolean> {
    try {
      return await this.#store.hasWork();
    } catch {
      return true;
    }
  }

  /** Applies one settler event; true when an intent changed. */
  async #apply(tx: Db, network: string, block: { number: number; timestamp: number }, ev: SettlerEvent, txHash: string): Promise<boolean> {
    const at = new Date(block.timestamp * 1000);
    const orderId = ev.orderId.toLowerCase();
    const byOrigin = { network: 'from' as const, slug: network, orderId };
    let row: IntentRow | undefined;
    switch (ev.kind) {
      case 'open': {
        const [intent] = await tx
          .select()
          .from(i)
          .where(and(sql`${i.fromNetwork} = ${network}`, sql`${i.orderId} = ${orderId}`));
        if (!intent) return false; // an order this gateway did not make
        const hold = mismatch(intent, ev, block.timestamp);
        if (hold) this.#log.warn({ intentId: intent.id, network, txHash, reason: hold }, 'solver: an open that does not match its intent; it will not be filled, and is refunded after the fill deadline');
        row = await this.#store.transition(tx, byOrigin, ['awaiting_open', 'expired'], {
          status: intent.filler ? 'filled' : 'opened',
          openTxHash: txHash,
          openBlock: block.number,
          openedAt: at,
          fillDeadline: ev.order.fillDeadline,
          holdReason: hold,
          expiredAt: null,
        });
        break;
      }
      case 'filled': {
        await this.#store.minedByHash(tx, txHash);
        const set = { filler: ev.filler.toLowerCase(), fillTxHash: txHash, fillBlock: block.number, filledAt: at };
        row = await this.#store.transition(tx, { network: 'to', slug: network, orderId }, ['opened'], { status: 'filled', ...set });
        // Filled before its open was seen here: kept for when it is.
        if (!row) await this.#store.annotate(tx, { network: 'to', slug: network, orderId }, set, isNull(i.filler));
        break;
      }
      case 'settled':
        await this.#store.minedByHash(tx, txHash);
        row = await this.#store.transition(tx, byOrigin, ['awaiting_open', 'opened', 'filled', 'expired'], {
          status: 'settled',
          settleTxHash: txHash,
          settleBlock: block.number,
          settledAt: at,
        });
        break;
      case 'refunded':
        await this.#store.minedByHash(tx, txHash);
        row = await this.#store.transition(tx, byOrigin, ['awaiting_open', 'opened', 'filled', 'expired'], {
          status: 'refunded',
          refundTxHash: txHash,
          refundBlock: block.number,
          refundedAt: at,
        });
        break;
    }
    if (!row) return false;
    this.#log.info({ intentId: row.id, status: row.status, network, txHash }, 'intent updated');
    await this.#publish(tx, row);
    return true;
  }

  /** C38: `intent.updated` for the intent's account, in the transaction that changed it. */
  async #publish(tx: Db, row: IntentRow): Promise<void> {
    if (!row.userId) return;
    const data = await this.#intents.view(row, tx);
    await this.#webhooks.publish(tx, { type: 'intent.updated', data: { ...data }, accountId: row.userId });
  }

  /** A status change outside the follower (expiry, a direct lookup) in its own transaction. */
  async #change(id: string, from: IntentStatus[], set: Partial<IntentRow>): Promise<IntentRow | undefined> {
    const row = await this.#db.transaction(async (tx) => {
      const r = await this.#store.transition(tx, { id }, from, set);
      if (r) await this.#publish(tx, r);
      return r;
    });
    if (row) {
      this.#log.info({ intentId: row.id, status: row.status }, 'intent updated');
      this.#webhooks.wake();
    }
    return row;
  }

  /** The newest block with enough confirmations (C33) on `network`. */
  async #confirmedHead(network: string): Promise<number> {
    const head = Number(BigInt(await this.#upstreams.pool(network).request<Hex>('eth_blockNumber', [])));
    return Math.max(0, head - this.#confirmations + 1);
  }

  /**
   * Intents awaiting their open: every OPEN_LOOKUP_EVERY_MS and once past the open deadline, the
   * Open event is looked up directly (an open through a contract wallet, or one mined before the
   * follower followed the network). Past the open deadline plus `expiryGraceSeconds` with no
   * escrow at a confirmed block, the intent is expired: no open can succeed any more.
   */
  async #awaitingOpen(): Promise<void> {
    const now = Date.now();
    const rows = await this.#store.due(['awaiting_open'], undefined, 200);
    const live = new Set(rows.map((r) => r.id));
    for (const id of this.#lookedUp.keys()) if (!live.has(id)) this.#lookedUp.delete(id);
    for (const row of rows) {
      const pastDeadline = now / 1000 > row.openDeadline + this.#setup.expiryGraceSeconds;
      const last = this.#lookedUp.get(row.id);
      if (last === undefined) this.#lookedUp.set(row.id, now);
      if (!pastDeadline && (last === undefined || now - last < OPEN_LOOKUP_EVERY_MS)) continue;
      this.#lookedUp.set(row.id, now);
      try {
        if (await this.#lookUpOpen(row)) continue;
        if (!pastDeadline) continue;
        const confirmed = await this.#confirmedHead(row.fromNetwork);
        const escrow = await this.#escrow(row, confirmed);
        if (escrow.status === 0) await this.#change(row.id, ['awaiting_open'], { status: 'expired', expiredAt: new Date() });
        else this.#log.warn({ intentId: row.id, escrowStatus: escrow.status }, 'solver: the order is open on chain but its Open event was not found; left to the user to refund');
      } catch (err) {
        this.#log.warn({ intentId: row.id, err: errText(err) }, 'solver: could not check an intent awaiting its open');
      }
    }
  }

  /** Looks for the intent's Open event up to the confirmed head; applies it when found. */
  async #lookUpOpen(row: IntentRow): Promise<boolean> {
    const pool = this.#upstreams.pool(row.fromNetwork);
    const confirmed = await this.#confirmedHead(row.fromNetwork);
    const logs = await pool.request<RawLog[]>('eth_getLogs', [
      { address: row.originSettler, topics: [settlerTopics().open, row.orderId], fromBlock: toHex(Math.max(0, confirmed - OPEN_LOOKUP_BLOCKS)), toBlock: toHex(confirmed) },
    ]);
    const log = logs.find((l) => !l.removed);
    if (!log) return false;
    const ev = decodeSettlerLog(log);
    if (ev?.kind !== 'open') return false;
    const number = Number(BigInt(log.blockNumber));
    const block = await pool.request<{ timestamp: Hex } | null>('eth_getBlockByNumber', [toHex(number), false]);
    if (!block) return false;
    let changed = false;
    await this.#db.transaction(async (tx) => {
      changed = await this.#apply(tx, row.fromNetwork, { number, timestamp: Number(BigInt(block.timestamp)) }, ev, log.transactionHash.toLowerCase());
    });
    if (changed) this.#webhooks.wake();
    return changed;
  }

  async #escrow(row: IntentRow, block: number): Promise<{ status: number; amount: bigint }> {
    const abi = originAbi();
    const data = encodeFunctionData({ abi, functionName: 'escrows', args: [row.orderId as Hex] });
    const out = await this.#upstreams.pool(row.fromNetwork).request<Hex>('eth_call', [{ to: row.originSettler, data }, toHex(block)]);
    const [, , status, amount] = decodeFunctionResult({ abi, functionName: 'escrows', data: out }) as readonly [Address, number, number, bigint];
    return { status: Number(status), amount };
  }

  #nowSeconds(): number {
    return Math.floor(Date.now() / 1000);
  }

  /** Opened intents not filled yet, with time left before the fill deadline (minus the margin): fill. */
  async #fills(): Promise<void> {
    const margin = this.#setup.fillMarginSeconds;
    const fillable = and(isNull(i.holdReason), isNull(i.filler), sql`${i.fillDeadline} - ${margin} > extract(epoch from now())`);
    const rows = await this.#store.due(['opened'], and(fillable, not(IntentStore.hasTx('fill', ['pending', 'sent', 'mined', 'reverted']))));
    for (const row of rows) {
      const originData = encodeOriginData(row.orderId as Hex, row.recipient as Address, BigInt(row.outputWei), row.fillDeadline, row.destinationChainId);
      await this.#txs.send(row, 'fill', row.toNetwork, row.destinationSettler as Address, encodeFill(row.orderId as Hex, originData), BigInt(row.outputWei), this.#setup.fillGasLimit, and(sql`${i.status} = 'opened'`, fillable));
    }
  }

  /** Filled intents: the oracle repays the filler from escrow. */
  async #settles(): Promise<void> {
    const rows = await this.#store.due(['filled'], and(isNotNull(i.filler), not(IntentStore.hasTx('settle', ['pending', 'sent', 'mined']))));
    for (const row of rows) {
      await this.#txs.send(row, 'settle', row.fromNetwork, row.originSettler as Address, encodeSettle(row.orderId as Hex, row.filler as Address), 0n, this.#setup.settleGasLimit, sql`${i.status} = 'filled'`);
    }
  }

  /** Opened intents not filled by the fill deadline: anyone may refund, and the gateway does. */
  async #refunds(): Promise<void> {
    const now = this.#nowSeconds();
    const due = and(isNull(i.filler), sql`${i.fillDeadline} < ${now}`);
    const rows = await this.#store.due(
      ['opened'],
      and(due, not(IntentStore.hasTx('refund', ['pending', 'sent', 'mined'])), not(IntentStore.hasTx('fill', ['pending', 'sent', 'mined']))),
    );
    for (const row of rows) {
      await this.#txs.send(row, 'refund', row.fromNetwork, row.originSettler as Address, encodeRefund(row.orderId as Hex), 0n, this.#setup.settleGasLimit, and(sql`${i.status} = 'opened'`, isNull(i.filler)));
    }
  }
}

/**
 * Why an Open does not match its intent (null: it matches). The order id binds only the sender and
 * the nonce: a hand-made open with the intent's nonce but other amounts, recipient, deadlines or
 * destination is opened on chain, but the solver does not fill it.
 */
function mismatch(row: IntentRow, ev: Extract<SettlerEvent, { kind: 'open' }>, blockTime: number): string | null {
  const o = ev.order;
  const eq = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  if (Number(o.originChainId) !== row.originChainId) return 'origin chain';
  if (o.openDeadline !== row.openDeadline) return 'open deadline';
  if (o.fillDeadline !== blockTime + row.fillWindow) return 'fill window';
  if (o.maxSpent[0]?.amount !== BigInt(row.inputWei)) return 'input amount';
  const out = o.minReceived[0];
  if (!out || out.amount !== BigInt(row.outputWei) || !eq(out.recipient, pad(row.recipient as Hex)) || Number(out.chainId) !== row.destinationChainId) return 'output';
  const fi = o.fillInstructions[0];
  if (!fi || !eq(fi.destinationSettler, pad(row.destinationSettler as Hex)) || Number(fi.destinationChainId) !== row.destinationChainId) return 'destination';
  return null;
}
