// C33: one block follower per instance. Per followed network it reads every block, with its full
// transactions, once it is `events.confirmations` deep, in order, from a cursor kept in storage,
// and hands it to the consumers that asked for that network (whale alerts, webhooks, intents).
// With several instances, a lease per network in storage lets exactly one of them follow it.
// A reorg deeper than the confirmation depth is not followed: a block handed on stays handed on.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { DeadlineError } from '../errors/deadline.ts';
import type { EventsConfig, NetworkConfig } from '../config/schema.ts';
import { SerialJob } from '../jobs/serial.ts';
import type { Db } from '../storage/db.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { NetworkFollower, type FollowerSettings, type NetworkFollowerStats } from './network-follower.ts';
import { FollowerStore } from './store.ts';
import type { BlockConsumer } from './types.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';

export type { NetworkFollowerStats } from './network-follower.ts';

export interface BlockFollowerOptions {
  db: Db;
  /** C33: the follower's section, and the networks it may follow (slug, chain id). */
  settings: { events: EventsConfig; networks: readonly Pick<NetworkConfig, 'slug' | 'chainId'>[] };
  upstreams: Upstreams;
  logger: Logger;
  /** Milliseconds between two askings of the consumers' networks; 5,000 by default. */
  refreshIntervalMs?: number;
}

const REFRESH_INTERVAL_MS = 5_000;
/** Milliseconds a consumer may take to say its networks (a hung one must not hold up the others, nor a stop). */
const NETWORKS_TIMEOUT_MS = 5_000;

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(message)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export class BlockFollower {
  /** This instance's lease holder id: host, process and a random part. */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  readonly #consumers: BlockConsumer[] = [];
  /** Each consumer's networks at the last asking (kept when an asking fails). */
  readonly #wanted = new Map<BlockConsumer, ReadonlySet<string>>();
  readonly #followers = new Map<string, NetworkFollower>();
  readonly #db: Db;
  readonly #store: FollowerStore;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #networks: ReadonlyMap<string, number>;
  readonly #settings: FollowerSettings;
  readonly #refreshMs: number;
  readonly #unknown = new Set<string>();
  /** Consumers whose last asking failed other than on storage: warned once per streak, not at each asking. */
  readonly #failing = new Set<BlockConsumer>();
  #timer: NodeJS.Timeout | undefined;
  /** Asking the consumers: now, or right after the asking in progress. */
  readonly #refreshing = new SerialJob(() => this.#refreshOnce());
  /** C48: consumers that read their networks from the database say an outage once. */
  readonly #outage: StorageOutageLog;
  #started = false;
  #closed = false;

  constructor(opts: BlockFollowerOptions) {
    this.#db = opts.db;
    this.#store = new FollowerStore(opts.db);
    this.#upstreams = opts.upstreams;
    this.#log = opts.logger.child({ component: 'follower' });
    this.#outage = new StorageOutageLog(this.#log, 'follower: asking the consumers for their networks');
    this.#networks = new Map(opts.settings.networks.map((n) => [n.slug, n.chainId]));
    this.#settings = { ...opts.settings.events };
    this.#refreshMs = opts.refreshIntervalMs ?? REFRESH_INTERVAL_MS;
  }

  /** Adds a consumer, before or after `start` (then its networks are asked at once). */
  register(consumer: BlockConsumer): void {
    this.#consumers.push(consumer);
    if (this.#started) void this.refresh();
  }

  /** Removes a consumer; a network nobody wants any more stops being followed at the next asking. */
  unregister(consumer: BlockConsumer): void {
    const i = this.#consumers.indexOf(consumer);
    if (i >= 0) this.#consumers.splice(i, 1);
    this.#wanted.delete(consumer);
    if (this.#started) void this.refresh();
  }

  /** Starts following (the app's onReady). */
  start(): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    void this.refresh();
    this.#timer = setInterval(() => void this.refresh(), this.#refreshMs);
    this.#timer.unref();
  }

  /**
   * Asks every consumer for its networks now and starts or stops following accordingly (a consumer
   * whose set changed, e.g. a new webhook, may call it instead of waiting for the next asking).
   */
  refresh(): Promise<void> {
    if (!this.#started || this.#closed) return Promise.resolve();
    return this.#refreshing.request();
  }

  async #refreshOnce(): Promise<void> {
    let storageFailed = false;
    await Promise.all(
      this.#consumers.map(async (c) => {
        try {
          this.#wanted.set(c, new Set(await withTimeout(Promise.resolve(c.networks()), NETWORKS_TIMEOUT_MS, `${c.name}: networks() took more than ${NETWORKS_TIMEOUT_MS} ms`)));
          if (this.#failing.delete(c)) this.#log.info({ consumer: c.name }, 'follower: a consumer says its networks again');
        } catch (err) {
          if (this.#outage.failed(err)) storageFailed = true;
          // C48: a consumer that keeps failing (a hung read times out at each asking) says so once.
          else if (this.#failing.has(c)) this.#log.debug({ consumer: c.name, err }, 'follower: a consumer still cannot say its networks');
          else {
            this.#failing.add(c);
            this.#log.warn({ consumer: c.name, err }, 'follower: a consumer could not say its networks; its last answer is kept');
          }
        }
      }),
    );
    if (!storageFailed) this.#outage.ok();
    if (this.#closed) return;
    const wanted = new Set<string>();
    for (const c of this.#consumers) {
      for (const slug of this.#wanted.get(c) ?? []) {
        if (this.#networks.has(slug)) wanted.add(slug);
        else if (!this.#unknown.has(slug)) {
          this.#unknown.add(slug);
          this.#log.warn({ consumer: c.name, network: slug }, 'follower: a consumer wants a network that is not in the config; ignored');
        }
      }
    }
    for (const slug of wanted) {
      if (this.#followers.has(slug)) continue;
      const f = new NetworkFollower({
        network: slug,
        chainId: this.#networks.get(slug) as number,
        source: this.#upstreams.pool(slug),
        onHead: (listener) => this.#upstreams.onHead(slug, listener),
        db: this.#db,
        store: this.#store,
        holder: this.id,
        settings: this.#settings,
        consumers: () => this.#consumersOf(slug),
        logger: this.#log,
      });
      this.#followers.set(slug, f);
      f.start();
    }
    await Promise.all(
      [...this.#followers].filter(([slug]) => !wanted.has(slug)).map(async ([slug, f]) => {
        this.#followers.delete(slug);
        this.#log.info({ network: slug }, 'follower: no consumer wants the network any more; stopped following it');
        await f.stop(true);
      }),
    );
  }

  #consumersOf(slug: string): BlockConsumer[] {
    return this.#consumers.filter((c) => this.#wanted.get(c)?.has(slug));
  }

  /** Per followed network: cursor, head, lag, blocks handled, whether this instance holds the lease. */
  stats(): NetworkFollowerStats[] {
    return [...this.#followers.values()].map((f) => f.stats());
  }

  /**
   * Stops following; each network finishes the block in hand. Leases are released so another
   * instance takes over at once; `releaseLeases: false` lets them lapse instead, as a process that
   * dies would (tests of the takeover).
   */
  async close(opts: { releaseLeases?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#refreshing.stop();
    await Promise.all([...this.#followers.values()].map((f) => f.stop(opts.releaseLeases ?? true)));
    this.#followers.clear();
  }
}
