// C27 and C46: the figures of GET /usage/stats and GET /usage/analytics do not depend on how the
// stored sums travel from storage to the gateway (for scale, each period's per-day or per-hour sums
// come back packed in one column of bytes: docs/scaling.md). Stats are checked against plain sums of
// the stored key rows, over periods with edges (a month boundary, days without rows at both ends,
// a single day, rows just outside the period, another account's rows) and counts past 2^32 (the
// packed counters' high word); analytics against what was recorded, with counts past 2^32 too.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { AnalyticsRecorder, OK } from '../../src/analytics/recorder.ts';
import { AnalyticsStore } from '../../src/analytics/store.ts';
import type { Storage } from '../../src/storage/db.ts';
import { daysBetween, type StatsQuery, type UsageStats, UsageQueries } from '../../src/usage/queries.ts';
import { openTestStorage } from '../support/storage.ts';
import { storageBackends } from '../support/services.ts';

const backends = await storageBackends();
const rowsOf = <T>(res: unknown) => (res as { rows: T[] }).rows;
const BIG = 5_000_000_123; // past 2^32

/** Usage rows of two accounts around a month boundary (2026-02-26 to 2026-03-03), one day without rows in the middle. */
const ROWS: Array<[string, string, string, string, string, number, number]> = [];
{
  const days = ['2026-02-26', '2026-02-27', '2026-02-28', '2026-03-02', '2026-03-03'];
  let n = 1;
  for (const day of days) {
    for (const [user, key] of [['u1', 'k1'], ['u1', 'k2'], ['u2', 'k3']]) {
      for (const network of ['ethereum', 'polygon']) {
        for (const method of ['eth_call', 'eth_getLogs', 'eth_blockNumber']) {
          n = (n * 7919) % 1009;
          if (n % 4 === 0) continue; // not every combination every day
          ROWS.push([user as string, key as string, network, method, day, n, 3 * n + 1]);
        }
      }
    }
  }
  // Counts past 2^32 on one day of each account.
  ROWS.push(['u1', 'k1', 'ethereum', 'eth_chainId', '2026-02-28', BIG, 3 * BIG], ['u2', 'k3', 'ethereum', 'eth_chainId', '2026-02-28', BIG, BIG]);
}

/** C27's figures computed from the stored key rows by plain sums (no grouping sets, no roll-up, no packing). */
function expected(rows: Array<{ user_id: string; key_id: string; network: string; method: string; day: string; requests: number; compute_units: number }>, q: StatsQuery): UsageStats {
  const perDay = new Map<string, number>();
  const requestsByNetwork: Record<string, number> = {};
  const requestsByMethod: Record<string, number> = {};
  let totalRequests = 0;
  let totalComputeUnits = 0;
  for (const r of rows) {
    if (r.user_id !== q.userId || r.day < q.start || r.day > q.end) continue;
    if (q.keyId !== undefined && r.key_id !== q.keyId) continue;
    if (q.network !== undefined && r.network !== q.network) continue;
    perDay.set(r.day, (perDay.get(r.day) ?? 0) + r.requests);
    requestsByNetwork[r.network] = (requestsByNetwork[r.network] ?? 0) + r.requests;
    requestsByMethod[r.method] = (requestsByMethod[r.method] ?? 0) + r.requests;
    totalRequests += r.requests;
    totalComputeUnits += r.compute_units;
  }
  const dailyBreakdown = daysBetween(q.start, q.end).map((date) => ({ date, requests: perDay.get(date) ?? 0 }));
  return { period: { start: q.start, end: q.end }, totalRequests, totalComputeUnits, requestsByNetwork, requestsByMethod, dailyBreakdown };
}

for (const backend of backends) {
  describe(`stats and analytics figures through the packed reads on ${backend.name} (C27, C46)`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: (() => Promise<void>) | undefined;
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
      await storage.db.execute(sql`insert into users (id, email, name, password_hash, tier) values ('u1', 'u1@example.com', 'A', 'x', 'pro'), ('u2', 'u2@example.com', 'B', 'x', 'pro')`);
      await storage.db.execute(sql`insert into api_keys (id, user_id, name, prefix, key_hash, key_ciphertext, networks) values
        ('k1', 'u1', 'main', 'jk_1', 'h1', 'c1', '["ethereum"]'), ('k3', 'u2', 'other', 'jk_3', 'h3', 'c3', '["ethereum"]')`);
      // Written as the usage flush writes them (the account-wide sums by usage_daily's trigger), in two
      // upserts for some rows: the second adds to the first.
      for (const [i, r] of ROWS.entries()) {
        const [user, key, network, method, day, requests, cu] = r;
        const parts = i % 3 === 0 && requests > 1 ? [[requests - 1, cu - 1], [1, 1]] : [[requests, cu]];
        for (const [req, c] of parts) {
          await storage.db.execute(sql`insert into usage_daily (user_id, key_id, network, method, day, requests, compute_units)
            values (${user}, ${key}, ${network}, ${method}, ${day}::date, ${req}, ${c})
            on conflict (user_id, key_id, day, network, method) do update set
              requests = usage_daily.requests + excluded.requests, compute_units = usage_daily.compute_units + excluded.compute_units`);
        }
      }
    });
    after(async () => {
      await close?.();
    });

    test('/usage/stats: every filter and period answers the plain sums of the key rows, counts past 2^32 included', async () => {
      const usage = new UsageQueries({ db: storage.db, networkSlugs: ['ethereum', 'polygon'] });
      const stored = rowsOf<{ user_id: string; key_id: string; network: string; method: string; day: string; requests: number; compute_units: number }>(
        await storage.db.execute(sql`select user_id, key_id, network, method, day::text as day, requests::float8 as requests, compute_units::float8 as compute_units from usage_daily`),
      );
      assert.equal(stored.length, ROWS.length);
      const periods: Array<[string, string]> = [
        ['2026-02-26', '2026-03-03'], // every row
        ['2026-02-27', '2026-03-02'], // rows on both sides left out; the month boundary and the day without rows inside
        ['2026-02-28', '2026-02-28'], // one day, with the counts past 2^32
        ['2026-03-01', '2026-03-01'], // one day without rows
        ['2026-02-20', '2026-03-10'], // days without rows at both ends
      ];
      let checked = 0;
      for (const userId of ['u1', 'u2', 'nobody']) {
        for (const [start, end] of periods) {
          for (const keyId of [undefined, 'k1', 'k2', 'k3']) {
            for (const network of [undefined, 'ethereum', 'polygon']) {
              const q: StatsQuery = { userId, start, end, keyId, network };
              assert.deepEqual(await usage.stats(q), expected(stored, q), JSON.stringify(q));
              checked++;
            }
          }
        }
      }
      assert.equal(checked, 3 * 5 * 4 * 3);
      const big = await usage.stats({ userId: 'u1', start: '2026-02-28', end: '2026-02-28' });
      assert.ok(big.totalRequests > BIG && big.totalComputeUnits > 3 * BIG, 'the counts past 2^32 are read whole');
    });

    test('/usage/analytics: hourly and daily buckets, breakdowns and the filtered read carry counts past 2^32 whole', async () => {
      const recorder = new AnalyticsRecorder(['eth_call']);
      const realNow = Date.now;
      // Two calls in the last hour of 2026-02-28 and one in the first of 2026-03-01 (an hour and a day boundary).
      const at = [Date.parse('2026-02-28T23:10:00Z'), Date.parse('2026-02-28T23:59:59Z'), Date.parse('2026-03-01T00:00:00Z')];
      try {
        for (const t of at) {
          Date.now = () => t;
          recorder.call('u1', 'k1', 'ethereum', 'eth_call', BIG, OK, 12);
        }
      } finally {
        Date.now = realNow;
      }
      const batch = recorder.take();
      assert.ok(batch);
      await storage.db.transaction((tx) => AnalyticsRecorder.write(tx, batch));
      const store = new AnalyticsStore({ db: storage.db, logger: pino({ level: 'silent' }) });
      for (const granularity of ['hour', 'day'] as const) {
        const q = { userId: 'u1', start: '2026-02-28', end: '2026-03-01', granularity };
        for (const a of [await store.query(q), await store.querySeries(q), await store.query({ ...q, keyId: 'k1' })]) {
          const busy = a.series.filter((s) => s.requests > 0).map((s) => [s.start, s.requests, s.computeUnits]);
          assert.deepEqual(
            busy,
            granularity === 'hour'
              ? [['2026-02-28T23:00:00.000Z', 2, 2 * BIG], ['2026-03-01T00:00:00.000Z', 1, BIG]]
              : [['2026-02-28T00:00:00.000Z', 2, 2 * BIG], ['2026-03-01T00:00:00.000Z', 1, BIG]],
          );
          assert.equal(a.series.length, granularity === 'hour' ? 48 : 2);
          assert.equal(a.series[0]!.start, '2026-02-28T00:00:00.000Z');
          assert.deepEqual(a.byKey, [{ apiKeyId: 'k1', name: 'main', requests: 3, computeUnits: 3 * BIG }]);
          assert.deepEqual(a.topMethods.map((m) => [m.method, m.requests, m.computeUnits]), [['eth_call', 3, 3 * BIG]]);
          assert.equal(a.series.find((s) => s.requests === 2)!.latencyMs.p50 !== null, true);
        }
      }
    });
  });
}
