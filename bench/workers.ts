// `npx tsx bench/workers.ts`: requests/s and CPU per request of the gateway with WORKERS=1 (one
// process) and WORKERS=2 (a primary and two workers, C56), forwarding eth_blockNumber to a static
// upstream over keep-alive connections; with no limits (enterprise key) and with limits checked
// on every call (in-process: in the primary, one IPC round trip per call). CPU is the whole
// process tree's (primary, workers, storage thread); docs/scaling.md "Workers" reads the figures.
// `--ipc`: the primary's side alone: CPU per limiter round trip over node:cluster's channel (the
// part of a limited call that does not scale with workers), with 1, 2 and 4 workers asking at once.
import cluster from 'node:cluster';
import { cpuUsage } from 'node:process';
import { parseArgs } from 'node:util';
import { MemoryLimiter } from '../src/metering/limiter.ts';
import { serveSharedLimiter, SharedLimiter } from '../src/metering/shared-limiter.ts';
import { IpcChannel, type IpcEndpoint } from '../src/storage/ipc.ts';
import { cleanup, cleanupOnSignals, startScript, stopChild, tempDir } from './lib/children.ts';
import { cpuSeconds, machineBusySeconds } from './lib/measures/cpu.ts';
import { LIMITS, NO_CACHE, startGateway } from './lib/targets/gateway.ts';
import { pickLoadGenerator } from './lib/load/load.ts';
import { machineLine } from './lib/report/table.ts';
import { seedDataDir } from '../test/support/process.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../scripts/build.mjs';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
// Limits on, never reached: every call runs the per-minute windows and the counters.
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };

const IPC_CALLS = 50_000;

/** A worker of `--ipc`: IPC_CALLS consumes, 32 at a time, as a worker's limited calls make them. */
async function ipcWorker(): Promise<void> {
  const limiter = new SharedLimiter(new IpcChannel(process as unknown as IpcEndpoint));
  const checks = [
    { kind: 'window' as const, key: `k:${process.pid}`, shard: 'u', limit: 1e9, windowMs: 60_000, cost: 1 },
    { kind: 'counter' as const, key: `d:${process.pid}`, shard: 'u', limit: 1e9, resetAt: Date.now() + 86_400_000, cost: 1 },
  ];
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next++ < IPC_CALLS) await limiter.consume(checks);
    }),
  );
  process.exit(0);
}

/** `--ipc`: the primary's CPU per limiter round trip, with `n` workers asking at once. */
async function ipcPrimary(n: number): Promise<string> {
  const limiter = new MemoryLimiter();
  cluster.setupPrimary({ serialization: 'advanced' });
  const started = performance.now();
  const cpu0 = cpuUsage();
  await Promise.all(
    Array.from({ length: n }, () => {
      const w = cluster.fork({ WORKERS_BENCH_IPC: '1' });
      serveSharedLimiter(new IpcChannel(w), limiter);
      return new Promise((resolve) => w.once('exit', resolve));
    }),
  );
  const cpu = cpuUsage(cpu0);
  const seconds = (performance.now() - started) / 1000;
  const calls = n * IPC_CALLS;
  return `${String(n).padStart(2)} workers: ${Math.round(calls / seconds).toString().padStart(7)} round trips/s, primary CPU ${(((cpu.user + cpu.system) / calls)).toFixed(1)} µs per round trip (${((cpu.user + cpu.system) / 1e6 / seconds).toFixed(2)} cores)`;
}

if (cluster.isWorker && process.env.WORKERS_BENCH_IPC === '1') {
  await ipcWorker();
}

const { values: opt } = parseArgs({
  options: {
    ipc: { type: 'boolean', default: false },
    seconds: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    workers: { type: 'string', default: '1,2' },
    loadgen: { type: 'string' },
  },
});

if (opt.ipc) {
  console.log(`--ipc: ${IPC_CALLS} limiter round trips per worker (a window and a counter each), 32 at a time per worker; node:cluster IPC, advanced serialization`);
  for (const n of [1, 2, 4]) console.log(await ipcPrimary(n));
  process.exit(0);
}

cleanupOnSignals();
try {
  await build();
  const load = pickLoadGenerator(opt.loadgen === 'wrk' || opt.loadgen === 'undici' ? opt.loadgen : undefined);
  const seconds = Number(opt.seconds);
  const connections = Number(opt.connections);
  console.log(machineLine(load.name));
  console.log(`each run: ${opt.warmup} s warm-up, then ${seconds} s at ${connections} keep-alive connections; POST ${BODY}\n`);
  const upstream = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
  const rows: string[] = [];
  for (const limits of [false, true]) {
    for (const n of opt.workers.split(',').map(Number)) {
      const label = `WORKERS=${n}, ${limits ? 'limits in-process' : 'no limits (enterprise)'}`;
      // A migrated database copied in: a new one's initdb can outlast the start's wait on a busy machine.
      const data = tempDir('workers-data');
      await seedDataDir(data);
      const gw = await startGateway(
        { label, env: { WORKERS: String(n), DATA_DIR: data }, config: { ...NO_CACHE, ...LIMITS }, ...(limits ? { account: { tier: 'free', limits: UNREACHABLE } } : {}) },
        upstream.url,
      );
      try {
        const spec = { url: gw.rpcUrl, headers: gw.headers, body: BODY, connections };
        await load.run({ ...spec, seconds: Number(opt.warmup) });
        const pid = gw.child.pid;
        const [cpu0, busy0] = [cpuSeconds(pid), machineBusySeconds()];
        const r = await load.run({ ...spec, seconds });
        const [cpu1, busy1] = [cpuSeconds(pid), machineBusySeconds()];
        const cpuUs = ((cpu1 - cpu0) / r.requests) * 1e6;
        const line = `${label.padEnd(42)} ${Math.round(r.rps).toString().padStart(7)} req/s  ${cpuUs.toFixed(1).padStart(6)} µs CPU/req (whole tree)  ${((cpu1 - cpu0) / r.seconds).toFixed(2)} cores  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  errors ${r.errors + r.non2xx}  machine busy ${((busy1 - busy0) / r.seconds).toFixed(2)} cores`;
        console.log(line);
        rows.push(line);
      } finally {
        await stopChild(gw.child, 15_000);
      }
    }
  }
  await stopChild(upstream.child);
} finally {
  await cleanup();
}
