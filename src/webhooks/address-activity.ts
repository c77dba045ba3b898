// C38: address.activity. A block consumer of the follower (C33): its networks are those of the
// enabled address.activity endpoints; in each followed block, every native transfer from or to
// a watched address becomes an event for the endpoints watching it, written in the follower's
// transaction (the outbox commits with the cursor, C39). A reverted transaction moved no coin
// (C35): the receipts of the transfers that touch a watched address are read first.
import type { Logger } from 'pino';
import { formatUnits } from 'viem/utils';
import type { NetworkConfig } from '../config/schema.ts';
import type { BlockConsumer, FollowedBlock, FollowedTransaction } from '../events/types.ts';
import { usdCents } from '../prices/money.ts';
import type { Prices } from '../prices/prices.ts';
import type { Db } from '../storage/db.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { compareDecimal } from './events.ts';
import type { Webhooks } from './service.ts';
import { revertedOf } from '../events/reverted.ts';

export interface ActivityData {
  network: string;
  blockNumber: number;
  txHash: string;
  from: string;
  to: string;
  /** Whole native units, exact. */
  value: string;
  /** USD at the current price, to the cent (rounded half up); null without a price (C34). */
  valueUsd: number | null;
  direction: 'in' | 'out';
}

export class AddressActivity implements BlockConsumer {
  readonly name = 'webhooks-address-activity';
  readonly #webhooks: Webhooks;
  readonly #prices: Prices;
  readonly #log: Logger;
  readonly #upstreams: Upstreams;
  readonly #decimals: ReadonlyMap<string, number>;
  /**
   * By block hash, what `prepare` read outside the storage transaction: the USD price (null: none)
   * and the hashes (lower case) of the watched transfers that reverted.
   */
  readonly #prepared = new Map<string, { usd: number | null; reverted: Set<string> }>();

  constructor(deps: { webhooks: Webhooks; prices: Prices; upstreams: Upstreams; networks: readonly Pick<NetworkConfig, 'slug' | 'currency'>[]; logger: Logger }) {
    this.#webhooks = deps.webhooks;
    this.#prices = deps.prices;
    this.#upstreams = deps.upstreams;
    this.#log = deps.logger.child({ component: 'webhooks' });
    this.#decimals = new Map(deps.networks.map((n) => [n.slug, n.currency.decimals]));
  }

  networks(): Promise<Iterable<string>> {
    return this.#webhooks.activityNetworks();
  }

  /**
   * Before the block's transaction, so storage never waits on a node or a price source (C33): the
   * price, and the receipt of each transfer from or to a watched address, so that a reverted one
   * is left out. A receipt no node could give counts as a success (an event rather than none),
   * as for whale alerts.
   */
  async prepare(blocks: readonly FollowedBlock[]): Promise<void> {
    // More than this were prepared and never handed on (rolled back): dropped.
    if (this.#prepared.size > 1_000) this.#prepared.clear();
    const prices = new Map<string, Promise<number | null>>();
    const watching = new Map<string, Promise<Set<string>>>();
    for (const block of blocks) {
      const transfers = block.transactions.filter(isTransfer);
      if (transfers.length === 0) continue;
      let price = prices.get(block.network);
      if (!price) prices.set(block.network, (price = this.#price(block.network)));
      let watched = watching.get(block.network);
      if (!watched) {
        watched = this.#webhooks.activityEndpoints(block.network).then((list) => new Set(list.flatMap((e) => e.addresses)));
        watching.set(block.network, watched);
      }
      const addresses = await watched;
      const watchedTransfers = transfers.filter((t) => addresses.has(t.from) || addresses.has(t.to as string));
      const reverted = await revertedOf(this.#upstreams.pool(block.network), watchedTransfers, (txHash, err) =>
        this.#log.warn({ network: block.network, txHash, err: err.message }, 'address activity: no receipt, counted as a transfer'),
      );
      this.#prepared.set(block.hash, { usd: await price, reverted });
    }
  }

  async onBlock(block: FollowedBlock, tx: Db): Promise<void> {
    // What prepare read; undefined when the block came without it (a direct call): the price is read here.
    const prepared = this.#prepared.get(block.hash);
    this.#prepared.delete(block.hash);
    let usd: number | null | undefined = prepared?.usd;
    // A reverted transaction moved no coin: no activity (C35).
    const transfers = block.transactions.filter((t) => isTransfer(t) && !prepared?.reverted.has(t.hash.toLowerCase()));
    if (transfers.length === 0) return;
    const endpoints = await this.#webhooks.activityEndpoints(block.network, tx);
    if (endpoints.length === 0) return;
    const watchers = new Map<string, typeof endpoints>();
    for (const e of endpoints) {
      for (const a of e.addresses) {
        let list = watchers.get(a);
        if (!list) watchers.set(a, (list = []));
        list.push(e);
      }
    }
    const decimals = this.#decimals.get(block.network) ?? 18;
    const timestamp = new Date(block.timestamp * 1000).toISOString();
    let events = 0;
    for (const t of transfers) {
      const to = t.to as string;
      const sides: Array<['out' | 'in', string]> = [
        ['out', t.from],
        ['in', to],
      ];
      for (const [direction, address] of sides) {
        // A transfer to oneself is one event, "out".
        if (direction === 'in' && to === t.from) continue;
        const list = watchers.get(address);
        if (!list) continue;
        const value = formatUnits(t.value, decimals);
        const targets = list.filter((e) => e.minValue === undefined || compareDecimal(value, e.minValue) >= 0).map((e) => e.id);
        if (targets.length === 0) continue;
        if (usd === undefined) usd = await this.#price(block.network);
        const data: ActivityData = {
          network: block.network,
          blockNumber: block.number,
          txHash: t.hash,
          from: t.from,
          to,
          value,
          // On integers from the wei, rounded half up once, as whale alerts (no float on the amount).
          valueUsd: usd === null ? null : Number(usdCents(t.value, decimals, usd)) / 100,
          direction,
        };
        events += await this.#webhooks.enqueue(tx, { type: 'address.activity', timestamp, data: data as unknown as Record<string, unknown> }, targets);
      }
    }
    if (events) this.#log.debug({ network: block.network, block: block.number, events }, 'address activity queued');
  }

  afterCommit(): void {
    this.#webhooks.wake();
  }

  async #price(network: string): Promise<number | null> {
    try {
      const p = await this.#prices.nativeUsd(network);
      return p !== null && Number.isFinite(p) && p >= 0 ? p : null;
    } catch {
      return null;
    }
  }
}

/** A native transfer: a value and a recipient (a contract creation has none). */
function isTransfer(t: FollowedTransaction): boolean {
  return t.value > 0n && t.to !== null;
}
