// `npm run bench -- storage-loop`: what storage work costs the event loop that answers RPC
// calls, embedded PGlite on the calling thread (as before storage moved off it) against PGlite in its worker
// thread (now), in one process, taking turns. Each round runs, for --seconds, every 50 ms (one at
// a time), an upsert of --rows rows of the shape of a usage flush (one transaction) and a grouped
// read like GET /usage/stats, while a timer that should fire every millisecond records how late it fires
// (perf_hooks.monitorEventLoopDelay, resolution 1 ms). A shared machine slows both sides alike;
// the difference between them is the storage work held on the thread.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { migratedPgliteImage, openStorage, type Storage } from '../../src/storage/db.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';

const OPTIONS = {
  seconds: { type: 'string', default: '3', help: 'seconds of each side in a round' },
  rounds: { type: 'string', default: '4' },
  rows: { type: 'string', default: '500', help: 'rows per flush' },
} as const;
let ROWS = 500;

export default defineScenario({
  summary: 'event-loop delay of storage work, PGlite on the calling thread against PGlite in its worker, interleaved',
  options: OPTIONS,
  duration: { option: 'seconds', unit: 's' },
  run: ({ opt }) => main(opt),
});

async function prepare(s: Storage): Promise<void> {
  await s.db.execute(sql`create table bench_usage (user_id text, key_id text, network text, method text, day date, requests bigint, compute_units bigint, primary key (user_id, key_id, day, network, method))`);
}

/** One flush of ROWS rows (an upsert in a transaction, as the usage flush writes) and one grouped read. */
async function flushAndRead(s: Storage, day: string): Promise<void> {
  const values = Array.from({ length: ROWS }, (_, i) => sql`(${`user-${i % 50}`}::text, ${`key-${i % 200}`}::text, ${'ethereum'}::text, ${`eth_method_${i}`}::text, ${day}::date, ${1}::bigint, ${10}::bigint)`);
  await s.db.transaction(async (tx) => {
    await tx.execute(sql`
      insert into bench_usage (user_id, key_id, network, method, day, requests, compute_units)
      select * from (values ${sql.join(values, sql`, `)}) as v(user_id, key_id, network, method, day, requests, compute_units)
      on conflict (user_id, key_id, day, network, method) do update set requests = bench_usage.requests + excluded.requests, compute_units = bench_usage.compute_units + excluded.compute_units`);
  });
  await s.db.execute(sql`select day, method, sum(requests)::bigint as requests, sum(compute_units)::bigint as cu from bench_usage group by day, method order by day, method`);
}

async function round(s: Storage, seconds: number): Promise<{ ops: number; p99Ms: number; maxMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let ops = 0;
  let busy = false;
  // As the usage flush runs: on a timer (here every 50 ms), never two at once; the loop is free in between.
  const job = setInterval(() => {
    if (busy) return;
    busy = true;
    void flushAndRead(s, `2026-01-${String(1 + (ops % 28)).padStart(2, '0')}`).then(() => {
      ops++;
      busy = false;
    });
  }, 50);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  clearInterval(job);
  while (busy) await new Promise((r) => setTimeout(r, 5));
  h.disable();
  // Each sample is the 1 ms interval plus the delay: the interval is taken off.
  return { ops, p99Ms: Math.max(0, h.percentile(99) / 1e6 - 1), maxMs: Math.max(0, h.max / 1e6 - 1) };
}

async function main(opt: Values<typeof OPTIONS>): Promise<void> {
ROWS = Number(opt.rows);
const image = await migratedPgliteImage();
const sides = { 'calling thread (before)': await openStorage({ dataDir: 'memory', pgliteImage: image, embeddedThread: 'main' }), 'worker thread (now)': await openStorage({ dataDir: 'memory', pgliteImage: image }) };
for (const s of Object.values(sides)) await prepare(s);
const results = new Map<string, Array<{ ops: number; p99Ms: number; maxMs: number }>>(Object.keys(sides).map((k) => [k, []]));
const seconds = Number(opt.seconds);
for (let r = 0; r < Number(opt.rounds); r++) {
  const order = r % 2 === 0 ? Object.entries(sides) : Object.entries(sides).reverse();
  for (const [label, s] of order) results.get(label)?.push(await round(s, seconds));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
console.log(`${opt.rounds} rounds of ${seconds} s each: a flush of ${ROWS} rows (upsert, one transaction) then a grouped read, every 50 ms`);
for (const [label, rs] of results) {
  record(`every 50 ms, ${ROWS} rows`, `PGlite on the ${label}`, { flush_read_per_s: rs.map((x) => x.ops / seconds), loop_p99_ms: rs.map((x) => x.p99Ms), loop_max_ms: rs.map((x) => x.maxMs) });
  console.log(
    `  PGlite on the ${label}: ${median(rs.map((x) => (x.ops / seconds))).toFixed(1)} flush+read/s; event loop delay p99 ${median(rs.map((x) => x.p99Ms)).toFixed(1)} ms (median of rounds), max ${Math.max(...rs.map((x) => x.maxMs)).toFixed(1)} ms`,
  );
}
for (const s of Object.values(sides)) await s.close();
}
