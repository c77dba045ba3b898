// The reads of stored usage (C11, C21, C27): the key list's counts, the quotas' seed at start,
// whether a key is an account's, and `/usage/stats`. What is counted and how it is written is
// service.ts's (the in-memory buffer and its flushes).
import { and, eq, gte, inArray, lte, type Placeholder, type SQL, sql } from 'drizzle-orm';
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
  readonly #statsReads;
  /** `ownsKey`'s read, prepared once. */
  readonly #ownsKey: ReturnType<typeof prepareSql>;
  readonly #networks: ReadonlySet<string>;

  /** `networkSlugs`: the configured networks, the only ones the stats filter accepts. */
  constructor(deps: { db: Db; networkSlugs: Iterable<string> }) {
    this.#db = deps.db;
    this.#networks = new Set(deps.networkSlugs);
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
