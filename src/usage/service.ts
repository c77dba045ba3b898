import { and, eq, gte, inArray, lte, type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type AnalyticsBatch, AnalyticsRecorder } from '../analytics/recorder.ts';
import type { Config } from '../config/schema.ts';
import type { KeyUsageReader } from '../keys/service.ts';
import { currentPeriods } from '../metering/periods.ts';
import type { Db } from '../storage/db.ts';
import { prepareSql } from '../storage/prepared.ts';
import { type Column, unnest } from '../storage/unnest.ts';
import { usageAccountDaily, usageDaily } from './schema.ts';
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

interface Entry {
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

const emptyPending = (): Pending => ({ counts: new Map(), lastUsed: new Map(), index: new Map(), indexDay: '' });

/** Per-day and per-month request counts of one key (C21). */
export interface KeyUsage {
  daily: number;
  monthly: number;
}

export interface StatsQuery {
  userId: string;
  /** Inclusive UTC days, YYYY-MM-DD. */
  start: string;
  end: string;
  keyId?: string | undefined;
  network?: string | undefined;
}

/** What `GET /usage/stats` answers (spec: Usage statistics; C27), `totalComputeUnits` beyond the spec. */
export interface UsageStats {
  period: { start: string; end: string };
  totalRequests: number;
  totalComputeUnits: number;
  requestsByNetwork: Record<string, number>;
  requestsByMethod: Record<string, number>;
  dailyBreakdown: Array<{ date: string; requests: number }>;
}

/**
 * Usage (C21, C27): `record` only adds to an in-memory aggregate keyed by (account, key, network,
 * method, UTC day); a timer writes it to storage in batches every `usage.flushIntervalMs`, and
 * `close` writes what is left. A failed batch is merged back and retried with the next one.
 */
export class UsageService implements UsageSink, KeyUsageReader {
  readonly #db: Db;
  /**
   * The `/usage/stats` reads (C27), prepared once each (issue 28: planned once, not at each call):
   * account-wide, one network, one key, one key on one network.
   */
  readonly #statsReads;
  /** `ownsKey`'s read, prepared once. */
  readonly #ownsKey: ReturnType<typeof prepareSql>;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #networks: ReadonlySet<string>;
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

  constructor(deps: {
    db: Db;
    config: Config;
    logger: Logger;
    analytics?: AnalyticsRecorder | undefined;
    onFlush?: ((userIds: ReadonlySet<string>) => void) | undefined;
    onStored?: ((userIds: ReadonlySet<string>) => void) | undefined;
  }) {
    this.#db = deps.db;
    this.#log = deps.logger;
    this.#intervalMs = deps.config.usage.flushIntervalMs;
    this.#maxPendingRows = deps.config.usage.maxPendingRows;
    this.#networks = new Set(deps.config.networks.map((n) => n.slug));
    this.analytics = deps.analytics;
    this.#onFlush = deps.onFlush;
    this.#onStored = deps.onStored;
    const at = { userId: sql.placeholder('userId'), start: sql.placeholder('start'), end: sql.placeholder('end') };
    const network = sql.placeholder('network');
    const key = eq(usageDaily.keyId, sql.placeholder('keyId'));
    this.#statsReads = {
      account: this.#stats(usageAccountDaily, at).prepare('usage_stats_account'),
      network: this.#stats(usageAccountDaily, { ...at, network }).prepare('usage_stats_network'),
      key: this.#stats(usageDaily, at, key).prepare('usage_stats_key'),
      keyNetwork: this.#stats(usageDaily, { ...at, network }, key).prepare('usage_stats_key_network'),
    };
    this.#ownsKey = prepareSql(
      deps.db,
      'usage_owns_key',
      sql`select (exists (select 1 from api_keys where id = ${sql.placeholder('keyId')} and user_id = ${sql.placeholder('userId')})
        or exists (select 1 from usage_daily where user_id = ${sql.placeholder('userId')} and key_id = ${sql.placeholder('keyId')})) as owned`,
    );
  }

  /** Whether `slug` is a configured network (the stats filter rejects others, as C16 does). */
  hasNetwork(slug: string): boolean {
    return this.#networks.has(slug);
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
    }, this.#intervalMs);
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
   * `usage.maxPendingRows` the oldest rows are dropped and counted (C48).
   */
  #mergeBack(batch: Pending): void {
    const pending = this.#pending;
    // Rebuilt with the failed batch's rows first: the map's order is then oldest first.
    const counts = new Map<string, Entry>();
    for (const [id, e] of batch.counts) {
      const now = pending.counts.get(id);
      if (now) {
        // The entry recorded meanwhile is the one the index points to: it takes the older counts.
        now.requests += e.requests;
        now.computeUnits += e.computeUnits;
        counts.set(id, now);
      } else {
        counts.set(id, e);
      }
    }
    for (const [id, e] of pending.counts) if (!counts.has(id)) counts.set(id, e);
    pending.counts = counts;
    for (const [id, e] of counts) {
      if (counts.size <= this.#maxPendingRows) break;
      counts.delete(id);
      // A row still counted into through the index would be lost unseen: it leaves the index too.
      const byMethod = pending.index.get(e.keyId)?.get(e.network);
      if (byMethod) for (const [m, row] of byMethod) if (row === e) byMethod.delete(m);
      this.dropped.usageRows++;
      this.dropped.usageRequests += e.requests;
    }
    for (const [keyId, at] of batch.lastUsed) {
      const now = this.#pending.lastUsed.get(keyId);
      if (now === undefined || at > now) this.#pending.lastUsed.set(keyId, at);
    }
  }

  /** C21: each key's requests today and this month (UTC), in one query. */
  async usageByKey(userId: string, keyIds: readonly string[]): Promise<Map<string, KeyUsage>> {
    const out = new Map<string, KeyUsage>();
    if (keyIds.length === 0) return out;
    const { day } = currentPeriods();
    const rows = await this.#db
      .select({
        keyId: usageDaily.keyId,
        daily: sql`coalesce(sum(${usageDaily.requests}) filter (where ${usageDaily.day} = ${day}::date), 0)`.mapWith(Number),
        monthly: sql`sum(${usageDaily.requests})`.mapWith(Number),
      })
      .from(usageDaily)
      .where(
        and(
          eq(usageDaily.userId, userId),
          inArray(usageDaily.keyId, [...keyIds]),
          gte(usageDaily.day, `${day.slice(0, 7)}-01`),
          lte(usageDaily.day, day),
        ),
      )
      .groupBy(usageDaily.keyId);
    for (const r of rows) out.set(r.keyId, { daily: r.daily, monthly: r.monthly });
    return out;
  }

  /**
   * Each account's stored requests today and compute units this month (UTC, C11), for the
   * accounts that used anything this month: what the quotas had counted before a restart
   * (Meter.seedFromUsage). Only what was flushed: a hard crash loses at most one flush interval.
   * Issue 28: read from the account-wide rows, a range of days through their (day) index.
   */
  async quotaUsage(): Promise<Array<{ userId: string; requestsToday: number; computeUnitsThisMonth: number }>> {
    const { day } = currentPeriods();
    return this.#db
      .select({
        userId: usageAccountDaily.userId,
        requestsToday: sql`coalesce(sum(${usageAccountDaily.requests}) filter (where ${usageAccountDaily.day} = ${day}::date), 0)`.mapWith(Number),
        computeUnitsThisMonth: sql`sum(${usageAccountDaily.computeUnits})`.mapWith(Number),
      })
      .from(usageAccountDaily)
      .where(and(gte(usageAccountDaily.day, `${day.slice(0, 7)}-01`), lte(usageAccountDaily.day, day)))
      .groupBy(usageAccountDaily.userId);
  }

  /**
   * Whether `keyId` is, or was, a key of the account: a current key, or a deleted one whose usage
   * is still stored. Another account's key is neither (C7: 404).
   */
  async ownsKey(userId: string, keyId: string): Promise<boolean> {
    const result = await this.#ownsKey({ userId, keyId });
    return (result.rows as Array<{ owned: boolean }>)[0]?.owned === true;
  }

  /** C27: the account's counts over [start, end], with every day of the period present, oldest first. */
  async stats(q: StatsQuery): Promise<UsageStats> {
    // Issue 28: account-wide, the rows summed over keys (a tenth of the rows for ten keys); one key, its own rows.
    const reads = this.#statsReads;
    const read = q.keyId !== undefined ? (q.network !== undefined ? reads.keyNetwork : reads.key) : q.network !== undefined ? reads.network : reads.account;
    const rows = await read.execute({ userId: q.userId, start: q.start, end: q.end, keyId: q.keyId, network: q.network });
    const perDay = new Map<string, number>();
    const requestsByNetwork: Record<string, number> = {};
    const requestsByMethod: Record<string, number> = {};
    let totalRequests = 0;
    let totalComputeUnits = 0;
    for (const r of rows) {
      if (r.day !== null) {
        perDay.set(r.day, r.requests);
        totalRequests += r.requests;
        totalComputeUnits += r.computeUnits;
      } else if (r.network !== null) requestsByNetwork[r.network] = r.requests;
      else if (r.method !== null) requestsByMethod[r.method] = r.requests;
    }
    const dailyBreakdown = daysBetween(q.start, q.end).map((date) => ({ date, requests: perDay.get(date) ?? 0 }));
    return { period: { start: q.start, end: q.end }, totalRequests, totalComputeUnits, requestsByNetwork, requestsByMethod, dailyBreakdown };
  }

  /** One pass over `t`'s rows of the period, three groupings: a row has exactly one of day, network, method set. */
  #stats(t: typeof usageDaily | typeof usageAccountDaily, q: { network?: Placeholder } & Record<'userId' | 'start' | 'end', Placeholder>, ...also: SQL[]) {
    const where: SQL[] = [eq(t.userId, q.userId), gte(t.day, q.start), lte(t.day, q.end), ...also];
    if (q.network !== undefined) where.push(eq(t.network, q.network));
    return this.#db
      .select({
        day: sql<string | null>`${t.day}::text`,
        network: sql<string | null>`${t.network}`,
        method: sql<string | null>`${t.method}`,
        requests: sql`sum(${t.requests})`.mapWith(Number),
        computeUnits: sql`sum(${t.computeUnits})`.mapWith(Number),
      })
      .from(t)
      .where(and(...where))
      .groupBy(sql`grouping sets ((${t.day}), (${t.network}), (${t.method}))`);
  }
}

const DAY_MS = 86_400_000;

/** Every UTC day from `start` to `end` inclusive, as YYYY-MM-DD. */
export function daysBetween(start: string, end: string): string[] {
  const out: string[] = [];
  const last = Date.parse(`${end}T00:00:00Z`);
  for (let t = Date.parse(`${start}T00:00:00Z`); t <= last; t += DAY_MS) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}
