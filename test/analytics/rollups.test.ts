// C46: the per-account roll-ups (analytics_account_hours and _days, migration 0014; per
// day and key, network or method, analytics_account_day_parts, 0016) and the per-key hourly one
// (analytics_key_hours, 0017). A query without a key, network or method reads the buckets from the
// first and the breakdowns from the day parts, one by key alone by the hour its buckets from the key's
// roll-up and its breakdowns from the key's daily series rows; their answers must be identical to
// those read from the series rows alone (querySeries, the path before the roll-ups), on PGlite and
// PostgreSQL.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pino from 'pino';
import { AnalyticsRecorder, NODE_ERROR, OK, UPSTREAM_ERROR } from '../../src/analytics/recorder.ts';
import { type AnalyticsQuery, AnalyticsStore } from '../../src/analytics/store.ts';
import { KeyAccessDeniedError, QuotaExceededError, RateLimitedError } from '../../src/errors/rpc.ts';
import type { Db, Storage } from '../../src/storage/db.ts';
import { openTestStorage } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';

const backends = await storageBackends();
const rowsOf = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Recorded from 2026-03-01 to 2026-03-04 (UTC). */
const FIRST = Date.parse('2026-03-01T00:00:00Z');

type Session = Db['_']['session'];
type Prepared = ReturnType<Session['prepareQuery']>;

/**
 * A store over `db` that keeps the SQL text of each statement it runs: those of `db.execute`, and
 * those prepared once (src/storage/prepared.ts) at each of their runs.
 */
function spiedStore(db: Db): { store: AnalyticsStore; seen: string[]; prepared: Array<string | undefined> } {
  const seen: string[] = [];
  /** The names of the statements prepared (by prepareSql: db.execute's own are not seen here). */
  const prepared: Array<string | undefined> = [];
  const dialect = new PgDialect();
  const session = new Proxy(db._.session, {
    get(target, prop) {
      if (prop === 'prepareQuery') {
        return (...args: Parameters<Session['prepareQuery']>) => {
          prepared.push(args[2]);
          const statement: Prepared = target.prepareQuery(...args);
          return {
            execute: (values?: Record<string, unknown>) => {
              seen.push(args[0].sql);
              return statement.execute(values);
            },
          };
        };
      }
      const v: unknown = Reflect.get(target, prop);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  const spy = new Proxy(db, {
    get(target, prop) {
      if (prop === 'execute') {
        return (q: SQL) => {
          seen.push(dialect.sqlToQuery(q).sql);
          return target.execute(q);
        };
      }
      if (prop === '_') return { ...target._, session };
      const v: unknown = Reflect.get(target, prop);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store: new AnalyticsStore({ db: spy, logger: pino({ level: 'silent' }) }), seen, prepared };
}

/** A small deterministic generator (xorshift). */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/**
 * Varied traffic through the recorder, flushed as the gateway does (several flushes, some into rows
 * already stored): two accounts, keys (one deleted: no api_keys row), networks, methods (one with
 * characters the recorder replaces), errors of both kinds, refusals of several reasons (some rows
 * refusals only), latencies over many buckets, hours over four days; and an account that does not
 * exist (its rows dropped).
 */
async function record(db: Db): Promise<void> {
  const next = random(28);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)] as T;
  const realNow = Date.now;
  try {
    for (let flush = 0; flush < 6; flush++) {
      const recorder = new AnalyticsRecorder(['eth_call', 'eth_getLogs', 'eth_blockNumber']);
      // Hours spread over the four days, the same hours again in later flushes; in time order (the
      // recorder's clock only moves forward).
      const times = Array.from({ length: 400 }, () => FIRST + Math.floor(next() * 4 * 24) * HOUR + Math.floor(next() * HOUR)).sort((a, b) => a - b);
      for (const at of times) {
        Date.now = () => at;
        const [user, key] = pick([['u1', 'k1'], ['u1', 'k2'], ['u1', 'k3'], ['u2', 'k4'], ['ghost', 'k9']] as const);
        const network = pick(['ethereum', 'polygon', 'base']);
        const method = pick(['eth_call', 'eth_getLogs', 'eth_blockNumber', 'odd\u0001name']);
        const roll = next();
        if (roll < 0.1) recorder.refused(user, key, network, method, pick([new RateLimitedError('slow down'), new QuotaExceededError('quota'), new KeyAccessDeniedError('origin', 'origin not allowed')]), 1 + Math.floor(next() * 3));
        else {
          const outcome = roll < 0.15 ? NODE_ERROR : roll < 0.2 ? UPSTREAM_ERROR : OK;
          recorder.call(user, key, network, method, 1 + Math.floor(next() * 20), outcome, 0.05 * 2 ** (next() * 18));
        }
      }
      const batch = recorder.take();
      if (batch) await db.transaction((tx) => AnalyticsRecorder.write(tx, batch));
    }
  } finally {
    Date.now = realNow;
  }
}

/** Every period asked: each day and the four together by the hour, days by the day (some without rows). */
function questions(userId: string): AnalyticsQuery[] {
  const day = (n: number) => new Date(FIRST + n * DAY).toISOString().slice(0, 10);
  const qs: AnalyticsQuery[] = [];
  for (let d = 0; d < 4; d++) qs.push({ userId, start: day(d), end: day(d), granularity: 'hour' });
  qs.push({ userId, start: day(0), end: day(3), granularity: 'hour' }, { userId, start: day(-1), end: day(5), granularity: 'hour' });
  qs.push({ userId, start: day(0), end: day(3), granularity: 'day' }, { userId, start: day(1), end: day(2), granularity: 'day' }, { userId, start: day(-3), end: day(10), granularity: 'day' });
  return qs;
}

for (const backend of backends) {
  describe(`analytics account roll-ups on ${backend.name} (C46)`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: (() => Promise<void>) | undefined;
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
      await storage.db.execute(sql`insert into users (id, email, name, password_hash, tier) values ('u1', 'u1@example.com', 'A', 'x', 'pro'), ('u2', 'u2@example.com', 'B', 'x', 'pro')`);
      await storage.db.execute(sql`insert into api_keys (id, user_id, name, prefix, key_hash, key_ciphertext, networks) values
        ('k1', 'u1', 'main', 'jk_1', 'h1', 'c1', '["ethereum"]'), ('k2', 'u1', 'second', 'jk_2', 'h2', 'c2', '["ethereum"]'), ('k4', 'u2', 'other', 'jk_4', 'h4', 'c4', '["ethereum"]')`);
      await record(storage.db);
    });
    after(async () => {
      await close?.();
    });

    test('a query without a filter reads the roll-ups and answers exactly what the series rows answer', async () => {
      const stored = rowsOf(await storage.db.execute(sql`select (select count(*) from analytics_account_hours)::int as h, (select count(*) from analytics_account_days)::int as d,
        (select count(*) from analytics_account_hours where user_id = 'ghost')::int + (select count(*) from analytics_account_day_parts where user_id = 'ghost')::int
          + (select count(*) from analytics_key_hours where user_id = 'ghost')::int as ghost,
        (select count(*) from analytics_account_day_parts where kind = 'm')::int as methods, (select count(*) from analytics_account_day_parts where kind = 'k')::int as keys`));
      assert.equal(stored[0]?.ghost, 0);
      assert.ok(Number(stored[0]?.h) > 100 && Number(stored[0]?.d) === 8, JSON.stringify(stored));
      // Per account and day a row per key (u1 with 3 keys, u2 with 1, on each of 4 days) and method (several each).
      assert.ok(Number(stored[0]?.keys) === 4 * 4 && Number(stored[0]?.methods) >= 8 * 3, JSON.stringify(stored));
      const { store, seen, prepared } = spiedStore(storage.db);
      let refusals = 0;
      for (const userId of ['u1', 'u2']) {
        for (const q of questions(userId)) {
          seen.length = 0;
          const got = await store.query(q);
          const read = seen.join('\n');
          // One statement (one round trip), the keys' names in it.
          assert.equal(seen.length, 1, `one statement for ${JSON.stringify(q)}: ${read}`);
          assert.match(read, /analytics_account_(hours|days)/, `roll-ups read for ${JSON.stringify(q)}`);
          assert.match(read, /from analytics_account_day_parts/, `breakdowns from the day parts for ${JSON.stringify(q)}`);
          // No series rows at all, nor the series path's grouping sets (the answer from the roll-ups, not the fallback).
          assert.doesNotMatch(read, /from analytics_(hours|days)\b|grouping sets/, `series path not taken for ${JSON.stringify(q)}`);
          assert.deepEqual(got, await store.querySeries(q), JSON.stringify(q));
          refusals += got.series.reduce((n, s) => n + Object.values(s.refused).reduce((a, b) => a + b, 0), 0);
          if (q.start === '2026-03-01' && q.end === '2026-03-04') {
            assert.ok(got.topMethods.length >= 3 && got.byNetwork.length === 3 && got.byKey.length >= 1, JSON.stringify(got));
            assert.ok(got.topMethods.some((m) => m.errorRate > 0 && m.p95Ms !== null));
          }
        }
      }
      assert.ok(refusals > 0);
      // The roll-up and series reads were prepared once each, by name (planned once on PostgreSQL), not at each query.
      assert.deepEqual(prepared, ['analytics_rollups_hour', 'analytics_rollups_day', 'analytics_series_hour', 'analytics_series_day', 'analytics_key_hours', 'analytics_owns_key']);
      // Deleted key k3: its rows count, without a name.
      const all = await store.query({ userId: 'u1', start: '2026-03-01', end: '2026-03-04', granularity: 'day' });
      assert.deepEqual(
        all.byKey.map((k) => [k.apiKeyId, k.name]).sort(),
        [['k1', 'main'], ['k2', 'second'], ['k3', null]],
      );
    });

    test('a query by key alone, by the hour, reads the key roll-up and the daily rows and answers exactly what the series rows answer', async () => {
      const stored = rowsOf(await storage.db.execute(sql`select user_id, key_id, count(*)::int as n from analytics_key_hours group by 1, 2 order by 1, 2`));
      // A row per key and hour with calls (k3 deleted since: its rows stay, as its series rows do).
      assert.deepEqual(stored.map((r) => `${String(r.user_id)} ${String(r.key_id)}`), ['u1 k1', 'u1 k2', 'u1 k3', 'u2 k4']);
      assert.ok(stored.every((r) => Number(r.n) > 24), JSON.stringify(stored));
      const { store, seen } = spiedStore(storage.db);
      let calls = 0;
      for (const [userId, keyId] of [['u1', 'k1'], ['u1', 'k2'], ['u1', 'k3'], ['u2', 'k4'], ['u2', 'k1']] as const) {
        for (const q of questions(userId).filter((x) => x.granularity === 'hour')) {
          const byKey: AnalyticsQuery = { ...q, keyId };
          seen.length = 0;
          const got = await store.query(byKey);
          const read = seen.join('\n');
          assert.equal(seen.length, 1, `one statement for ${JSON.stringify(byKey)}: ${read}`);
          assert.match(read, /from analytics_key_hours/, `the key roll-up read for ${JSON.stringify(byKey)}`);
          // The breakdowns from the daily rows: no hourly series row read, nor the series path's grouping sets.
          assert.doesNotMatch(read, /from analytics_hours\b|grouping sets|analytics_account_/, `series path not taken for ${JSON.stringify(byKey)}`);
          assert.deepEqual(got, await store.querySeries(byKey), JSON.stringify(byKey));
          if (got.byKey.length > 0) assert.deepEqual(got.byKey.map((k) => k.apiKeyId), [keyId]);
          calls += got.series.reduce((n, b) => n + b.requests, 0);
        }
      }
      assert.ok(calls > 0);
      // By the day, a key's query reads its series' daily rows (no hourly roll-up involved).
      seen.length = 0;
      await store.query({ userId: 'u1', start: '2026-03-01', end: '2026-03-04', granularity: 'day', keyId: 'k1' });
      assert.doesNotMatch(seen.join('\n'), /analytics_key_hours/);
    });

    test('with a key, network or method, the series rows: one prepared statement, histograms merged here, not in SQL', async () => {
      const { store, seen } = spiedStore(storage.db);
      const all = await store.query({ userId: 'u1', start: '2026-03-01', end: '2026-03-04', granularity: 'hour' });
      for (const filter of [{ keyId: 'k1' }, { network: 'polygon' }, { method: 'eth_call' }, { keyId: 'k3', method: 'eth_call' }]) {
        for (const granularity of ['hour', 'day'] as const) {
          const q: AnalyticsQuery = { userId: 'u1', start: '2026-03-01', end: '2026-03-04', granularity, ...filter };
          seen.length = 0;
          const got = await store.query(q);
          assert.equal(seen.length, 1, `one statement for ${JSON.stringify(q)}`);
          assert.doesNotMatch(seen[0] as string, /analytics_account_|get_byte|lateral/, `series rows, histograms not decoded in SQL, for ${JSON.stringify(q)}`);
          // The filter holds: only its key, network or method in the breakdowns, and its calls a part of all.
          const total = got.series.reduce((n, b) => n + b.requests, 0);
          assert.ok(total > 0 && total < all.series.reduce((n, b) => n + b.requests, 0), JSON.stringify(q));
          if ('keyId' in filter) assert.deepEqual(got.byKey.map((k) => k.apiKeyId), [filter.keyId]);
          if ('network' in filter) assert.deepEqual(got.byNetwork.map((n) => n.network), [filter.network]);
          if ('method' in filter) assert.deepEqual(got.topMethods.map((m) => m.method), [filter.method]);
          assert.equal(got.byKey.reduce((n, k) => n + k.requests, 0), total);
        }
      }
      // A filter no series passes: every bucket present, all zeros.
      const none = await store.query({ userId: 'u1', start: '2026-03-01', end: '2026-03-01', granularity: 'hour', method: 'eth_nothing' });
      assert.equal(none.series.length, 24);
      assert.ok(none.series.every((b) => b.requests === 0 && b.latencyMs.p50 === null) && none.byKey.length === 0 && none.topMethods.length === 0);
    });

    test('rows the recorder did not write (the roll-ups disagree with one another): answered from the series rows', async () => {
      // A daily row of its own for u2 on 2026-03-02, added to the day's roll-up but to no day part
      // (as a database whose parts were never backfilled would be).
      await storage.db.execute(sql`insert into analytics_series (user_id, key_id, network, method) values ('u2', 'k4', 'ethereum', 'eth_chainId')`);
      await storage.db.execute(sql`insert into analytics_days (series, day, requests, latency)
        select id, '2026-03-02', 5, decode('010305', 'hex') from analytics_series where user_id = 'u2' and method = 'eth_chainId'`);
      await storage.db.execute(sql`insert into analytics_account_days (user_id, day, requests, latency) values ('u2', '2026-03-02', 5, decode('010305', 'hex'))
        on conflict (user_id, day) do update set requests = coalesce(analytics_account_days.requests, 0) + 5`);
      const { store } = spiedStore(storage.db);
      for (const q of questions('u2')) assert.deepEqual(await store.query(q), await store.querySeries(q), JSON.stringify(q));
      const day = await store.query({ userId: 'u2', start: '2026-03-02', end: '2026-03-02', granularity: 'day' });
      assert.ok(day.topMethods.some((m) => m.method === 'eth_chainId' && m.requests === 5));
      // By key and hour: that daily row has no hours, so the key roll-up disagrees with the daily rows.
      const byKey: AnalyticsQuery = { userId: 'u2', start: '2026-03-02', end: '2026-03-02', granularity: 'hour', keyId: 'k4' };
      assert.deepEqual(await store.query(byKey), await store.querySeries(byKey));
      // A key roll-up row of its own (no series row under it): not in the answer either.
      await storage.db.execute(sql`insert into analytics_key_hours (user_id, key_id, hour, requests, latency)
        values ('u2', 'k4', ${Date.parse('2026-03-03T05:00:00Z') / HOUR}::int, 7, decode('010307', 'hex'))
        on conflict (user_id, key_id, hour) do update set requests = coalesce(analytics_key_hours.requests, 0) + 7`);
      const later: AnalyticsQuery = { ...byKey, start: '2026-03-03', end: '2026-03-03' };
      const got = await store.query(later);
      assert.deepEqual(got, await store.querySeries(later));
      const hourly = rowsOf(
        await storage.db.execute(sql`select coalesce(sum(r.requests), 0)::int as n from analytics_hours r join analytics_series s on s.id = r.series
          where s.user_id = 'u2' and s.key_id = 'k4' and r.hour >= ${Date.parse('2026-03-03T00:00:00Z') / HOUR}::int and r.hour < ${Date.parse('2026-03-04T00:00:00Z') / HOUR}::int`),
      );
      assert.equal(
        got.series.reduce((n, b) => n + b.requests, 0),
        hourly[0]?.n,
      );
    });

    test('the retention sweep deletes roll-up rows past 35 days (hourly) and 400 days (daily)', async () => {
      const { store } = spiedStore(storage.db);
      const count = async () =>
        rowsOf(
          await storage.db.execute(sql`select (select count(*) from analytics_account_hours where hour < ${Date.parse('2026-03-03T00:00:00Z') / HOUR}::int)::int as old_hours,
            (select count(*) from analytics_account_hours)::int as hours, (select count(*) from analytics_account_days)::int as days,
            (select count(*) from analytics_account_day_parts)::int as parts,
            (select count(*) from analytics_key_hours where hour < ${Date.parse('2026-03-03T00:00:00Z') / HOUR}::int)::int as old_key_hours,
            (select count(*) from analytics_key_hours)::int as key_hours`),
        )[0] as { old_hours: number; hours: number; days: number; parts: number; old_key_hours: number; key_hours: number };
      const before = await count();
      assert.ok(before.old_hours > 0 && before.old_key_hours > 0 && before.key_hours > before.old_key_hours);
      // On 2026-04-05 the oldest hourly day kept is 2026-03-02; on 2026-04-06 it is 2026-03-03.
      const kept = await store.sweep(Date.parse('2026-04-05T12:00:00Z'));
      assert.deepEqual([kept.accountDaily, kept.accountDayParts], [0, 0]);
      const out = await store.sweep(Date.parse('2026-04-06T12:00:00Z'));
      assert.deepEqual([out.accountDaily, out.accountDayParts], [0, 0]);
      const after = await count();
      assert.equal(kept.accountHourly + out.accountHourly, before.old_hours);
      assert.equal(kept.keyHourly + out.keyHourly, before.old_key_hours);
      assert.deepEqual([after.old_hours, after.hours, after.days, after.parts], [0, before.hours - before.old_hours, before.days, before.parts]);
      assert.deepEqual([after.old_key_hours, after.key_hours], [0, before.key_hours - before.old_key_hours]);
      // Over 400 days on, the daily ones go too.
      const late = await store.sweep(Date.parse('2027-05-01T12:00:00Z'));
      assert.deepEqual([late.accountDaily, late.accountDayParts], [before.days, before.parts]);
      assert.deepEqual(await count(), { old_hours: 0, hours: 0, days: 0, parts: 0, old_key_hours: 0, key_hours: 0 });
    });
  });
}
