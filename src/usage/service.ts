// Usage as it is counted (C10, C21): an in-memory buffer of each admitted call's counts, written
// to storage in batches (write-behind). The reads of stored usage are queries.ts's.
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type AnalyticsBatch, AnalyticsRecorder } from '../analytics/recorder.ts';
import type { UsageConfig } from '../config/schema.ts';
import { currentPeriods } from '../metering/periods.ts';
import type { Db } from '../storage/db.ts';
import { type Column, unnest } from '../storage/unnest.ts';
import { absorb, mergeBack } from '../storage/write-behind.ts';
import type { UsageEvent, UsageSink } from './sink.ts';

/*
 * What a hard crash can lose (docs/plans.md, "Usage"):
 * Usage is counted in memory and written to storage in batches every `usage.flushIntervalMs`
 * (2 s by default) and once more on a graceful stop (SIGTERM). A hard crash (kill -9, power
 * loss, out of memory) loses the counts recorded since the last successful flush: at most one
 * flush interval of usage statistics, the key list's usage counts and `lastUsedAt` (more only if
 * storage was already failing, since failed batches are kept in memory and retried). With Redis,
 * rate limits and quotas are not affected (they live in Redis); the in-process limiter seeds its
 * daily and monthly quotas from these counts at start (quotaUsage), so it loses the same interval.
 */

/** Rows per INSERT/UPDATE statement (one array parameter per column: a bounded statement per round trip). */
const CHUNK = 1000;
const USAGE_COLUMNS: ReadonlyArray<Column<Entry>> = [
  ['user_id', 'text', (r) => r.userId],
  ['key_id', 'text', (r) => r.keyId],
  ['network', 'text', (r) => r.network],
  ['method', 'text', (r) => r.method],
  ['day', 'date', (r) => r.day],
  ['requests', 'bigint', (r) => r.requests],
  ['compute_units', 'bigint', (r) => r.computeUnits],
];
const LAST_USED_COLUMNS: ReadonlyArray<Column<[string, number]>> = [
  ['id', 'text', ([keyId]) => keyId],
  ['at', 'timestamptz', ([, at]) => new Date(at).toISOString()],
];
// Stored as text in PostgreSQL: no NUL or control characters (a plan's `debug_*` allows any suffix).
const UNSAFE_METHOD_CHARS = /[^\x20-\x7e]/g;

/** One pending usage row: an (account, key, network, day, method) and its counts. */
export interface Entry {
  userId: string;
  keyId: string;
  network: string;
  method: string;
  day: string;
  requests: number;
  computeUnits: number;
}

/** Counts not yet in storage: by (account, key, network, day, method), and each key's latest use. */
interface Pending {
  counts: Map<string, Entry>;
  lastUsed: Map<string, number>;
  /** The same entries by key, network and method for today's day: no string built per call. */
  index: Map<string, Map<string, Map<string, Entry>>>;
  indexDay: string;
}

/** Adds `from`'s counts into `into` (a row merged back or handed over into the one held). */
function addEntry(into: Entry, from: Entry): void {
  into.requests += from.requests;
  into.computeUnits += from.computeUnits;
}

const emptyPending = (): Pending => ({ counts: new Map(), lastUsed: new Map(), index: new Map(), indexDay: '' });

/** What a worker hands to the process that owns storage: its rows, its keys' latest use, its analytics rows. */
export interface UsageBatch {
  rows: Entry[];
  lastUsed: Array<[string, number]>;
  analytics: AnalyticsBatch | null;
}

/**
 * A worker of several (WORKERS, docs/scaling.md "Workers"): usage is not written to storage by
 * the worker but handed to the primary, which owns the store and writes every worker's usage in
 * its flushes. Handed over as it is recorded (when the call's answer is known: rpc/pipeline.ts),
 * at the end of that turn of the event loop: an HTTP answer is written at that same point, a
 * WebSocket answer within the same turn, so a worker that dies (kill -9) loses at most the usage
 * of the calls answered in its last turn.
 */
export interface UsageHandoff {
  /** Sends a batch on its way at once; throws when the primary cannot be reached (the batch is kept). */
  send(batch: UsageBatch): void;
  /** The primary tells which accounts a flush of its stored; `checkQuota`: this worker runs their usage.quota check (C38). */
  onStored(listener: (userIds: ReadonlySet<string>, checkQuota: boolean) => void): void;
}

/** How often a worker hands over what analytics recorded since (usage goes at the end of the turn it is recorded in). */
const HANDOFF_INTERVAL_MS = 100;

/**
 * Usage (C21, C27): `record` only adds to an in-memory aggregate keyed by (account, key, network,
 * method, UTC day); a timer writes it to storage in batches every `usage.flushIntervalMs`, and
 * `close` writes what is left. A failed batch is merged back and retried with the next one.
 */
export class UsageService implements UsageSink {
  readonly #db: Db;
  readonly #log: Logger;
  readonly #intervalMs: number;
  #pending: Pending = emptyPending();
  /** Today (UTC) and when it ends, so `record` does not format a date per call. */
  #day = '';
  #dayEndsAt = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Told the accounts of each batch once it is stored (webhooks' usage.quota, C38); off the RPC path. */
  readonly #onFlush: ((userIds: ReadonlySet<string>) => void) | undefined;
  /** Told the accounts whose usage or analytics rows each committed flush wrote (the answer caches, C46). */
  readonly #onStored: ((userIds: ReadonlySet<string>) => void) | undefined;
  /** The flush under way, if any: flushes never overlap. */
  #inFlight: Promise<void> | undefined;
  /** C46: analytics rows, written in the same transaction as each usage batch (one write per flush, same loss bound). */
  readonly analytics: AnalyticsRecorder | undefined;
  /** C48: rows kept in memory while storage fails, at most; past it the oldest are dropped. */
  readonly #maxPendingRows: number;
  /** When flushes began to fail (epoch ms), or null while storage takes them. */
  #failingSince: number | null = null;
  /** C48: what was dropped past `usage.maxPendingRows` (metrics): usage rows and their requests, analytics rows. */
  readonly dropped = { usageRows: 0, usageRequests: 0, analyticsRows: 0 };
  /** The most rows held at once since the start (metrics, the chaos bench). */
  pendingRowsPeak = 0;
  /** A worker of several: batches go to the primary, not to storage. */
  readonly #handoff: UsageHandoff | undefined;
  #handoffSoon = false;

  constructor(deps: {
    db: Db;
    settings: Pick<UsageConfig, 'flushIntervalMs' | 'maxPendingRows'>;
    logger: Logger;
    analytics?: AnalyticsRecorder | undefined;
    onFlush?: ((userIds: ReadonlySet<string>) => void) | undefined;
    onStored?: ((userIds: ReadonlySet<string>) => void) | undefined;
    handoff?: UsageHandoff | undefined;
  }) {
    this.#db = deps.db;
    this.#log = deps.logger;
    this.#intervalMs = deps.settings.flushIntervalMs;
    this.#maxPendingRows = deps.settings.maxPendingRows;
    this.analytics = deps.analytics;
    this.#onFlush = deps.onFlush;
    this.#onStored = deps.onStored;
    this.#handoff = deps.handoff;
    deps.handoff?.onStored((userIds, checkQuota) => {
      this.#onStored?.(userIds);
      if (checkQuota) this.#onFlush?.(userIds);
    });
  }

  /**
   * One admitted call (C10: batch items one by one). Never waits on storage; on the hot path it
   * costs three map lookups and two additions (the row key is built once per new row).
   */
  record(event: UsageEvent): void {
    const now = Date.now();
    if (now >= this.#dayEndsAt) {
      const p = currentPeriods(now);
      this.#day = p.day;
      this.#dayEndsAt = p.dayEndsAt;
    }
    const pending = this.#pending;
    if (pending.indexDay !== this.#day) {
      pending.index.clear();
      pending.indexDay = this.#day;
    }
    let byNetwork = pending.index.get(event.keyId);
    if (!byNetwork) pending.index.set(event.keyId, (byNetwork = new Map<string, Map<string, Entry>>()));
    let byMethod = byNetwork.get(event.network);
    if (!byMethod) byNetwork.set(event.network, (byMethod = new Map<string, Entry>()));
    let entry = byMethod.get(event.method);
    if (!entry) {
      entry = this.#row(event, this.#day);
      byMethod.set(event.method, entry);
    }
    entry.requests += 1;
    entry.computeUnits += event.computeUnits;
    const last = pending.lastUsed.get(event.keyId);
    if (last === undefined || now > last) pending.lastUsed.set(event.keyId, now);
    if (this.#handoff && !this.#handoffSoon) {
      this.#handoffSoon = true;
      setImmediate(() => {
        this.#handoffSoon = false;
        this.flush().catch(() => {});
      });
    }
  }

  /**
   * The primary's side of a worker's handoff: adds its rows to what waits for the next flush (as
   * rows merge, memory follows distinct rows, not calls; C48's bound holds: past
   * `usage.maxPendingRows` new rows are dropped and counted).
   */
  absorb(batch: UsageBatch): void {
    const counts = this.#pending.counts;
    const rows = batch.rows.map((e) => [`${e.userId}|${e.keyId}|${e.network}|${e.day}|${e.method}`, e] as const);
    absorb(counts, rows, this.#maxPendingRows, addEntry, this.#drop);
    this.#mergeLastUsed(batch.lastUsed);
    if (batch.analytics && this.analytics) this.dropped.analyticsRows += this.analytics.absorb(batch.analytics, this.#maxPendingRows);
    this.pendingRowsPeak = Math.max(this.pendingRowsPeak, counts.size);
  }

  /** The pending row of (account, key, network, day, method), made empty when there is none. */
  #row(event: UsageEvent, day: string): Entry {
    const method = event.method.replace(UNSAFE_METHOD_CHARS, '?');
    // Method last: the other parts never contain '|', so the key is unambiguous.
    const id = `${event.userId}|${event.keyId}|${event.network}|${day}|${method}`;
    let entry = this.#pending.counts.get(id);
    if (!entry) {
      entry = { userId: event.userId, keyId: event.keyId, network: event.network, method, day, requests: 0, computeUnits: 0 };
      this.#pending.counts.set(id, entry);
    }
    return entry;
  }

  /** Starts the periodic flush; the timer does not keep the process alive. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => {
      // A slow flush is not stacked on: the next tick takes over what accumulated meanwhile.
      if (!this.#inFlight) this.flush().catch(() => {});
    }, this.#handoff ? HANDOFF_INTERVAL_MS : this.#intervalMs);
    this.#timer.unref();
  }

  /**
   * Writes what was recorded before this call, after any flush under way. Rejects when storage
   * fails; the counts are then kept for the next flush.
   */
  flush(): Promise<void> {
    // Queued behind the flush under way; else the swap happens now, before this returns.
    const run = this.#inFlight ? this.#inFlight.catch(() => {}).then(() => this.#flushOnce()) : this.#flushOnce();
    this.#inFlight = run;
    const clear = () => {
      if (this.#inFlight === run) this.#inFlight = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  /** Stops the timer and writes what is left (the SIGTERM path). */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    try {
      await this.flush();
    } catch {
      const rows = this.#pending.counts.size;
      this.#log.error({ rows }, 'usage counts could not be stored at shutdown and are lost');
    }
  }

  /** Rows waiting for the next flush (tests, diagnostics). */
  get pendingRows(): number {
    return this.#pending.counts.size;
  }

  /** Analytics rows waiting for the next flush. */
  get pendingAnalyticsRows(): number {
    return this.analytics?.pendingRows ?? 0;
  }

  /** C48: whether the latest flush failed (storage unreachable or refusing): counts are held in memory. */
  get failing(): boolean {
    return this.#failingSince !== null;
  }

  async #flushOnce(): Promise<void> {
    // Swap first: what is recorded while this batch is written goes to the next one.
    const batch = this.#pending;
    this.#pending = emptyPending();
    const analytics = this.analytics?.take() ?? null;
    if (batch.counts.size === 0 && batch.lastUsed.size === 0 && !analytics) return;
    try {
      await this.#write(batch, analytics);
    } catch (err) {
      this.#mergeBack(batch);
      if (analytics) this.dropped.analyticsRows += this.analytics?.mergeBack(analytics, this.#maxPendingRows) ?? 0;
      this.pendingRowsPeak = Math.max(this.pendingRowsPeak, this.#pending.counts.size);
      // C48: one warning on entering the failing state, not one per flush interval while it lasts.
      if (this.#failingSince === null) {
        this.#failingSince = Date.now();
        // No SQL, parameters or key values in the log: the error's class and SQLSTATE are enough.
        const code = (err as { cause?: { code?: unknown }; code?: unknown }).cause?.code ?? (err as { code?: unknown }).code;
        this.#log.warn(
          { rows: this.#pending.counts.size, keys: batch.lastUsed.size, error: (err as Error).name, code, maxPendingRows: this.#maxPendingRows },
          'usage flush failed: usage and analytics are held in memory and retried at each flush until storage takes them',
        );
      }
      throw err;
    }
    this.pendingRowsPeak = Math.max(this.pendingRowsPeak, batch.counts.size);
    // Handed to the primary, not stored yet: the primary says when it is (`UsageHandoff.onStored`).
    if (this.#handoff) return;
    if (this.#failingSince !== null) {
      const seconds = Math.round((Date.now() - this.#failingSince) / 1000);
      this.#failingSince = null;
      this.#log.info({ rows: batch.counts.size, seconds, dropped: this.dropped }, `usage flush succeeds again after ${seconds} s: the counts held in memory are stored`);
    }
    const usageUsers = new Set<string>();
    for (const e of batch.counts.values()) usageUsers.add(e.userId);
    if (this.#onStored) {
      // The answer caches also hold accounts whose only rows are analytics (refused calls).
      const written = new Set(usageUsers);
      if (analytics) for (const r of analytics.values()) written.add(r.userId);
      this.#onStored(written);
    }
    if (this.#onFlush && usageUsers.size) this.#onFlush(usageUsers);
  }

  async #write(batch: Pending, analytics: AnalyticsBatch | null): Promise<void> {
    if (this.#handoff) {
      this.#handoff.send({ rows: [...batch.counts.values()], lastUsed: [...batch.lastUsed.entries()], analytics });
      return;
    }
    // Sorted: two instances upserting the same rows take their locks in the same order (no deadlock).
    const rows = [...batch.counts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, e]) => e);
    const used = [...batch.lastUsed.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    await this.#db.transaction(async (tx) => {
      for (let i = 0; i < rows.length; i += CHUNK) {
        // Rows of an account deleted meanwhile are dropped rather than failing the batch forever;
        // the rows' order (above) is kept: unnest yields them as given.
        await tx.execute(sql`
          insert into usage_daily (user_id, key_id, network, method, day, requests, compute_units)
          select v.user_id, v.key_id, v.network, v.method, v.day, v.requests, v.compute_units
          from ${unnest(rows.slice(i, i + CHUNK), USAGE_COLUMNS)}
          where exists (select 1 from users u where u.id = v.user_id)
          on conflict (user_id, key_id, day, network, method) do update set
            requests = usage_daily.requests + excluded.requests,
            compute_units = usage_daily.compute_units + excluded.compute_units`);
      }
      for (let i = 0; i < used.length; i += CHUNK) {
        // The greatest of stored and new: another instance may have written a later use already.
        await tx.execute(sql`
          update api_keys as k set last_used_at = v.at
          from ${unnest(used.slice(i, i + CHUNK), LAST_USED_COLUMNS)}
          where k.id = v.id and (k.last_used_at is null or k.last_used_at < v.at)`);
      }
      if (analytics) await AnalyticsRecorder.write(tx, analytics);
    });
  }

  /**
   * Adds a batch that could not be stored to what was recorded meanwhile. Rows merge, so memory
   * grows with distinct (account, key, network, day, method) rows, not calls; past
   * `usage.maxPendingRows` the oldest rows are dropped and counted (C48). The order and the cap
   * are analytics' too (storage/write-behind.ts `mergeBack`).
   */
  #mergeBack(batch: Pending): void {
    const pending = this.#pending;
    pending.counts = mergeBack(pending.counts, batch.counts, pending.index, this.#maxPendingRows, addEntry, this.#drop);
    this.#mergeLastUsed(batch.lastUsed);
  }

  /** C48: a usage row dropped past `usage.maxPendingRows` is counted with its requests (metrics). */
  readonly #drop = (e: Entry): void => {
    this.dropped.usageRows++;
    this.dropped.usageRequests += e.requests;
  };

  /** Keeps each key's latest use: the later of what is held and what `lastUsed` says. */
  #mergeLastUsed(lastUsed: Iterable<[string, number]>): void {
    for (const [keyId, at] of lastUsed) {
      const now = this.#pending.lastUsed.get(keyId);
      if (now === undefined || at > now) this.#pending.lastUsed.set(keyId, at);
    }
  }
}
