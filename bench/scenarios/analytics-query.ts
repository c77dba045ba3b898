// What one cold `GET /usage/analytics` query costs in storage, in process, with and
// without the account roll-ups (C46): AnalyticsStore.query (roll-ups, no filter) against
// querySeries (the series rows alone: what a question with a key, network or method reads), and a
// question with one key, one at a time, on a PostgreSQL database of its own holding one account of
// bench:scale's shape (10 keys x 3 networks x 4 methods, 35 days by the hour, 400 by the day, the
// days the sums of their hours), seeded in SQL and rolled up by migration 0014's own statements.
// Also checks that both paths answer the same.
//
//   npm run bench -- analytics-query [--runs 40] [--base postgres://root@127.0.0.1:5432]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import pino from 'pino';
import { type AnalyticsQuery, AnalyticsStore } from '../../src/analytics/store.ts';
import { openStorage } from '../../src/storage/db.ts';

import { record } from '../lib/report/results.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';

const OPTIONS = {
  runs: { type: 'string', default: '40', help: 'queries of each kind per question' },
  base: { type: 'string', default: process.env.BENCH_PG ?? 'postgres://root@127.0.0.1:5432', help: 'PostgreSQL server (a database of its own is made and dropped)' },
} as const;
let args: Values<typeof OPTIONS>;
let RUNS = 40;
const DB = `bench_analytics_query_${process.pid}`;

export default defineScenario({
  summary: 'C46: one cold GET /usage/analytics in storage, roll-ups against series rows, on PostgreSQL',
  options: OPTIONS,
  run: async (ctx) => {
    args = ctx.opt;
    RUNS = Number(args.runs);
    await main();
  },
});
// The roll-ups' backfills: 0014 (per account and hour or day), 0016 (per account, day and key,
// network or method) and 0017 (per account, key and hour). Without 0016's (or 0017's for one key by
// the hour), `query` finds the roll-ups disagreeing with the daily rows and answers from the series
// rows: the bench would time that fallback under the roll-ups' name.
const MIGRATIONS = ['0014_analytics_account_rollups.sql', '0016_analytics_account_day_parts.sql', '0017_analytics_key_hours.sql'].map((f) =>
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/storage/migrations', f),
);

async function admin(text: string): Promise<void> {
  const c = new pg.Client({ connectionString: `${args.base}/postgres` });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

async function main(): Promise<void> {
await admin(`create database ${DB}`);
const storage = await openStorage({ databaseUrl: `${args.base}/${DB}` });
try {
  const run = (text: string) => storage.db.execute(sql.raw(text));
  await run(`create function pg_temp.bench_latency(counts bigint[]) returns bytea language sql immutable as $$
    select coalesce(set_byte('\\x00'::bytea, 0, max(w)) || string_agg(set_byte('\\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea order by i), ''::bytea)
    from (select i, n, case when max(n) over () < 256 then 1 when max(n) over () < 65536 then 2 when max(n) over () < 4294967296 then 4 else 8 end as w
          from (select (u.i - 1)::int as i, u.n from unnest(counts) with ordinality as u(n, i)) p where n > 0) e $$`);
  await run(`insert into users (id, email, name, password_hash, tier) values ('b1', 'b1@bench.test', 'b', 'x', 'pro')`);
  await run(`insert into analytics_series (user_id, key_id, network, method) select 'b1', 'bk' || k, n, m
    from generate_series(1, 10) k, unnest(array['main/evm/50', 'main/evm/1', 'main/evm/137']) n, unnest(array['eth_call', 'eth_blockNumber', 'eth_getLogs', 'eth_getBalance']) m`);
  const h = (ns: string) => `array[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,${ns}]`;
  await run(`insert into analytics_hours (series, hour, requests, compute_units, latency)
    select id, floor(extract(epoch from now()) / 3600)::int - h, 10, 100, pg_temp.bench_latency(${h('1,5,4,0,2')}) from analytics_series, generate_series(0, 34 * 24) h`);
  await run(`insert into analytics_days (series, day, requests, compute_units, latency)
    select series, day, requests, compute_units, pg_temp.bench_latency(${h('n,5*n,4*n,0,2*n')})
    from (select series, (to_timestamp(hour * 3600) at time zone 'UTC')::date as day, sum(requests) as requests, sum(compute_units) as compute_units, count(*) as n
          from analytics_hours group by 1, 2) s`);
  await run(`insert into analytics_days (series, day, requests, compute_units, latency)
    select id, current_date - d, 100 + d, 1000 + d, pg_temp.bench_latency(${h('1,5,40,9,2')}) from analytics_series, generate_series(0, 399) d on conflict do nothing`);
  // The roll-ups as the migration backfills them: its own statements (pg_temp: one connection, so in a transaction).
  for (const file of MIGRATIONS) {
    const statements = readFileSync(file, 'utf8').split('--> statement-breakpoint').map((s) => s.replace(/^--.*$/gm, '').trim());
    await storage.db.transaction(async (tx) => {
      for (const s of statements.filter((x) => x.includes('pg_temp.analytics_buckets') || x.startsWith('CREATE FUNCTION') || x.startsWith('DROP FUNCTION'))) await tx.execute(sql.raw(s));
    });
  }
  const parts: unknown = await storage.db.execute(sql`select count(*)::int as n from analytics_account_day_parts`);
  if (!((parts as { rows: Array<{ n: number }> }).rows[0]!.n > 0)) throw new Error('the day parts roll-up was not backfilled: query() would fall back to the series rows');
  await run('analyze');

  const store = new AnalyticsStore({ db: storage.db, logger: pino({ level: 'silent' }) });
  const day = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);
  const ms = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!.toFixed(1);
  const questions: Array<[string, AnalyticsQuery]> = [
    ['7 days hourly', { userId: 'b1', start: day(9), end: day(3), granularity: 'hour' }],
    ['30 days daily', { userId: 'b1', start: day(40), end: day(11), granularity: 'day' }],
    ['366 days daily', { userId: 'b1', start: day(366), end: day(1), granularity: 'day' }],
  ];
  for (const [label, q] of questions) {
    // What a filtered question reads: one key's series (12 of the 120), from the key's hourly
    // roll-up by the hour (else from the series rows, as `querySeries` always does).
    const oneKey = { ...q, keyId: 'bk1' };
    if (JSON.stringify(await store.query(q)) !== JSON.stringify(await store.querySeries(q))) throw new Error(`${label}: the two paths answer differently`);
    if (JSON.stringify(await store.query(oneKey)) !== JSON.stringify(await store.querySeries(oneKey))) throw new Error(`${label}, one key: the two paths answer differently`);
    const times = { query: [] as number[], querySeries: [] as number[], oneKey: [] as number[], oneKeySeries: [] as number[] };
    // This process's CPU (user + system) per query: the gateway's share (building the SQL, the
    // driver's parsing, the answer), PostgreSQL's being another process's.
    const cpu = { query: 0, querySeries: 0, oneKey: 0, oneKeySeries: 0 };
    // The longest this thread was held while a path's queries ran (a 1 ms timer's worst lateness):
    // what an RPC answer on the same thread would have waited for at most.
    const held = { query: 0, querySeries: 0, oneKey: 0, oneKeySeries: 0 };
    for (let i = 0; i < RUNS; i++) {
      for (const f of ['query', 'querySeries', 'oneKey', 'oneKeySeries'] as const) {
        const c = process.cpuUsage();
        const loop = monitorEventLoopDelay({ resolution: 1 });
        loop.enable();
        const t = performance.now();
        await (f === 'oneKey' ? store.query(oneKey) : f === 'oneKeySeries' ? store.querySeries(oneKey) : store[f](q));
        times[f].push(performance.now() - t);
        loop.disable();
        held[f] = Math.max(held[f], loop.max / 1e6);
        const d = process.cpuUsage(c);
        cpu[f] += (d.user + d.system) / 1000;
      }
    }
    const each = (f: keyof typeof cpu) => `${(cpu[f] / RUNS).toFixed(2)} ms CPU here, loop held <= ${held[f].toFixed(1)} ms`;
    record('one query, cold', label, {
      rollups_ms: times.query,
      series_rows_ms: times.querySeries,
      one_key_ms: times.oneKey,
      one_key_series_rows_ms: times.oneKeySeries,
      rollups_cpu_ms: { unit: 'ms', better: 'lower', value: cpu.query / RUNS },
      series_rows_cpu_ms: { unit: 'ms', better: 'lower', value: cpu.querySeries / RUNS },
    });
    process.stdout.write(
      `${label.padEnd(15)} roll-ups: p50 ${ms(times.query, 0.5)} ms, min ${ms(times.query, 0)} ms, ${each('query')};  series rows: p50 ${ms(times.querySeries, 0.5)} ms, min ${ms(times.querySeries, 0)} ms, ${each('querySeries')};  one key: p50 ${ms(times.oneKey, 0.5)} ms, ${each('oneKey')}, from its series rows p50 ${ms(times.oneKeySeries, 0.5)} ms, ${each('oneKeySeries')}  (same answers)\n`,
    );
  }
} finally {
  await storage.close();
  await admin(`drop database if exists ${DB} with (force)`);
}
}
