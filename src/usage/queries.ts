// The reads of stored usage (C11, C21, C27): the key list's counts, the quotas' seed at start,
// whether a key is an account's, and `/usage/stats`. What is counted and how it is written is
// service.ts's (the in-memory buffer and its flushes).
import { and, eq, gte, inArray, lte, type SQL, sql } from 'drizzle-orm';
import type { KeyUsageReader } from '../keys/service.ts';
import { currentPeriods } from '../metering/periods.ts';
import type { Db } from '../storage/db.ts';
import { prepareSql } from '../storage/prepared.ts';
import { usageAccountDaily, usageDaily } from './schema.ts';

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

/** Reads of the stored usage rows; each read prepared once. */
export class UsageQueries implements KeyUsageReader {
  readonly #db: Db;
  /**
   * The `/usage/stats` reads (C27), prepared once each (planned once, not at each call: docs/scaling.md):
   * account-wide, one network, one key, one key on one network.
   */
  readonly #statsReads: Record<'account' | 'network' | 'key' | 'keyNetwork', ReturnType<typeof prepareSql>>;
  /** `ownsKey`'s read, prepared once. */
  readonly #ownsKey: ReturnType<typeof prepareSql>;
  readonly #networks: ReadonlySet<string>;

  /** `networkSlugs`: the configured networks, the only ones the stats filter accepts. */
  constructor(deps: { db: Db; networkSlugs: Iterable<string> }) {
    this.#db = deps.db;
    this.#networks = new Set(deps.networkSlugs);
    this.#statsReads = {
      account: prepareSql(deps.db, 'usage_stats_account', statsSql('usage_account_daily', { network: false, key: false })),
      network: prepareSql(deps.db, 'usage_stats_network', statsSql('usage_account_daily', { network: true, key: false })),
      key: prepareSql(deps.db, 'usage_stats_key', statsSql('usage_daily', { network: false, key: true })),
      keyNetwork: prepareSql(deps.db, 'usage_stats_key_network', statsSql('usage_daily', { network: true, key: true })),
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
   * For scale (docs/scaling.md): read from the account-wide rows, a range of days through their (day) index.
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
    // For scale (docs/scaling.md): account-wide, the rows summed over keys (a tenth of the rows for ten keys); one key, its own rows.
    const reads = this.#statsReads;
    const read = q.keyId !== undefined ? (q.network !== undefined ? reads.keyNetwork : reads.key) : q.network !== undefined ? reads.network : reads.account;
    const result = await read({ userId: q.userId, start: q.start, end: q.end, keyId: q.keyId, network: q.network });
    const perDay = new Map<string, number>();
    const requestsByNetwork: Record<string, number> = {};
    const requestsByMethod: Record<string, number> = {};
    let totalRequests = 0;
    let totalComputeUnits = 0;
    for (const r of result.rows as Array<{ days: Uint8Array | null; network: string | null; method: string | null; requests: number }>) {
      if (r.days !== null) {
        // Every day's sums, packed (statsSql): the day (int4, days since 1970), requests and compute units (int8 each).
        const v = new DataView(r.days.buffer, r.days.byteOffset, r.days.byteLength);
        for (let at = 0; at + 20 <= r.days.length; at += 20) {
          const requests = v.getUint32(at + 4) * 0x1_0000_0000 + v.getUint32(at + 8);
          perDay.set(new Date(v.getInt32(at) * DAY_MS).toISOString().slice(0, 10), requests);
          totalRequests += requests;
          totalComputeUnits += v.getUint32(at + 12) * 0x1_0000_0000 + v.getUint32(at + 16);
        }
      } else if (r.network !== null) requestsByNetwork[r.network] = r.requests;
      else if (r.method !== null) requestsByMethod[r.method] = r.requests;
    }
    const dailyBreakdown = daysBetween(q.start, q.end).map((date) => ({ date, requests: perDay.get(date) ?? 0 }));
    return { period: { start: q.start, end: q.end }, totalRequests, totalComputeUnits, requestsByNetwork, requestsByMethod, dailyBreakdown };
  }
}

const DAY_MS = 86_400_000;

/**
 * A `/usage/stats` read (C27) of `table` (the account-wide sums, or the key rows for `apiKeyId`),
 * one pass over the period's rows, three groupings (a grouped row has exactly one of day, network,
 * method set). For scale (docs/scaling.md): a first row whose `days` holds every day's sums packed
 * into bytes (the day as int4, days since 1970; requests and compute units as int8), so that 90
 * days are one field for the driver to parse instead of 90 rows; then one row per network and per
 * method (requests as float8: a number on both drivers). Placeholders: userId, start, end (days,
 * inclusive), and network and keyId when filtered.
 */
function statsSql(table: 'usage_daily' | 'usage_account_daily', by: { network: boolean; key: boolean }): SQL {
  const where = [
    sql`t.user_id = ${sql.placeholder('userId')}`,
    sql`t.day >= ${sql.placeholder('start')}::date`,
    sql`t.day <= ${sql.placeholder('end')}::date`,
    ...(by.network ? [sql`t.network = ${sql.placeholder('network')}`] : []),
    ...(by.key ? [sql`t.key_id = ${sql.placeholder('keyId')}`] : []),
  ];
  return sql`with g as (
      select t.day, t.network, t.method, sum(t.requests)::int8 as requests, sum(t.compute_units)::int8 as compute_units
      from ${sql.raw(table)} t where ${sql.join(where, sql` and `)}
      group by grouping sets ((t.day), (t.network), (t.method)))
    select (select coalesce(string_agg(int4send(g.day - date '1970-01-01') || int8send(g.requests) || int8send(g.compute_units), ''::bytea), ''::bytea)
        from g where g.day is not null) as days, null::text as network, null::text as method, null::float8 as requests
    union all
    select null, g.network, g.method, g.requests::float8 from g where g.day is null`;
}

/** Every UTC day from `start` to `end` inclusive, as YYYY-MM-DD. */
export function daysBetween(start: string, end: string): string[] {
  const out: string[] = [];
  const last = Date.parse(`${end}T00:00:00Z`);
  for (let t = Date.parse(`${start}T00:00:00Z`); t <= last; t += DAY_MS) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}
