// `npm run bench -- flush-cost [--rows 1000,5000] [--rounds 5]`: what one usage flush (usage rows,
// keys' last use, analytics rows and their roll-ups, one transaction) costs the gateway's own thread
// on PostgreSQL (the goal: "no flush blocks an RPC answer"). Each round records --rows calls, each of
// another key, and flushes them into a fresh database; printed per round size: the CPU this
// process spent on the flush (building the statements, the driver's encoding, reading the
// answers: PostgreSQL's work is another process's) and the longest the event loop was held
// (a 1 ms timer's worst lateness), medians of the rounds after one warm-up. The database's own
// write time is in the wall time, printed beside.
//
// `--embedded`: on PGlite in memory, on this thread (embeddedThread 'main') instead of its worker:
// the CPU printed is then the whole flush's, the database's work included (what the worker thread
// spends, besides the gateway's own part; in a gateway they compete for the same cores).
// `--embedded --thread worker`: PGlite in memory on its worker thread, as the gateway runs it; the
// CPU printed is the process's (both threads), the statements kept prepared by the worker
// (src/storage/pglite-statements.ts) included.
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import pino from 'pino';
import { AnalyticsRecorder } from '../../src/analytics/recorder.ts';
import { loadConfig } from '../../src/config/load.ts';
import { openStorage } from '../../src/storage/db.ts';
import { UsageService } from '../../src/usage/service.ts';

import { record } from '../lib/report/results.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';

const OPTIONS = {
  rows: { type: 'string', default: '1000,5000', help: 'rows per flush, comma-separated' },
  rounds: { type: 'string', default: '5' },
  base: { type: 'string', default: process.env.TEST_PG ?? 'postgres://root@127.0.0.1:5432', help: 'PostgreSQL server (a database of its own is made and dropped)' },
  embedded: { type: 'boolean', default: false, help: 'PGlite in memory on this thread instead of PostgreSQL' },
  thread: { type: 'string', default: 'main', help: 'with --embedded: main (this thread) or worker (its worker thread, as the gateway runs it; the CPU is the process\'s)' },
} as const;
let opt: Values<typeof OPTIONS>;
let SIZES: number[] = [];
let ROUNDS = 5;

export default defineScenario({
  summary: 'CPU and event-loop hold of one usage flush on the gateway\'s thread, by rows per flush',
  options: OPTIONS,
  run: async (ctx) => {
    opt = ctx.opt;
    SIZES = opt.rows.split(',').map(Number);
    ROUNDS = Number(opt.rounds);
    await main();
  },
});
const METHODS = ['eth_blockNumber', 'eth_call', 'eth_getBalance', 'eth_getLogs'];
const NETWORKS = ['ethereum', 'polygon', 'base'];
const ACCOUNTS = 100;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function main(): Promise<void> {
  const name = `bench_flush_${randomBytes(4).toString('hex')}`;
  const admin = opt.embedded ? undefined : new pg.Client({ connectionString: `${opt.base}/postgres` });
  await admin?.connect();
  await admin?.query(`create database ${name}`);
  if (opt.thread !== 'main' && opt.thread !== 'worker') throw new Error(`--thread is main or worker, not ${opt.thread}`);
  const onWorker = opt.embedded && opt.thread === 'worker';
  const where = !opt.embedded ? 'PostgreSQL' : onWorker ? 'PGlite on its worker thread (the CPU: both threads)' : 'PGlite on this thread';
  const storage = await openStorage(opt.embedded ? { dataDir: 'memory', embeddedThread: onWorker ? 'worker' : 'main' } : { databaseUrl: `${opt.base}/${name}` });
  try {
    await storage.db.execute(
      sql.raw(`insert into users (id, email, name, password_hash, tier) select 'u' || g, 'u' || g || '@example.com', 'U', 'x', 'pro' from generate_series(0, ${ACCOUNTS - 1}) g`),
    );
    const config = loadConfig({ env: { LOG_LEVEL: 'silent' } });
    console.log(`one flush of N rows (each call another key: N usage rows, N last uses, N analytics rows and their roll-ups), ${where}, median of ${ROUNDS} rounds`);
    console.log(`rows   | ${onWorker ? 'process CPU    ' : 'this thread CPU'} | per 1,000 rows | event loop held (max) | wall time`);
    let key = 0;
    for (const n of SIZES) {
      const cpu: number[] = [];
      const held: number[] = [];
      const wall: number[] = [];
      for (let round = 0; round <= ROUNDS; round++) {
        const analytics = new AnalyticsRecorder(METHODS);
        const usage = new UsageService({ db: storage.db, settings: config.usage, logger: pino({ level: 'silent' }), analytics });
        for (let i = 0; i < n; i++, key++) {
          const event = { userId: `u${key % ACCOUNTS}`, keyId: `k${key}`, network: NETWORKS[key % 3] as string, method: METHODS[key % 4] as string, computeUnits: 10 };
          usage.record(event);
          analytics.call(event.userId, event.keyId, event.network, event.method, 10, 0, 0.2 + (key % 50));
        }
        const loop = monitorEventLoopDelay({ resolution: 1 });
        loop.enable();
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await usage.flush();
        const t1 = performance.now();
        const c = process.cpuUsage(c0);
        loop.disable();
        await usage.close();
        if (round === 0) continue; // warm-up
        cpu.push((c.user + c.system) / 1000);
        held.push(loop.max / 1e6 - 1);
        wall.push(t1 - t0);
      }
      const c = median(cpu);
      record(`one flush, ${where}`, `${n} rows`, { thread_cpu_ms: cpu, loop_held_max_ms: opt.embedded && !onWorker ? null : held, wall_ms: wall });
      console.log(`${String(n).padEnd(6)} | ${c.toFixed(1).padStart(12)} ms | ${((c * 1000) / n).toFixed(1).padStart(11)} ms | ${opt.embedded && !onWorker ? '(the whole flush)'.padStart(21) : `${median(held).toFixed(1).padStart(18)} ms`} | ${median(wall).toFixed(0).padStart(6)} ms`);
    }
  } finally {
    await storage.close();
    await admin?.query(`drop database if exists ${name} with (force)`);
    await admin?.end();
  }
}
