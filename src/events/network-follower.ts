// C33: following one network: its lease, its cursor, its head, and the loop that reads blocks and
// hands each one to the consumers in one storage transaction with the cursor.
import type { Logger } from 'pino';
import { ConsumerFailedError, FollowerStoppedError, LeaseLostError } from '../errors/events.ts';
import { BlockReadError } from '../errors/node.ts';
import type { Db } from '../storage/db.ts';
import type { Head } from '../upstreams/upstreams.ts';
import { type BlockSource, readBlocks, readHead } from './blocks.ts';
import type { BlockConsumer, FollowedBlock } from './types.ts';
import type { FollowerStore } from './store.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';

export interface FollowerSettings {
  /** A block is read once it has this many confirmations, its own included (the head block has one). */
  confirmations: number;
  maxCatchUpBlocks: number;
  batchBlocks: number;
  leaseSeconds: number;
  pollIntervalMs: number;
}

/** What one network's follower reports (metrics, health). */
export interface NetworkFollowerStats {
  network: string;
  /** The last block handed on, or null before the first. */
  cursor: number | null;
  /** The newest head seen. */
  head: number | null;
  /** Blocks between the head and the cursor (the confirmation depth included). */
  lag: number | null;
  /** Blocks handed on by this instance since it started. */
  blocksHandled: number;
  /** Blocks skipped by this instance because they were more than `maxCatchUpBlocks` behind. */
  blocksSkipped: number;
  /** Whether this instance holds the network's lease (only the holder follows). */
  leaseHeld: boolean;
  /** Why the last read or block failed, until the next success. */
  lastError?: string;
}

export interface NetworkFollowerOptions {
  network: string;
  chainId: number;
  source: BlockSource;
  /** Subscribes to the network's heads; returns the function that stops it. */
  onHead: (listener: (head: Head) => void) => () => void;
  db: Db;
  store: FollowerStore;
  holder: string;
  settings: FollowerSettings;
  /** The consumers that want this network now. */
  consumers: () => readonly BlockConsumer[];
  logger: Logger;
}

const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 30_000;
/** Successful batches after which a batch size halved by a refusal doubles again. */
const BATCH_REGROW_AFTER = 20;

export class NetworkFollower {
  readonly network: string;
  readonly #o: NetworkFollowerOptions;
  readonly #log: Logger;
  /** C48: the lease is renewed every few seconds; an outage is said once, not at each renewal. */
  readonly #leaseOutage: StorageOutageLog;
  readonly #leaseMs: number;
  #stopping = false;
  /**
   * C48: the waits `#abortable` holds, to reject when the follower stops. A set the waits
   * leave when they settle, not a race with one long-lived promise: every race adds a reaction to
   * that promise that stays until it settles (the soak's heap snapshots found ~30 a second).
   */
  readonly #waits = new Set<(err: Error) => void>();
  #loop: Promise<void> | undefined;
  #leaseTimer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  /** Local time until which the lease is taken as ours (the database has the last word). */
  #leaseUntil = 0;
  #held = false;
  #offHead: (() => void) | undefined;
  #wake: (() => void) | undefined;
  /** Next block to hand on; null until read from storage (again after the lease changed hands). */
  #next: number | null = null;
  #head: number | null = null;
  /** The last block handed on, to notice a reorg deeper than the confirmation depth. */
  #lastHanded: { number: number; hash: string } | undefined;
  #headAt = 0;
  #batch: number;
  #batchOk = 0;
  #failures = 0;
  #handled = 0;
  #skipped = 0;
  #lastError: string | undefined;

  constructor(opts: NetworkFollowerOptions) {
    this.network = opts.network;
    this.#o = opts;
    this.#log = opts.logger;
    this.#leaseOutage = new StorageOutageLog(opts.logger, 'follower: renewing the lease', { network: this.network });
    this.#leaseMs = opts.settings.leaseSeconds * 1000;
    this.#batch = opts.settings.batchBlocks;
  }

  start(): void {
    if (this.#loop) return;
    // C33: renewed every third of its length, so two renewals may fail before it lapses.
    const renewEvery = Math.max(200, Math.floor(this.#leaseMs / 3));
    this.#leaseTimer = setInterval(() => void this.#renew(), renewEvery);
    this.#leaseTimer.unref();
    void this.#renew();
    this.#loop = this.#run();
  }

  /** Stops after the block in hand; `release` gives the lease up (a graceful stop), otherwise it lapses. */
  async stop(release: boolean): Promise<void> {
    if (this.#stopping) return this.#loop;
    this.#stopping = true;
    clearInterval(this.#leaseTimer);
    for (const reject of this.#waits) reject(new FollowerStoppedError());
    this.#waits.clear();
    this.#wake?.();
    await this.#loop;
    await this.#renewing;
    this.#offHead?.();
    this.#offHead = undefined;
    if (release && this.#held) {
      try {
        await this.#o.store.release(this.network, this.#o.holder);
      } catch (err) {
        this.#log.warn({ network: this.network, reason: message(err) }, 'follower: could not release the lease; it lapses instead');
      }
    }
    this.#held = false;
  }

  stats(): NetworkFollowerStats {
    const cursor = this.#next === null ? null : this.#next - 1;
    return {
      network: this.network,
      cursor,
      head: this.#head,
      lag: this.#head === null || cursor === null ? null : Math.max(0, this.#head - cursor),
      blocksHandled: this.#handled,
      blocksSkipped: this.#skipped,
      leaseHeld: this.#held && this.#leaseUntil > Date.now(),
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
    };
  }

  #renew(): Promise<void> {
    if (this.#renewing || this.#stopping) return this.#renewing ?? Promise.resolve();
    const started = Date.now();
    this.#renewing = this.#o.store
      .acquire(this.network, this.#o.holder, this.#o.settings.leaseSeconds)
      .then(
        (ok) => {
          this.#leaseOutage.ok();
          if (this.#stopping) {
            // Taken while stopping: stop() releases it when asked to.
            this.#held ||= ok;
            return;
          }
          if (ok) {
            // A little under the lease's length, for the time the upsert took on the way back.
            this.#leaseUntil = started + this.#leaseMs - Math.min(1000, this.#leaseMs / 10);
            if (!this.#held) this.#gained();
          } else if (this.#held) this.#lost('another instance holds the lease');
        },
        (err: unknown) => {
          // Storage unreachable: the lease lapses on its own if this goes on.
          if (this.#leaseOutage.failed(err)) return;
          this.#log.warn({ network: this.network, reason: message(err) }, 'follower: could not renew the lease');
        },
      )
      .finally(() => {
        this.#renewing = undefined;
      });
    return this.#renewing;
  }

  #gained(): void {
    this.#held = true;
    this.#next = null; // another instance may have moved it
    // Debug: a line per network at every start is noise on a console; the lease is in the metrics.
    this.#log.debug({ network: this.network, holder: this.#o.holder }, 'follower: following the network (lease taken)');
    this.#offHead ??= this.#o.onHead((h) => {
      this.#sawHead(h.number);
      this.#wake?.();
    });
    this.#wake?.();
  }

  #lost(why: string): void {
    if (!this.#held) return;
    this.#held = false;
    this.#leaseUntil = 0;
    this.#next = null;
    this.#offHead?.();
    this.#offHead = undefined;
    this.#log.info({ network: this.network, holder: this.#o.holder, reason: why }, 'follower: no longer following the network');
  }

  #leaseValid(): boolean {
    return this.#held && Date.now() < this.#leaseUntil;
  }

  #sawHead(n: number): void {
    if (this.#head === null || n > this.#head) this.#head = n;
    this.#headAt = Date.now();
  }

  async #run(): Promise<void> {
    while (!this.#stopping) {
      let progressed = false;
      try {
        progressed = await this.#step();
        if (this.#failures > 0) this.#log.info({ network: this.network, failures: this.#failures }, 'follower: the network is followed again');
        this.#failures = 0;
        this.#lastError = undefined;
      } catch (err) {
        if (err instanceof FollowerStoppedError || this.#stopping) break;
        if (err instanceof LeaseLostError) {
          this.#lost('the lease lapsed or the cursor moved elsewhere');
          void this.#renew();
          continue;
        }
        this.#failures += 1;
        this.#lastError = message(err);
        const retryInMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (this.#failures - 1));
        const log = { network: this.network, block: this.#next, reason: this.#lastError, retryInMs, failures: this.#failures };
        if (err instanceof ConsumerFailedError) {
          // Every time: a consumer that cannot take a block holds its network up.
          this.#log.warn({ ...log, block: err.block, consumer: err.consumer, err: err.cause }, 'follower: a consumer failed on a block; rolled back, retried later');
        } else if (this.#failures === 1) {
          this.#log.warn(log, 'follower: reading or handing on blocks failed; retried later');
        } else {
          // A node down for hours would otherwise write a warning every back-off; stats() keeps the last error.
          this.#log.debug(log, 'follower: reading or handing on blocks failed again');
        }
        await this.#idle(retryInMs, false);
        continue;
      }
      if (!progressed) await this.#idle(this.#o.settings.pollIntervalMs, true);
    }
  }

  /** Waits `ms`, or less when woken (a new head or the lease taken) if `wakeable`. */
  async #idle(ms: number, wakeable: boolean): Promise<void> {
    if (this.#stopping) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = wakeable ? done : () => this.#stopping && done();
    });
    this.#wake = undefined;
  }

  /** One round: read what is ready and hand it on. False when there was nothing to do. */
  async #step(): Promise<boolean> {
    if (!this.#leaseValid()) return false;
    const { confirmations, maxCatchUpBlocks } = this.#o.settings;
    const depth = Math.max(1, confirmations);
    let head = this.#head;
    const stale = Date.now() - this.#headAt >= this.#o.settings.pollIntervalMs;
    // The head pushed (newHeads, health probes) is enough while blocks are ready; asked for otherwise.
    if (head === null || (stale && (this.#next === null || this.#next > head - depth + 1))) {
      const polled = await this.#abortable(readHead(this.#o.source));
      this.#sawHead(polled);
      head = Math.max(head ?? polled, polled);
    }
    const ready = head - depth + 1; // the newest block with enough confirmations
    if (this.#next === null) {
      const stored = await this.#o.store.cursor(this.network);
      // C33: a network followed for the first time starts at the newest confirmed block, no history.
      this.#next = stored ?? (await this.#o.store.initCursor(this.network, Math.max(0, ready)));
    }
    let next = this.#next;
    if (next > ready) return false;
    // C33: at most `maxCatchUpBlocks` are caught up; an older gap is skipped and logged.
    if (ready - next + 1 > maxCatchUpBlocks) {
      const to = ready - maxCatchUpBlocks + 1;
      if (!(await this.#o.store.advance(this.#o.db, this.network, next, to, this.#o.holder))) throw new LeaseLostError();
      this.#log.warn(
        { network: this.network, skippedFrom: next, skippedTo: to - 1, skipped: to - next, maxCatchUpBlocks },
        `follower: ${this.network} is more than ${maxCatchUpBlocks} blocks behind; blocks ${next}..${to - 1} skipped`,
      );
      this.#skipped += to - next;
      this.#next = next = to;
    }
    const count = Math.min(this.#batch, ready - next + 1);
    let blocks: FollowedBlock[];
    try {
      blocks = await this.#abortable(readBlocks(this.#o.source, this.network, this.#o.chainId, next, count));
    } catch (err) {
      if (count > 1 && !(err instanceof FollowerStoppedError) && (!(err instanceof BlockReadError) || err.batchLevel)) {
        // Some nodes cap batch sizes or answer sizes: ask for fewer blocks at a time.
        this.#batch = Math.max(1, Math.floor(count / 2));
        this.#batchOk = 0;
      }
      throw err;
    }
    if (count > 1 && this.#batch < this.#o.settings.batchBlocks && ++this.#batchOk >= BATCH_REGROW_AFTER) {
      this.#batch = Math.min(this.#o.settings.batchBlocks, this.#batch * 2);
      this.#batchOk = 0;
    }
    if (blocks.length === 0) return false; // the node answering does not have it yet
    if (this.#stopping) throw new FollowerStoppedError();
    if (!this.#leaseValid()) return true;
    try {
      await this.#hand(blocks);
    } catch (err) {
      if (!(err instanceof ConsumerFailedError) || blocks.length === 1) throw err;
      // The whole batch rolled back: again one block at a time, so the blocks before the one a
      // consumer refuses commit, and only that one waits for its retry.
      for (const block of blocks) {
        if (this.#stopping) throw new FollowerStoppedError();
        if (!this.#leaseValid()) return true;
        await this.#hand([block]);
      }
    }
    return true;
  }

  /**
   * Consecutive blocks in one transaction (one block in step with the chain; a read batch while
   * catching up, since a commit costs milliseconds): the cursor moves first, past the last of them,
   * locking its row; then each consumer writes for each block, in order. All of it commits or
   * none of it does.
   */
  async #hand(blocks: readonly FollowedBlock[]): Promise<void> {
    const first = blocks[0];
    const last = blocks.at(-1);
    if (!first || !last) return;
    const consumers = this.#o.consumers();
    const { store, holder } = this.#o;
    for (const c of consumers) {
      if (!c.prepare) continue;
      try {
        await c.prepare(blocks);
      } catch (err) {
        throw new ConsumerFailedError(c.name, first.number, err);
      }
    }
    await this.#o.db.transaction(async (tx) => {
      if (!(await store.advance(tx, this.network, first.number, last.number + 1, holder))) throw new LeaseLostError();
      for (const block of blocks) {
        for (const c of consumers) {
          try {
            await c.onBlock(block, tx);
          } catch (err) {
            throw new ConsumerFailedError(c.name, block.number, err);
          }
        }
      }
    });
    this.#next = last.number + 1;
    this.#handled += blocks.length;
    this.#noticeReorg(blocks);
    this.#lastHanded = { number: last.number, hash: last.hash };
    for (const block of blocks) {
      for (const c of consumers) {
        try {
          c.afterCommit?.(block);
        } catch (err) {
          this.#log.error({ network: this.network, block: block.number, consumer: c.name, err }, 'follower: afterCommit failed');
        }
      }
    }
  }

  /**
   * C33: a reorg deeper than the confirmation depth is not followed (what was handed on stays);
   * it is only logged, so an operator can raise `events.confirmations` for the network.
   */
  #noticeReorg(blocks: readonly FollowedBlock[]): void {
    let before = this.#lastHanded;
    for (const b of blocks) {
      if (before && before.number === b.number - 1 && b.parentHash !== undefined && b.parentHash !== before.hash) {
        this.#log.warn(
          { network: this.network, block: b.number, parentHash: b.parentHash, handedHash: before.hash, confirmations: this.#o.settings.confirmations },
          'follower: the chain reorganised deeper than the confirmation depth; the blocks already handed on stay as they were',
        );
      }
      before = { number: b.number, hash: b.hash };
    }
  }

  /** The promise, or a rejection as soon as the follower stops (a stalled node does not hold up a stop). */
  #abortable<T>(p: Promise<T>): Promise<T> {
    if (this.#stopping) {
      p.catch(() => {});
      return Promise.reject(new FollowerStoppedError());
    }
    return new Promise<T>((resolve, reject) => {
      this.#waits.add(reject);
      p.then(resolve, reject).finally(() => this.#waits.delete(reject));
    });
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
