// The stored analytics (C46): writing flushed rows, reading series and roll-ups, and the retention sweep.
import { type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { PeriodicJob } from '../jobs/periodic.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';
import { deleteInBatches } from '../storage/batched-delete.ts';
import type { Db } from '../storage/db.ts';
import { prepareSql } from '../storage/prepared.ts';
import { addStoredLatencies, percentile, percentiles } from './histogram.ts';
import { addCounts, COUNTERS, type Counts, REFUSAL_REASONS } from './recorder.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** C46: hourly rows are kept 35 days, daily rows 400 days (today counts as one). */
export const HOURLY_RETENTION_DAYS = 35;
export const DAILY_RETENTION_DAYS = 400;
/** Top methods listed. */
const TOP_METHODS = 10;
/** Hours between two retention sweeps (also one at start). */
const SWEEP_INTERVAL_MS = HOUR_MS;

export type Granularity = 'hour' | 'day';

export interface AnalyticsQuery {
  userId: string;
  /** Inclusive UTC days, YYYY-MM-DD. */
  start: string;
  end: string;
  granularity: Granularity;
  keyId?: string | undefined;
  network?: string | undefined;
  method?: string | undefined;
}

type Refused = Record<(typeof REFUSAL_REASONS)[number], number>;
interface Latency {
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** What `GET /usage/analytics` answers (C46). */
export interface Analytics {
  period: { start: string; end: string };
  granularity: Granularity;
  series: Array<{ start: string; requests: number; computeUnits: number; errors: { node: number; upstream: number }; refused: Refused; latencyMs: Latency }>;
  topMethods: Array<{ method: string; requests: number; computeUnits: number; errorRate: number; p95Ms: number | null }>;
  byKey: Array<{ apiKeyId: string; name: string | null; requests: number; computeUnits: number }>;
  byNetwork: Array<{ network: string; requests: number; errorRate: number; p95Ms: number | null }>;
}

type Sum = Counts;
const emptySum = (): Sum => ({ requests: 0, computeUnits: 0, errorsNode: 0, errorsUpstream: 0, refused: [0, 0, 0, 0, 0, 0], latency: [] });

/** A row of a grouping set: the columns not grouped are null. */
interface GroupedRow {
  key_id: string | null;
  network: string | null;
  method: string | null;
}
interface StoredSums {
  requests: number;
  compute_units: number;
  errors_node: number;
  errors_upstream: number;
  refused_rate: number;
  refused_quota: number;
  refused_key: number;
  refused_network: number;
  refused_method: number;
  refused_access: number;
}

const errorRate = (s: Sum) => (s.requests === 0 ? 0 : Math.round(((s.errorsNode + s.errorsUpstream) / s.requests) * 10_000) / 10_000);
const dayStart = (day: string) => Date.parse(`${day}T00:00:00Z`);
const byRequests = <T extends { requests: number }>(name: (x: T) => string) => (a: T, b: T) => b.requests - a.requests || (name(a) < name(b) ? -1 : 1);

/** C46: reads the stored analytics rows and sweeps them past retention. */
export class AnalyticsStore {
  readonly #db: Db;
  readonly #log: Logger;
  /** The retention sweep: once at start, then every hour. */
  readonly #sweeps: PeriodicJob;
  /** The roll-up reads (`#queryRollups`), prepared once per granularity. */
  readonly #rollups: Record<Granularity, ReturnType<typeof prepareSql>>;
  /** The series reads (`querySeries`), likewise. */
  readonly #series: Record<Granularity, ReturnType<typeof prepareSql>>;
  /** One key's hourly read (`#queryKeyHours`), prepared once. */
  readonly #keyHours: ReturnType<typeof prepareSql>;
  /** `ownsKey`'s read, prepared once. */
  readonly #ownsKey: ReturnType<typeof prepareSql>;

  constructor(deps: { db: Db; logger: Logger }) {
    this.#db = deps.db;
    this.#log = deps.logger;
    this.#rollups = {
      hour: prepareSql(deps.db, 'analytics_rollups_hour', rollupsSql('hour')),
      day: prepareSql(deps.db, 'analytics_rollups_day', rollupsSql('day')),
    };
    this.#series = {
      hour: prepareSql(deps.db, 'analytics_series_hour', seriesSql('hour')),
      day: prepareSql(deps.db, 'analytics_series_day', seriesSql('day')),
    };
    this.#keyHours = prepareSql(deps.db, 'analytics_key_hours', keyHoursSql());
    this.#ownsKey = prepareSql(
      deps.db,
      'analytics_owns_key',
      sql`select (exists (select 1 from api_keys where id = ${sql.placeholder('keyId')} and user_id = ${sql.placeholder('userId')})
        or exists (select 1 from analytics_series where user_id = ${sql.placeholder('userId')} and key_id = ${sql.placeholder('keyId')})) as owned`,
    );
    this.#sweeps = new PeriodicJob({
      run: () => this.sweep(),
      everyMs: SWEEP_INTERVAL_MS,
      onError: (err) => this.#log.warn({ error: (err as Error).name }, 'analytics retention sweep failed'),
      outage: new StorageOutageLog(deps.logger, 'analytics retention sweep'),
    });
  }

  /** The first day a granularity still has rows for, given today (UTC). */
  static oldestDay(granularity: Granularity, today: string): string {
    const keep = granularity === 'hour' ? HOURLY_RETENTION_DAYS : DAILY_RETENTION_DAYS;
    return new Date(dayStart(today) - (keep - 1) * DAY_MS).toISOString().slice(0, 10);
  }

  /** Whether `keyId` is, or was, a key of the account (a deleted key's rows still count; C7: else 404). */
  async ownsKey(userId: string, keyId: string): Promise<boolean> {
    const result = await this.#ownsKey({ userId, keyId });
    return (result.rows as Array<{ owned: boolean }>)[0]?.owned === true;
  }

  /** C46: the account's analytics over [start, end], every bucket of the period present (zeros included), oldest first. */
  async query(q: AnalyticsQuery): Promise<Analytics> {
    if (q.network === undefined && q.method === undefined) {
      if (q.keyId === undefined) {
        const fromRollups = await this.#queryRollups(q);
        if (fromRollups) return fromRollups;
      } else if (q.granularity === 'hour') {
        const fromKeyHours = await this.#queryKeyHours(q, q.keyId);
        if (fromKeyHours) return fromKeyHours;
      }
    }
    return this.querySeries(q);
  }

  /**
   * The same from the series rows alone: what `query` answers with a key, network or method, and
   * without one when the roll-ups disagree with the daily rows (`#queryRollups`). One prepared
   * statement per granularity (`seriesSql`): the period's rows of the account's series that pass
   * the filters, summed per bucket and per series in SQL, histograms as their stored forms, decoded
   * and merged here like the roll-ups'; per series its key, network and method, so the breakdowns
   * are the series' sums added up here.
   */
  async querySeries(q: AnalyticsQuery): Promise<Analytics> {
    const rows = await this.#series[q.granularity]({
      userId: q.userId,
      keyId: q.keyId ?? null,
      network: q.network ?? null,
      method: q.method ?? null,
      fromHour: dayStart(q.start) / HOUR_MS,
      toHour: (dayStart(q.end) + DAY_MS) / HOUR_MS,
      start: q.start,
      end: q.end,
    });
    const { sets, names } = fromSeriesRows(rows.rows as SeriesRow[], q.granularity === 'hour' ? HOUR_MS : DAY_MS);
    return answer(q, sets, names);
  }

  /**
   * C46, for scale: one key's hours (a key filter alone, by the hour) read the buckets from the key's
   * hourly roll-up (`analytics_key_hours`: one row per hour, not one per series and hour) and the
   * breakdowns from the key's series' daily rows (the period is whole UTC days, and a flush adds
   * each hourly row to its day's row and to the roll-up in one transaction, so per series the days
   * hold the same sums as its hours). One statement (`keyHoursSql`). When the two disagree (rows not
   * written by the recorder), null: the caller answers from the series' hourly rows.
   */
  async #queryKeyHours(q: AnalyticsQuery, keyId: string): Promise<Analytics | null> {
    const rows = await this.#keyHours({
      userId: q.userId,
      keyId,
      fromHour: dayStart(q.start) / HOUR_MS,
      toHour: (dayStart(q.end) + DAY_MS) / HOUR_MS,
      start: q.start,
      end: q.end,
    });
    const fromBuckets = emptySum();
    const fromDays = emptySum();
    const { sets, names } = fromSeriesRows(rows.rows as SeriesRow[], HOUR_MS, fromBuckets, fromDays);
    if (!sameSum(fromBuckets, fromDays)) return null;
    return answer(q, sets, names);
  }

  /**
   * C46, for scale: without a key, network or method, the buckets from the account's roll-up (one
   * row per hour or day) and the breakdowns from its daily roll-up per key, network and method
   * (`analytics_account_day_parts`), also for an hourly query: its period is whole UTC days, and a
   * flush adds each hourly row to its day's row and to every roll-up in one transaction, so per
   * method, key and network the days hold the same sums as their hours. One statement (one
   * snapshot): the roll-up's rows and the day parts summed per key, network and method (a few
   * dozen rows); histograms decoded and merged here. When the period's totals of the two roll-ups
   * differ (rows not written by the recorder), null: the caller answers from the series rows.
   */
  async #queryRollups(q: AnalyticsQuery): Promise<Analytics | null> {
    const rows = await this.#rollups[q.granularity]({
      userId: q.userId,
      fromHour: dayStart(q.start) / HOUR_MS,
      toHour: (dayStart(q.end) + DAY_MS) / HOUR_MS,
      start: q.start,
      end: q.end,
    });
    const names = new Map<string, string>();
    const sets = emptySets();
    const fromBuckets = emptySum();
    const fromDays = emptySum();
    for (const r of rows.rows as Array<GroupedRow & StoredSums & { buckets: Uint8Array | null; key_name: string | null; latency: Uint8Array }>) {
      if (r.buckets !== null) {
        // One roll-up row per bucket (its primary key), all of them packed in this one column.
        addPackedBuckets(sets.perBucket, r.buckets, q.granularity === 'hour' ? HOUR_MS : DAY_MS, fromBuckets);
        continue;
      }
      const row = sumOf(r);
      if (r.method !== null) {
        // Every call has one method: the methods' rows together are the account's day.
        addCounts(fromDays, row);
        addCounts(into(sets.perMethod, r.method), row);
      } else if (r.network !== null) addCounts(into(sets.perNetwork, r.network), row);
      else {
        // byKey shows no latency: counters only (a key's rows carry no histogram).
        if (r.key_name !== null) names.set(r.key_id as string, r.key_name);
        const k = into(sets.perKey, r.key_id as string);
        k.requests += row.requests;
        k.computeUnits += row.computeUnits;
        k.errorsNode += row.errorsNode;
        k.errorsUpstream += row.errorsUpstream;
      }
    }
    if (!sameSum(fromBuckets, fromDays)) return null;
    return answer(q, sets, names);
  }

  /**
   * C46: deletes hourly rows older than 35 days and daily rows older than 400 days (UTC days, today
   * included), the account and key roll-ups with them (the same cut: a kept day has all its rows).
   */
  async sweep(now = Date.now()): Promise<{ hourly: number; daily: number; accountHourly: number; accountDaily: number; accountDayParts: number; keyHourly: number }> {
    const today = new Date(now).toISOString().slice(0, 10);
    const hourCut = sql`hour < ${dayStart(AnalyticsStore.oldestDay('hour', today)) / HOUR_MS}::int`;
    const dayCut = sql`day < ${AnalyticsStore.oldestDay('day', today)}::date`;
    // For scale (docs/scaling.md): in bounded batches, through the (hour) and (day) block range indexes.
    const hourly = await deleteInBatches(this.#db, 'analytics_hours', hourCut);
    const daily = await deleteInBatches(this.#db, 'analytics_days', dayCut);
    const accountHourly = await deleteInBatches(this.#db, 'analytics_account_hours', hourCut);
    const accountDaily = await deleteInBatches(this.#db, 'analytics_account_days', dayCut);
    const accountDayParts = await deleteInBatches(this.#db, 'analytics_account_day_parts', dayCut);
    const keyHourly = await deleteInBatches(this.#db, 'analytics_key_hours', hourCut);
    const out = { hourly, daily, accountHourly, accountDaily, accountDayParts, keyHourly };
    if (hourly || daily || accountHourly || accountDaily || accountDayParts || keyHourly) this.#log.info(out, 'analytics rows past retention deleted');
    return out;
  }

  /** Starts the retention sweep: once now, then every hour; the timer does not keep the process alive. */
  start(): void {
    this.#sweeps.start();
  }

  async close(): Promise<void> {
    await this.#sweeps.stop();
  }
}

/**
 * SQL text: one bucket's sums packed into bytes, for `addPackedBuckets` (for scale, docs/scaling.md:
 * a cold 7-day hourly answer is 168 buckets, and the driver's parsing of one row per bucket, a
 * dozen text fields each, cost the gateway more CPU than the rest of the answer; one column of
 * bytes for all of them is one field to parse). The bucket's number (int4: hours or days since
 * 1970), each counter of COUNTERS (int8, 0 for none), then the byte length (int4) of its
 * histograms' stored forms, each after its length (as `addStoredLatencies` reads them), and those.
 */
function packedBucketSql(number: string, counter: (c: string) => string, latency: string): string {
  return [`int4send(${number})`, ...COUNTERS.map((c) => `int8send(${counter(c)})`), `int4send(coalesce(length(${latency}), 0))`, `coalesce(${latency}, ''::bytea)`].join(' || ');
}

/** SQL text: the bytes of `packed` (packedBucketSql) of every row of what follows, one after the other. */
const packedAll = (packed: string) => `coalesce(string_agg(${packed}, ''::bytea), ''::bytea)`;
/** SQL text: a roll-up row's histogram as one stored form after its length, as a summed row's are. */
const ROLLUP_LATENCY = 'int2send(length(r.latency)::int2) || r.latency';
/**
 * SQL text: rows `r` summed, counters as float8 (the same on PGlite and node-postgres) and their
 * histograms' stored forms concatenated, each after its length (addStoredLatencies).
 */
const SUMMED = `${COUNTERS.map((c) => `coalesce(sum(r.${c}), 0)::float8 as ${c}`).join(', ')}, string_agg(${ROLLUP_LATENCY}, ''::bytea) as latency`;
/** SQL text: the counters of a row saying what a series is (it counts nothing). */
const NO_COUNTS = `${COUNTERS.map((c) => `0::float8 as ${c}`).join(', ')}, null::bytea as latency`;
/** SQL text: the columns after `buckets` of a series read's first row (the packed buckets), all null. */
const SERIES_NONE = `null::int as series, null::text as key_id, null::text as network, null::text as method, null::text as key_name, ${COUNTERS.map((c) => `null::float8 as ${c}`).join(', ')}, null::bytea as latency`;

/**
 * The roll-up read of `#queryRollups`, one statement: a first row whose `buckets` holds the
 * account's roll-up rows of the period (per hour or day) packed (`packedBucketSql`), then its day
 * parts summed per key, network and method, with each key's name (one round trip; a deleted
 * key's is null). Histograms as their stored forms, each after its length (addStoredLatencies); a
 * part's histograms concatenated. Placeholders: userId, start and end (days, inclusive), fromHour
 * and toHour (hours since 1970, end exclusive) for `hour`.
 */
function rollupsSql(granularity: Granularity): SQL {
  const summed = sql.raw(SUMMED);
  const userId = sql.placeholder('userId');
  const start = sql`${sql.placeholder('start')}::date`;
  const end = sql`${sql.placeholder('end')}::date`;
  const none = sql.raw(`null::text as key_id, null::text as network, null::text as method, null::text as key_name, ${COUNTERS.map((c) => `null::float8 as ${c}`).join(', ')}, null::bytea as latency`);
  // A roll-up row's histogram is one stored form: after its length, as the day parts' are.
  const packed = (number: string) => sql.raw(packedAll(packedBucketSql(number, (c) => `coalesce(r.${c}, 0)`, ROLLUP_LATENCY)));
  const buckets =
    granularity === 'hour'
      ? sql`select ${packed('r.hour')} from analytics_account_hours r
          where r.user_id = ${userId} and r.hour >= ${sql.placeholder('fromHour')}::int and r.hour < ${sql.placeholder('toHour')}::int`
      : sql`select ${packed("r.day - date '1970-01-01'")} from analytics_account_days r where r.user_id = ${userId} and r.day >= ${start} and r.day <= ${end}`;
  return sql`select (${buckets}) as buckets, ${none}
    union all
    select null, case when r.kind = 'k' then r.name end, case when r.kind = 'n' then r.name end, case when r.kind = 'm' then r.name end,
      case when r.kind = 'k' then (select k.name from api_keys k where k.id = r.name and k.user_id = ${userId}) end, ${summed}
    from analytics_account_day_parts r
    where r.user_id = ${userId} and r.day >= ${start} and r.day <= ${end}
    group by r.kind, r.name`;
}

/**
 * The series read of `querySeries`, one statement: the account's series that pass the filters
 * (each filter a placeholder, null for none) first, as an array, then each one's rows of the
 * period by the primary key (never the period's rows of every account), summed per bucket and per
 * series (grouping sets: one pass over the rows); a first row whose `buckets` holds the buckets'
 * sums packed (`packedBucketSql`), then one row per series with its sums, then one per series
 * saying its key, network, method and the key's name. Numbers as float8, the same on PGlite and
 * node-postgres; counters stored NULL for zero. For scale (docs/scaling.md): the histograms are not decoded in SQL (a lateral
 * unnesting per row, which the planner costed at a thousand rows each: 0.9 s for a year of 120
 * series, half of it JIT compilation) but concatenated like the roll-ups', for addStoredLatencies.
 * Placeholders: userId, keyId, network, method, and the period as for `rollupsSql`.
 */
function seriesSql(granularity: Granularity): SQL {
  const userId = sql.placeholder('userId');
  const nullable = (name: string, column: string) => sql`(${sql.placeholder(name)}::text is null or ${sql.raw(column)} = ${sql.placeholder(name)}::text)`;
  const ofFilter = sql`user_id = ${userId} and ${nullable('keyId', 'key_id')} and ${nullable('network', 'network')} and ${nullable('method', 'method')}`;
  const summed = sql.raw(
    `${COUNTERS.map((c) => `coalesce(sum(r.${c}), 0)::int8 as ${c}`).join(', ')}, string_agg(int2send(length(r.latency)::int2) || r.latency, ''::bytea) as latency`,
  );
  const [table, at, period] =
    granularity === 'hour'
      ? [sql.raw('analytics_hours'), sql.raw('r.hour'), sql`r.hour >= ${sql.placeholder('fromHour')}::int and r.hour < ${sql.placeholder('toHour')}::int`]
      : [sql.raw('analytics_days'), sql.raw("(r.day - date '1970-01-01')"), sql`r.day >= ${sql.placeholder('start')}::date and r.day <= ${sql.placeholder('end')}::date`];
  const noCounts = sql.raw(NO_COUNTS);
  const none = sql.raw(SERIES_NONE);
  const asFloat = sql.raw(COUNTERS.map((c) => `g.${c}::float8`).join(', '));
  // A series is never null in the rows: a row of the (bucket) set is one whose series is.
  return sql`with g as (
      select ${at} as at, r.series, ${summed}
      from ${table} r
      where r.series = any(array(select id from analytics_series where ${ofFilter})) and ${period}
      group by grouping sets ((${at}), (r.series)))
    select (select ${sql.raw(packedAll(packedBucketSql('g.at', (c) => `g.${c}`, 'g.latency')))} from g where g.series is null) as buckets, ${none}
    union all
    select null, g.series, null, null, null, null, ${asFloat}, g.latency from g where g.series is not null
    union all
    select null, s.id, s.key_id, s.network, s.method, (select k.name from api_keys k where k.id = s.key_id and k.user_id = ${userId}), ${noCounts}
    from analytics_series s where ${ofFilter}`;
}

/**
 * The read of `#queryKeyHours`, one statement: a first row whose `buckets` holds the key's roll-up
 * rows of the period (`analytics_key_hours`, per hour) packed as `rollupsSql` packs the account's,
 * then the daily rows of each of the key's series summed per series, then one row per series saying
 * its key, network, method and the key's name, as `seriesSql` answers. Placeholders: userId, keyId,
 * start and end (days, inclusive), fromHour and toHour (hours since 1970, end exclusive).
 */
function keyHoursSql(): SQL {
  const userId = sql.placeholder('userId');
  const keyId = sql.placeholder('keyId');
  const ofKey = sql`user_id = ${userId} and key_id = ${keyId}::text`;
  const summed = sql.raw(SUMMED);
  const packed = sql.raw(packedAll(packedBucketSql('r.hour', (c) => `coalesce(r.${c}, 0)`, ROLLUP_LATENCY)));
  const noCounts = sql.raw(NO_COUNTS);
  const none = sql.raw(SERIES_NONE);
  return sql`select (select ${packed} from analytics_key_hours r
      where r.user_id = ${userId} and r.key_id = ${keyId}::text and r.hour >= ${sql.placeholder('fromHour')}::int and r.hour < ${sql.placeholder('toHour')}::int) as buckets, ${none}
    union all
    select null, r.series, null, null, null, null, ${summed}
    from analytics_days r
    where r.series = any(array(select id from analytics_series where ${ofKey})) and r.day >= ${sql.placeholder('start')}::date and r.day <= ${sql.placeholder('end')}::date
    group by r.series
    union all
    select null, s.id, s.key_id, s.network, s.method, (select k.name from api_keys k where k.id = s.key_id and k.user_id = ${userId}), ${noCounts}
    from analytics_series s where ${ofKey}`;
}

/** A row of `seriesSql` or `keyHoursSql`: the packed buckets, a series' sums, or what a series is. */
type SeriesRow = GroupedRow & StoredSums & { buckets: Uint8Array | null; series: number | null; key_name: string | null; latency: Uint8Array | null };

/**
 * The sums of a series read: the buckets (`unitMs` long) as packed, each series' sums added to its
 * method's, key's and network's; the buckets' sums also into `bucketsTotal` and the described
 * series' into `seriesTotal`, when given.
 */
function fromSeriesRows(rows: SeriesRow[], unitMs: number, bucketsTotal?: Sum, seriesTotal?: Sum): { sets: Sets; names: Map<string, string> } {
  const sets = emptySets();
  const names = new Map<string, string>();
  const perSeries = new Map<number, Sum>();
  const described: Array<{ series: number; key_id: string; network: string; method: string }> = [];
  for (const r of rows) {
    if (r.buckets !== null) addPackedBuckets(sets.perBucket, r.buckets, unitMs, bucketsTotal);
    else if (r.key_id !== null) {
      // A series of the filter: what it is (no counts).
      described.push(r as { series: number; key_id: string; network: string; method: string });
      if (r.key_name !== null) names.set(r.key_id, r.key_name);
    } else perSeries.set(Number(r.series), sumOf(r));
  }
  for (const d of described) {
    const s = perSeries.get(Number(d.series));
    if (s === undefined) continue; // no rows in the period
    addCounts(into(sets.perMethod, d.method), s);
    addCounts(into(sets.perKey, d.key_id), s);
    addCounts(into(sets.perNetwork, d.network), s);
    if (seriesTotal) addCounts(seriesTotal, s);
  }
  return { sets, names };
}

interface Sets {
  perBucket: Map<number, Sum>;
  perMethod: Map<string, Sum>;
  perKey: Map<string, Sum>;
  perNetwork: Map<string, Sum>;
}
const emptySets = (): Sets => ({ perBucket: new Map(), perMethod: new Map(), perKey: new Map(), perNetwork: new Map() });

/** The Sum in `map` under `k`, made empty when missing. */
function into<K>(map: Map<K, Sum>, k: K): Sum {
  let s = map.get(k);
  if (!s) map.set(k, (s = emptySum()));
  return s;
}

/** A stored row's sums: its counters, and its histograms (stored forms after their lengths) merged. */
function sumOf(r: StoredSums & { latency: Uint8Array | null }): Sum {
  const row: Sum = {
    requests: r.requests,
    computeUnits: r.compute_units,
    errorsNode: r.errors_node,
    errorsUpstream: r.errors_upstream,
    refused: [r.refused_rate, r.refused_quota, r.refused_key, r.refused_network, r.refused_method, r.refused_access],
    latency: [],
  };
  if (r.latency !== null) addStoredLatencies(row.latency, r.latency);
  return row;
}

/**
 * Adds the buckets packed by `packedBucketSql` into `perBucket`, each under its start (epoch ms:
 * its number times `unitMs`), and into `total` when given.
 */
function addPackedBuckets(perBucket: Map<number, Sum>, packed: Uint8Array, unitMs: number, total?: Sum): void {
  const v = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  for (let at = 0; at < packed.length; ) {
    const start = v.getInt32(at) * unitMs;
    const row: Sum = {
      requests: int8(v, at + 4),
      computeUnits: int8(v, at + 12),
      errorsNode: int8(v, at + 20),
      errorsUpstream: int8(v, at + 28),
      refused: [int8(v, at + 36), int8(v, at + 44), int8(v, at + 52), int8(v, at + 60), int8(v, at + 68), int8(v, at + 76)],
      latency: [],
    };
    const end = at + 88 + v.getInt32(at + 84);
    addStoredLatencies(row.latency, packed, at + 88, end);
    at = end;
    const had = perBucket.get(start);
    if (had) addCounts(had, row);
    else perBucket.set(start, row);
    if (total) addCounts(total, row);
  }
}

/** A packed counter at `at` (int8, big-endian): below 2^53, as every number of an answer is. */
const int8 = (v: DataView, at: number) => v.getUint32(at) * 0x1_0000_0000 + v.getUint32(at + 4);

/** Whether two sums hold the same counters and histogram (trailing empty buckets aside). */
function sameSum(a: Sum, b: Sum): boolean {
  if (a.requests !== b.requests || a.computeUnits !== b.computeUnits || a.errorsNode !== b.errorsNode || a.errorsUpstream !== b.errorsUpstream) return false;
  if (a.refused.some((n, i) => n !== b.refused[i])) return false;
  const n = Math.max(a.latency.length, b.latency.length);
  for (let i = 0; i < n; i++) if ((a.latency[i] ?? 0) !== (b.latency[i] ?? 0)) return false;
  return true;
}

const QUANTILES = [0.5, 0.95, 0.99] as const;
/** Each refusal reason's place in a Sum's `refused` (REFUSAL_REASONS' order). */
const AT = Object.fromEntries(REFUSAL_REASONS.map((reason, i) => [reason, i])) as Refused;
/** A bucket without calls (read only). */
const NO_CALLS: Readonly<Sum> = Object.freeze(emptySum());

/** The answer (C46) from the sums of the period's buckets, methods, keys and networks. */
function answer(q: AnalyticsQuery, { perBucket, perMethod, perKey, perNetwork }: Sets, keyNames: ReadonlyMap<string, string>): Analytics {
  const hourly = q.granularity === 'hour';
  const from = dayStart(q.start);
  const to = dayStart(q.end) + DAY_MS;
  const step = hourly ? HOUR_MS : DAY_MS;
  const series: Analytics['series'] = [];
  for (let t = from; t < to; t += step) {
    const s = perBucket.get(t) ?? NO_CALLS;
    const [p50, p95, p99] = percentiles(s.latency, QUANTILES);
    const r = s.refused;
    series.push({
      start: new Date(t).toISOString(),
      requests: s.requests,
      computeUnits: s.computeUnits,
      errors: { node: s.errorsNode, upstream: s.errorsUpstream },
      // One literal (one object shape for every bucket), by the reasons' order in `refused`.
      refused: { rate: r[AT.rate] ?? 0, quota: r[AT.quota] ?? 0, key: r[AT.key] ?? 0, network: r[AT.network] ?? 0, method: r[AT.method] ?? 0, access: r[AT.access] ?? 0 },
      latencyMs: { p50: p50 ?? null, p95: p95 ?? null, p99: p99 ?? null },
    });
  }
  const topMethods = [...perMethod]
    .filter(([, s]) => s.requests > 0)
    .map(([method, s]) => ({ method, requests: s.requests, computeUnits: s.computeUnits, errorRate: errorRate(s), p95Ms: percentile(s.latency, 0.95) }))
    .sort(byRequests((x) => x.method))
    .slice(0, TOP_METHODS);
  const byKey = [...perKey]
    .filter(([, s]) => s.requests > 0)
    .map(([apiKeyId, s]) => ({ apiKeyId, name: keyNames.get(apiKeyId) ?? null, requests: s.requests, computeUnits: s.computeUnits }))
    .sort(byRequests((x) => x.apiKeyId));
  const byNetwork = [...perNetwork]
    .filter(([, s]) => s.requests > 0)
    .map(([network, s]) => ({ network, requests: s.requests, errorRate: errorRate(s), p95Ms: percentile(s.latency, 0.95) }))
    .sort(byRequests((x) => x.network));
  return { period: { start: q.start, end: q.end }, granularity: q.granularity, series, topMethods, byKey, byNetwork };
}
