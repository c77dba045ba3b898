// C46: 0012_analytics_compact.sql moves the analytics rows of a database in use to the
// compact tables (0013 drops the old ones), and GET /usage/analytics answers the same numbers after it as before;
// 0014 rolls those rows up per account and hour or day (the sums of the series rows), 0016 per
// account, day and key, network or method, 0017 per account, key and hour.
// old-answers.json holds what the code before the migration answered on OLD_ROWS (the store's
// query, which the route returns as `data`).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import pino from 'pino';
import { decodeLatency, encodeLatency, mergeInto } from '../../src/analytics/histogram.ts';
import { AnalyticsRecorder, OK } from '../../src/analytics/recorder.ts';
import { type Analytics, AnalyticsStore } from '../../src/analytics/store.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { createTestDatabase } from '../support/storage.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';
import { storageBackends } from '../support/services.ts';
import { emptyDatabase, journal, MIGRATIONS_DIR, ROOT } from '../storage/migration-support.ts';
import { OLD_ROWS, QUESTIONS } from './old-rows.ts';

const OLD_ANSWERS = JSON.parse(readFileSync(path.join(ROOT, 'test/analytics/old-answers.json'), 'utf8')) as Analytics[];
const backends = await storageBackends();
const rowsOf = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;

/** The migrations folder up to, not including, the compact analytics (0012). */
function migrationsBeforeCompact(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-migrations-analytics-'));
  cpSync(path.join(ROOT, MIGRATIONS_DIR), dir, { recursive: true });
  const entries = journal(dir);
  const cut = entries.findIndex((e) => e.tag === '0012_analytics_compact');
  assert.ok(cut > 0);
  writeFileSync(path.join(dir, 'meta/_journal.json'), JSON.stringify({ version: '7', dialect: 'postgresql', entries: entries.slice(0, cut) }));
  return dir;
}

/** A database of `backend` migrated up to 0011, with OLD_ROWS in it; `open` migrates it to the last one as the gateway does. */
async function oldDatabase(backend: string, folder: string): Promise<{ open(): Promise<Storage>; close(): Promise<void> }> {
  if (backend === 'pglite') {
    const client = new PGlite({ loadDataDir: await pgliteTemplate() });
    await emptyDatabase({ exec: async (t) => void (await client.exec(t)), rows: async (t) => (await client.query<Record<string, unknown>>(t)).rows });
    await migratePglite(drizzlePglite(client), { migrationsFolder: folder });
    await client.exec(OLD_ROWS);
    return {
      open: async () => {
        const image = await client.dumpDataDir('none');
        await client.close();
        return openStorage({ dataDir: 'memory', pgliteImage: image });
      },
      close: async () => {
        if (!client.closed) await client.close();
      },
    };
  }
  const database = await createTestDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await migratePg(drizzlePg(client), { migrationsFolder: folder });
  await client.query(OLD_ROWS);
  await client.end();
  return { open: () => openStorage({ databaseUrl: database.url }), close: () => database.drop() };
}

/**
 * The account roll-ups (0014, then the recorder) hold, per account and hour or day, the sums of the
 * series rows: counters (NULL when zero) and histograms merged, encoded as encodeLatency does; the
 * key roll-up (0017, then the recorder) the same per account, key and hour.
 */
async function assertRollups(storage: Storage, expected: { hours: number; days: number; keyHours: number }): Promise<void> {
  for (const [table, rollup, period, n, by] of [
    ['analytics_hours', 'analytics_account_hours', 'hour', expected.hours, 'user_id'],
    ['analytics_days', 'analytics_account_days', 'day', expected.days, 'user_id'],
    ['analytics_hours', 'analytics_key_hours', 'hour', expected.keyHours, "user_id || ' ' || key_id"],
  ] as const) {
    const cols = ['requests', 'compute_units', 'errors_node', 'errors_upstream', 'refused_rate', 'refused_quota', 'refused_key', 'refused_network', 'refused_method', 'refused_access'];
    const text = (from: string) => sql.raw(`${cols.map((c) => `${c}::text as ${c}`).join(', ')}, encode(latency, 'hex') as latency, ${by} as owner, ${period}::text as period from ${from}`);
    const series = rowsOf(await storage.db.execute(sql`select ${text(`${table} r join analytics_series s on s.id = r.series`)}`));
    const want = new Map<string, { counts: Array<number | null>; latency: number[] }>();
    for (const r of series) {
      const id = `${String(r.owner)} ${String(r.period)}`;
      const w = want.get(id) ?? { counts: cols.map(() => null), latency: [] };
      want.set(id, w);
      cols.forEach((c, i) => {
        if (r[c] !== null) w.counts[i] = (w.counts[i] ?? 0) + Number(r[c]);
      });
      mergeInto(w.latency, decodeLatency(String(r.latency)));
    }
    const got = rowsOf(await storage.db.execute(sql`select ${text(rollup)} order by owner, ${sql.raw(period)}`));
    assert.equal(got.length, n, rollup);
    assert.equal(got.length, want.size, rollup);
    for (const r of got) {
      const w = want.get(`${String(r.owner)} ${String(r.period)}`);
      assert.ok(w, `${rollup} ${String(r.owner)} ${String(r.period)}`);
      assert.deepEqual(
        cols.map((c) => (r[c] === null ? null : Number(r[c]))),
        w.counts.map((x) => (x === 0 ? null : x)),
        `${rollup} ${String(r.owner)} ${String(r.period)}`,
      );
      assert.equal(String(r.latency), encodeLatency(w.latency), `${rollup} ${String(r.owner)} ${String(r.period)} latency`);
    }
  }
}

/**
 * The account's daily roll-up per key, network and method (0016, then the recorder) holds the sums
 * of its daily series rows by each: counters (NULL when zero), and for networks and methods the
 * histograms merged (a key's row has none).
 */
async function assertDayParts(storage: Storage, n: number): Promise<void> {
  const cols = ['requests', 'compute_units', 'errors_node', 'errors_upstream', 'refused_rate', 'refused_quota', 'refused_key', 'refused_network', 'refused_method', 'refused_access'];
  const counters = sql.raw(cols.map((c) => `${c}::text as ${c}`).join(', '));
  const series = rowsOf(
    await storage.db.execute(sql`select ${counters}, encode(r.latency, 'hex') as latency, s.user_id, r.day::text as day, s.key_id, s.network, s.method
      from analytics_days r join analytics_series s on s.id = r.series`),
  );
  const want = new Map<string, { counts: Array<number | null>; latency: number[] }>();
  for (const r of series) {
    for (const [kind, column] of [['k', 'key_id'], ['n', 'network'], ['m', 'method']] as const) {
      const id = `${String(r.user_id)} ${String(r.day)} ${kind} ${String(r[column])}`;
      const w = want.get(id) ?? { counts: cols.map(() => null), latency: [] };
      want.set(id, w);
      cols.forEach((c, i) => {
        if (r[c] !== null) w.counts[i] = (w.counts[i] ?? 0) + Number(r[c]);
      });
      if (kind !== 'k') mergeInto(w.latency, decodeLatency(String(r.latency)));
    }
  }
  const got = rowsOf(
    await storage.db.execute(sql`select ${counters}, encode(latency, 'hex') as latency, user_id, day::text as day, kind, name from analytics_account_day_parts`),
  );
  assert.equal(got.length, n, 'analytics_account_day_parts');
  assert.equal(got.length, want.size, 'analytics_account_day_parts');
  for (const r of got) {
    const id = `${String(r.user_id)} ${String(r.day)} ${String(r.kind)} ${String(r.name)}`;
    const w = want.get(id);
    assert.ok(w, id);
    assert.deepEqual(
      cols.map((c) => (r[c] === null ? null : Number(r[c]))),
      w.counts.map((x) => (x === 0 ? null : x)),
      id,
    );
    assert.equal(String(r.latency), encodeLatency(w.latency), `${id} latency`);
  }
}

describe('analytics rows of a database in use, moved by 0012_analytics_compact and 0013 (C46)', () => {
  const folder = migrationsBeforeCompact();
  after(() => rmSync(folder, { recursive: true, force: true }));

  for (const backend of backends) {
    test(`on ${backend.name}: the same answers after the migration as before it, and later flushes add to the moved rows`, { skip: backend.skip }, async () => {
      const old = await oldDatabase(backend.name, folder);
      let storage: Storage | undefined;
      try {
        storage = await old.open();
        const store = new AnalyticsStore({ db: storage.db, logger: pino({ level: 'silent' }) });
        // The old tables are gone, every row is in the new ones.
        const tables = rowsOf(await storage.db.execute(sql`select relname from pg_class where relname like 'analytics\_%' and relkind = 'r' order by 1`));
        assert.deepEqual(tables.map((t) => t.relname), ['analytics_account_day_parts', 'analytics_account_days', 'analytics_account_hours', 'analytics_days', 'analytics_hours', 'analytics_key_hours', 'analytics_series']);
        const counts = rowsOf(await storage.db.execute(sql`select (select count(*) from analytics_hours)::int as h, (select count(*) from analytics_days)::int as d`));
        assert.deepEqual(counts, [{ h: 1038, d: 396 }]);
        // 0014 rolled the moved rows up per account and hour or day: the sums of the series rows; 0017
        // per account, key and hour (three keys, each with rows in every one of the 72 hours).
        await assertRollups(storage, { hours: 2 * 72, days: 2 * 30, keyHours: 3 * 72 });
        // 0016 rolled the daily rows up per account, day and key, network or method.
        const parts = rowsOf(await storage.db.execute(sql`select count(*)::int as n from analytics_account_day_parts`))[0]?.n as number;
        assert.ok(parts > 2 * 30, `${parts} day parts`);
        await assertDayParts(storage, parts);

        for (const [i, q] of QUESTIONS.entries()) assert.deepEqual(await store.query(q), OLD_ANSWERS[i], `question ${i}: ${JSON.stringify(q)}`);

        // A flush into a moved row adds its counts and merges its histogram (a count past 2^32 kept).
        const one = { userId: 'u1', start: '2026-01-02', end: '2026-01-02', granularity: 'day', keyId: 'k1', network: 'ethereum', method: 'eth_call' } as const;
        const before = (await store.query(one)).series[0]!;
        const recorder = new AnalyticsRecorder(['eth_call']);
        const realNow = Date.now;
        Date.now = () => Date.parse('2026-01-02T10:00:00Z');
        try {
          recorder.call('u1', 'k1', 'ethereum', 'eth_call', 10, OK, 0.105); // bucket 1
        } finally {
          Date.now = realNow;
        }
        await storage.db.transaction((tx) => AnalyticsRecorder.write(tx, recorder.take()!));
        const now = (await store.query(one)).series[0]!;
        assert.deepEqual([now.requests, now.computeUnits], [before.requests + 1, before.computeUnits + 10]);
        const stored = rowsOf(
          await storage.db.execute(sql`select encode(d.latency, 'hex') as h from analytics_days d join analytics_series s on s.id = d.series
            where s.user_id = 'u1' and s.key_id = 'k1' and s.network = 'ethereum' and s.method = 'eth_call' and d.day = '2026-01-02'`),
        );
        assert.deepEqual(decodeLatency(String(stored[0]?.h)), [0, 70_001, 0, 5_000_000_000, 3]);
        // The flush added to the backfilled roll-ups too (its hour, 2026-01-02 10:00, a new one).
        await assertRollups(storage, { hours: 2 * 72 + 1, days: 2 * 30, keyHours: 3 * 72 + 1 });
        await assertDayParts(storage, parts);
      } finally {
        await storage?.close();
        await old.close();
      }
    });
  }
});
