// C35, C36: whale alerts, recorded from the block follower.
import { createHash } from 'node:crypto';
import { and, desc, eq, gte, lt, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { formatUnits, parseUnits } from 'viem/utils';
import type { NetworkConfig, WhaleAlertsConfig } from '../config/schema.ts';
import { badRequest } from '../errors/http.ts';
import type { BlockConsumer, FollowedBlock, FollowedTransaction } from '../events/types.ts';
import { usdCents } from '../prices/money.ts';
import type { Prices } from '../prices/prices.ts';
import { PeriodicJob } from '../jobs/periodic.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';
import type { Db } from '../storage/db.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import type { Webhooks } from '../webhooks/service.ts';
import type { WhaleAlert } from './alert.ts';
import { whaleAlerts } from './schema.ts';
import { revertedOf } from '../events/reverted.ts';

export interface WhaleAlertsOptions {
  db: Db;
  /** C35, C36: the whale-alert section, and the networks (their coins' decimals). */
  settings: { whaleAlerts: WhaleAlertsConfig; networks: readonly NetworkConfig[] };
  prices: Prices;
  webhooks: Webhooks;
  logger: Logger;
  /** For the receipts of whale-sized transactions (a reverted one moved nothing). */
  upstreams: Upstreams;
}

/** What `prepare` read for one block, outside the storage transaction. */
interface Prepared {
  price: number | null;
  /** Hashes (lower case) of the block's whale-sized transactions that reverted. */
  reverted: Set<string>;
}

/** Blocks prepared and not yet handed on; more means they were never handed (a rollback), and they are dropped. */
const MAX_PREPARED = 1_000;

export interface WhaleQuery {
  limit: number;
  /** Whole native units, as a decimal string (already checked by the route's schema). */
  minValue: string;
  network: string;
  /** An alert id: only alerts older than it. */
  before?: string | undefined;
}

/** Hours between two retention sweeps (also one at start). */
const SWEEP_INTERVAL_MS = 3_600_000;
const DAY_MS = 86_400_000;

type AlertRow = typeof whaleAlerts.$inferSelect;

/** Opaque and stable: the same (network, txHash) gives the same id on every instance. */
export function alertId(network: string, txHash: string): string {
  return `wa_${createHash('sha256').update(`${network}:${txHash.toLowerCase()}`).digest('base64url').slice(0, 22)}`;
}

function toAlert(row: AlertRow): WhaleAlert {
  return {
    id: row.id,
    txHash: row.txHash,
    from: row.fromAddress,
    to: row.toAddress,
    value: row.value,
    valueUsd: row.valueUsd === null ? null : Number(row.valueUsd),
    timestamp: row.blockTime.toISOString(),
    blockNumber: row.blockNumber,
    network: row.network,
  };
}

export class WhaleAlerts implements BlockConsumer {
  readonly name = 'whale-alerts';
  readonly #db: Db;
  readonly #retentionDays: number;
  readonly #prices: Prices;
  readonly #webhooks: Webhooks;
  readonly #logger: Logger;
  readonly #upstreams: Upstreams;
  /** By block hash: what `prepare` read for the block. */
  readonly #prepared = new Map<string, Prepared>();
  /** Per whale-alert network: its currency's decimals and the recording threshold in wei. */
  readonly #networks = new Map<string, { decimals: number; minWei: bigint }>();
  /** The retention sweep: once at start, then every hour. */
  readonly #sweeps: PeriodicJob;

  constructor(opts: WhaleAlertsOptions) {
    this.#db = opts.db;
    this.#retentionDays = opts.settings.whaleAlerts.retentionDays;
    this.#prices = opts.prices;
    this.#webhooks = opts.webhooks;
    this.#upstreams = opts.upstreams;
    this.#logger = opts.logger.child({ component: 'whale-alerts' });
    this.#sweeps = new PeriodicJob({
      run: () => this.sweep(),
      everyMs: SWEEP_INTERVAL_MS,
      onError: (err) => this.#logger.warn({ err: (err as Error).message }, 'whale alert retention sweep failed'),
      outage: new StorageOutageLog(this.#logger, 'whale alert retention sweep'),
    });
    for (const slug of opts.settings.whaleAlerts.networks) {
      const net = opts.settings.networks.find((n) => n.slug === slug);
      // A whale-alert network without a definition is left out (config validation names it).
      if (!net) continue;
      const decimals = net.currency.decimals;
      this.#networks.set(slug, { decimals, minWei: parseUnits(opts.settings.whaleAlerts.recordMinValue, decimals) });
    }
  }

  networks(): Iterable<string> {
    return this.#networks.keys();
  }

  /** Whether `network` is a whale-alert network (the route's `network` parameter). */
  hasNetwork(network: string): boolean {
    return this.#networks.has(network);
  }

  /** Decimals of a whale-alert network's currency. */
  decimals(network: string): number | undefined {
    return this.#networks.get(network)?.decimals;
  }

  #whales(block: FollowedBlock): FollowedTransaction[] {
    const net = this.#networks.get(block.network);
    if (!net) return [];
    return block.transactions.filter((t): t is FollowedTransaction & { to: string } => t.to !== null && t.value >= net.minWei);
  }

  /**
   * C35: records the block's whale-sized native transfers, once per (network, txHash), in the
   * follower's transaction, and publishes a `whale.alert` event for each new one in the same
   * transaction (C38, C39): the alert and its event commit together with the cursor or not at all.
   */
  async onBlock(block: FollowedBlock, tx: Db): Promise<void> {
    const whales = this.#whales(block);
    const net = this.#networks.get(block.network);
    if (!whales.length || !net) return;
    // What prepare read; a block handed without it (a direct call) reads the price here.
    const prepared = this.#prepared.get(block.hash);
    this.#prepared.delete(block.hash);
    const price = prepared ? prepared.price : await this.#price(block.network);
    const blockTime = new Date(block.timestamp * 1000);
    for (const t of whales) {
      // A reverted transaction moved nothing: no transfer, no alert.
      if (prepared?.reverted.has(t.hash.toLowerCase())) continue;
      const cents = price === null ? null : usdCents(t.value, net.decimals, price);
      const row = {
        id: alertId(block.network, t.hash),
        network: block.network,
        txHash: t.hash.toLowerCase(),
        fromAddress: t.from.toLowerCase(),
        toAddress: (t.to as string).toLowerCase(),
        valueWei: t.value.toString(),
        value: formatUnits(t.value, net.decimals),
        valueUsd: cents === null ? null : centsText(cents),
        blockNumber: block.number,
        txIndex: t.index,
        blockTime,
      };
      const inserted = await tx
        .insert(whaleAlerts)
        .values(row)
        .onConflictDoNothing({ target: [whaleAlerts.network, whaleAlerts.txHash] })
        .returning({ id: whaleAlerts.id });
      // Already recorded (the block handed again, or another instance): no second event.
      if (!inserted.length) continue;
      const alert = toAlert({ ...row, recordedAt: blockTime });
      await this.#webhooks.publish(tx, { type: 'whale.alert', data: { ...alert } });
    }
  }

  /**
   * Before the block's transaction (C33's follower calls it outside): the price, and the
   * receipt of each whale-sized transaction, so a reverted one is left out. A receipt that cannot
   * be read (every node failed) counts as a success: the alert is recorded as C35 reads, rather
   * than lost.
   */
  async prepare(blocks: readonly FollowedBlock[]): Promise<void> {
    if (this.#prepared.size > MAX_PREPARED) this.#prepared.clear();
    const prices = new Map<string, Promise<number | null>>();
    await Promise.all(
      blocks.map(async (block) => {
        const whales = this.#whales(block);
        if (!whales.length) return;
        let price = prices.get(block.network);
        if (!price) prices.set(block.network, (price = this.#price(block.network)));
        const reverted = await revertedOf(this.#upstreams.pool(block.network), whales, (txHash, err) =>
          this.#logger.warn({ network: block.network, txHash, err: err.message }, 'whale alerts: no receipt, recorded as a transfer'),
        );
        this.#prepared.set(block.hash, { price: await price, reverted });
      }),
    );
  }

  /** After the block's commit: the sender delivers the events just published. */
  afterCommit(block: FollowedBlock): void {
    if (this.#whales(block).length) this.#webhooks.wake();
  }

  async #price(network: string): Promise<number | null> {
    try {
      const p = await this.#prices.nativeUsd(network);
      return p !== null && Number.isFinite(p) && p >= 0 ? p : null;
    } catch (err) {
      // C34: no price means null USD values, never a guess; the alert is still recorded.
      this.#logger.warn({ network, err: (err as Error).message }, 'no native price for whale alerts');
      return null;
    }
  }

  /**
   * C36: alerts of `network` of at least `minValue` native units, newest first (block, then
   * transaction index), older than the alert `before` when given.
   */
  async list(q: WhaleQuery): Promise<WhaleAlert[]> {
    const decimals = this.#networks.get(q.network)?.decimals;
    if (decimals === undefined) {
      throw badRequest(`Invalid request: querystring.network "${q.network}" is not a whale-alert network`, [
        { field: 'querystring.network', message: `one of ${[...this.#networks.keys()].join(', ')}` },
      ]);
    }
    // C36: more decimals than the currency has cannot be a wei amount: refused, never rounded.
    const places = q.minValue.split('.')[1]?.length ?? 0;
    if (places > decimals) {
      throw badRequest(`Invalid request: querystring.minValue has ${places} decimals; ${q.network}'s currency has ${decimals}`, [
        { field: 'querystring.minValue', message: `at most ${decimals} decimals` },
      ]);
    }
    const minWei = parseUnits(q.minValue, decimals);
    const where = [eq(whaleAlerts.network, q.network), gte(whaleAlerts.valueWei, minWei.toString())];
    if (q.before !== undefined) {
      const [anchor] = await this.#db
        .select({ blockNumber: whaleAlerts.blockNumber, txIndex: whaleAlerts.txIndex })
        .from(whaleAlerts)
        .where(and(eq(whaleAlerts.id, q.before), eq(whaleAlerts.network, q.network)));
      if (!anchor) {
        throw badRequest(`Invalid request: querystring.before is not an alert of ${q.network} (unknown, or past retention)`, [
          { field: 'querystring.before', message: 'unknown alert id' },
        ]);
      }
      where.push(sql`(${whaleAlerts.blockNumber}, ${whaleAlerts.txIndex}) < (${anchor.blockNumber}, ${anchor.txIndex})`);
    }
    const rows = await this.#db
      .select()
      .from(whaleAlerts)
      .where(and(...where))
      .orderBy(desc(whaleAlerts.blockNumber), desc(whaleAlerts.txIndex))
      .limit(q.limit);
    return rows.map(toAlert);
  }

  /** Deletes alerts whose block is older than `whaleAlerts.retentionDays`; returns how many. */
  async sweep(now = Date.now()): Promise<number> {
    const cutoff = new Date(now - this.#retentionDays * DAY_MS);
    const gone = await this.#db.delete(whaleAlerts).where(lt(whaleAlerts.blockTime, cutoff)).returning({ id: whaleAlerts.id });
    if (gone.length) this.#logger.info({ deleted: gone.length, before: cutoff.toISOString() }, 'whale alerts past retention deleted');
    return gone.length;
  }

  /** Starts the retention sweep: once now, then every hour. */
  start(): void {
    this.#sweeps.start();
  }

  async close(): Promise<void> {
    await this.#sweeps.stop();
  }
}

/** Cents as a decimal text with two places ("7500.00"), for the numeric column. */
function centsText(cents: bigint): string {
  const neg = cents < 0n;
  const abs = neg ? -cents : cents;
  return `${neg ? '-' : ''}${abs / 100n}.${(abs % 100n).toString().padStart(2, '0')}`;
}
