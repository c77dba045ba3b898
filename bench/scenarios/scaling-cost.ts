// `npm run bench -- scaling-cost [--calls N]`: what one call costs the shared services (docs/scaling.md).
// A redis-server of its own (a spare port) and a PostgreSQL database of its own (dropped after),
// the static upstream, and the compiled gateway (dist/, `npm run build` first) on both with a free
// account whose limits are never reached: every call runs the Redis limiter. It prints, for N
// calls sent 8 at a time: Redis commands per call (INFO commandstats, commands run inside the
// limiter's script included), redis-server CPU per call and the part of it in the limit script
// (INFO commandstats usec of EVALSHA), then PostgreSQL's transactions and
// rows written per second while idle and while under load (pg_stat_database, pg_stat_user_tables).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { cleanup, startScript, stopChild } from '../lib/children.ts';
import { record } from '../lib/report/results.ts';
import { LIMITS, NO_CACHE, startGateway } from '../lib/targets/gateway.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';

const OPTIONS = { calls: { type: 'string', default: '20000', help: 'calls per variant, 8 at a time' } } as const;

export default defineScenario({
  summary: 'what one call costs the shared services: Redis commands and CPU per call, PostgreSQL transactions and rows written',
  options: OPTIONS,
  run: ({ opt }) => main(opt),
});

async function main(opt: Values<typeof OPTIONS>): Promise<void> {
const N = Number(opt.calls);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const port = 20000 + Math.floor(Math.random() * 20000);
const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no', '--dir', mkdtempSync(path.join(os.tmpdir(), 'junction-bench-redis-'))], { stdio: 'ignore' });
await sleep(500);
const cli = (...a: string[]) => execFileSync('redis-cli', ['-p', String(port), ...a]).toString();
const commands = () => {
  const out: Record<string, number> = {};
  for (const m of cli('info', 'commandstats').matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2]);
  return out;
};
/** Microseconds Redis spent in the limiter's script (EVALSHA, or EVAL the first time), its commands included. */
const scriptUs = () => {
  let us = 0;
  for (const m of cli('info', 'commandstats').matchAll(/^cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/gm)) us += Number(m[2]);
  return us;
};
const usedMemory = () => Number(/used_memory:(\d+)/.exec(cli('info', 'memory'))?.[1]);
const redisCpu = () => {
  const t = cli('info', 'cpu');
  return Number(/used_cpu_sys:([\d.]+)/.exec(t)?.[1]) + Number(/used_cpu_user:([\d.]+)/.exec(t)?.[1]);
};
const DB = `junction_bench_scaling_${port}`;
execFileSync('createdb', ['-h', '127.0.0.1', '-U', 'root', DB]);
const psql = (q: string) => execFileSync('psql', ['-h', '127.0.0.1', '-U', 'root', '-d', DB, '-At', '-c', q]).toString().trim();
const commits = () => Number(psql('select xact_commit from pg_stat_database where datname = current_database()'));
const written = () => {
  const out: Record<string, number> = {};
  for (const line of psql('select relname, n_tup_ins + n_tup_upd + n_tup_del from pg_stat_user_tables').split('\n')) {
    const [t, n] = line.split('|');
    if (t) out[t] = Number(n);
  }
  return out;
};
const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v - (a[k] ?? 0)]).filter(([, v]) => (v as number) > 0)) as Record<string, number>;
const sum = (o: Record<string, number>) => Object.values(o).reduce((x, y) => x + y, 0);

try {
  const up = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
  const variants = [
    { label: 'pass-through eth_blockNumber', body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}', config: { ...NO_CACHE, ...LIMITS } },
    { label: 'cached eth_chainId', body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}', config: LIMITS },
  ];
  for (const v of variants) {
    const gw = await startGateway(
      {
        label: v.label,
        account: { tier: 'free', limits: { requestsPerMinute: 1e9, dailyLimit: 1e9, monthlyLimit: 1e9 } },
        config: v.config,
        env: {
          REDIS_URL: `redis://127.0.0.1:${port}`,
          DATABASE_URL: `postgres://root@127.0.0.1:5432/${DB}`,
          JWT_SECRET: randomBytes(32).toString('hex'), // C59: generated, never an example
          KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex'),
        },
      },
      up.url,
    );
    const u = new URL(gw.rpcUrl);
    const pool = new Pool(u.origin, { connections: 8 });
    const send = async () => {
      const r = await pool.request({ method: 'POST', path: u.pathname, headers: { 'content-type': 'application/json', ...gw.headers }, body: v.body });
      await r.body.text();
      if (r.statusCode !== 200) throw new Error(`answered ${r.statusCode}`);
    };
    for (let i = 0; i < 200; i++) await send();
    await sleep(3000);
    // Idle: what an instance sends to Redis and PostgreSQL with no calls.
    let c0 = commands();
    let p0 = commits();
    let w0 = written();
    await sleep(10_000);
    const idle = { redis: sum(diff(c0, commands())) / 10, commits: (commits() - p0) / 10, rows: diff(w0, written()) };
    c0 = commands();
    p0 = commits();
    w0 = written();
    const cpu0 = redisCpu();
    const script0 = scriptUs();
    const memory0 = usedMemory();
    const t0 = Date.now();
    let sent = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (sent++ < N) await send();
    }));
    const secs = (Date.now() - t0) / 1000;
    const cpu = redisCpu() - cpu0;
    const script = scriptUs() - script0;
    // Every entry of the run is still in its minute's window: what Redis holds per call of the last minute.
    const memory = usedMemory() - memory0;
    const cmds = diff(c0, commands());
    await sleep(2500); // the flush that takes the last calls
    const loadSecs = (Date.now() - t0) / 1000;
    const rows = diff(w0, written());
    record(`${N} calls, 8 at a time`, v.label, {
      rps: N / secs,
      redis_commands_per_call: { unit: 'commands', better: 'lower', value: sum(cmds) / N },
      redis_round_trips_per_call: { unit: 'EVALSHA', better: 'lower', value: (cmds.evalsha ?? 0) / N },
      redis_cpu_per_call_us: (cpu * 1e6) / N,
      redis_script_per_call_us: script / N,
      redis_memory_per_call_bytes: { unit: 'B', better: 'lower', value: memory / N },
      pg_transactions_per_s: { unit: '/s', better: 'lower', value: (commits() - p0) / loadSecs },
      pg_rows_written_per_s: { unit: '/s', better: 'lower', value: sum(rows) / loadSecs },
      pg_idle_transactions_per_s: { unit: '/s', better: 'lower', value: idle.commits },
    });
    console.log(`${v.label}: ${N} calls in ${secs.toFixed(1)} s (${Math.round(N / secs)}/s, 8 at a time)`);
    console.log(`  Redis: ${(sum(cmds) / N).toFixed(2)} commands per call, ${((cmds.evalsha ?? 0) / N).toFixed(2)} round trips (EVALSHA) per call; redis-server CPU ${((cpu * 1e6) / N).toFixed(1)} µs per call, ${(script / N).toFixed(1)} of them in the limit script; idle ${idle.redis.toFixed(1)} commands/s`);
    console.log(`  Redis commands: ${JSON.stringify(cmds)}`);
    console.log(`  PostgreSQL under load (${loadSecs.toFixed(1)} s): ${((commits() - p0) / loadSecs).toFixed(1)} transactions/s, rows written ${JSON.stringify(rows)} = ${(sum(rows) / loadSecs).toFixed(1)}/s`);
    console.log(`  PostgreSQL idle: ${idle.commits.toFixed(1)} transactions/s, rows written ${JSON.stringify(idle.rows)}`);
    console.log(`  Redis used_memory ${usedMemory()} bytes (${(memory / N).toFixed(0)} more per call of the run), ${cli('dbsize').trim()} keys`);
    await pool.close();
    await stopChild(gw.child, 10_000);
  }
} finally {
  await cleanup();
  redis.kill('SIGTERM');
  execFileSync('dropdb', ['-h', '127.0.0.1', '-U', 'root', '--force', DB]);
}
}
