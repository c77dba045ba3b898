import pg from 'pg';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import { openStorage } from '/work/wt/rollup/src/storage/db.ts';
import { AnalyticsStore } from '/work/wt/rollup/src/analytics/store.ts';
const base = 'postgres://root@127.0.0.1:5432';
const DB = 'rollup_prof';
const admin = new pg.Client({ connectionString: `${base}/postgres` });
await admin.connect();
if (process.argv[2] === 'seed') {
  await admin.query(`drop database if exists ${DB} with (force)`);
  await admin.query(`create database ${DB}`);
}
await admin.end();
const url = `${base}/${DB}`;
const storage = await openStorage({ databaseUrl: url });
const db = storage.db;
const NETWORKS = ['main/evm/50', 'main/evm/1', 'main/evm/137'];
const METHODS = ['eth_call', 'eth_blockNumber', 'eth_getLogs', 'eth_getBalance'];
if (process.argv[2] === 'seed') {
  await db.execute(sql.raw(`create or replace function bench_latency(counts bigint[]) returns bytea language sql immutable as $$
    select coalesce(set_byte('\\x00'::bytea, 0, max(w)) || string_agg(set_byte('\\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea order by i), ''::bytea)
    from (select i, n, case when max(n) over () < 256 then 1 when max(n) over () < 65536 then 2 when max(n) over () < 4294967296 then 4 else 8 end as w
          from (select (u.i - 1)::int as i, u.n from unnest(counts) with ordinality as u(n, i)) p where n > 0) e $$`));
  await db.execute(sql.raw(`insert into users (id, email, name, password_hash, tier) values ('b1', 'b1@x', 'b', 'x', 'pro')`));
  const combos = `from generate_series(1, 10) k, unnest(array['${NETWORKS.join("','")}']) n, unnest(array['${METHODS.join("','")}']) m`;
  await db.execute(sql.raw(`insert into analytics_series (user_id, key_id, network, method) select 'b1', 'bk' || k, n, m ${combos}`));
  const series = `(s.user_id, s.key_id, s.network, s.method) = ('b1', 'bk' || k, n, m)`;
  await db.execute(sql.raw(`insert into analytics_hours (series, hour, requests, compute_units, latency)
    select s.id, floor(extract(epoch from now()) / 3600)::int - h, 10, 100, bench_latency(array[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,5,4,0,2]) ${combos}, analytics_series s, generate_series(0, 34 * 24) h where ${series}`));
  await db.execute(sql.raw(`insert into analytics_days (series, day, requests, compute_units, latency)
    select series, day, requests, compute_units, bench_latency(array[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,n,5*n,4*n,0,2*n])
    from (select r.series, (to_timestamp(r.hour * 3600) at time zone 'UTC')::date as day, sum(r.requests) as requests, sum(r.compute_units) as compute_units, count(*) as n
          from analytics_hours r group by 1, 2) h`));
  await db.execute(sql.raw(`insert into analytics_days (series, day, requests, compute_units, latency)
    select s.id, current_date - d, 100 + d, 1000 + d, bench_latency(array[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,5,40,9,2]) ${combos}, analytics_series s, generate_series(0, 399) d where ${series} on conflict do nothing`));
  // roll-ups: re-run the migration's statements
  const fs = await import('node:fs');
  const text = fs.readFileSync('/work/wt/rollup/src/storage/migrations/0014_analytics_account_rollups.sql', 'utf8').split('--> statement-breakpoint').map((x) => x.trim());
  for (const st of text.filter((x) => x.includes('pg_temp')) ) {
    if (st.startsWith('DROP')) continue;
    await db.execute(sql.raw(st.replace(/^--.*\n/gm, '')));
  }
  await db.execute(sql.raw('analyze'));
}
const store = new AnalyticsStore({ db, logger: pino({ level: 'silent' }) });
const day = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);
for (const [label, q] of [
  ['hourly 7d', { userId: 'b1', start: day(9), end: day(3), granularity: 'hour' }],
  ['daily 30d', { userId: 'b1', start: day(40), end: day(11), granularity: 'day' }],
] as const) {
  for (const f of ['query', 'querySeries'] as const) {
    const ts: number[] = [];
    for (let i = 0; i < 30; i++) { const t = performance.now(); await store[f](q as never); ts.push(performance.now() - t); }
    ts.sort((a, b) => a - b);
    console.log(label, f, 'min', ts[0]!.toFixed(1), 'median', ts[15]!.toFixed(1));
  }
  const a = await store.query(q as never); const b = await store.querySeries(q as never);
  console.log('identical', JSON.stringify(a) === JSON.stringify(b));
}
await storage.close();
