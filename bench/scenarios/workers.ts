// `npm run bench -- workers`: requests/s and CPU per request of the gateway with WORKERS=1 (one
// process) and WORKERS=2 (a primary and two workers, C56), forwarding eth_blockNumber to a static
// upstream over keep-alive connections; with no limits (enterprise key) and with limits checked
// on every call (in-process: in the primary, one IPC round trip per call). CPU is the whole
// process tree's (primary, workers, storage thread); docs/scaling.md "Workers" reads the figures.
// `--ipc`: the primary's side alone: CPU per limiter round trip over node:cluster's channel (the
// part of a limited call that does not scale with workers), with 1, 2 and 4 workers asking at once.
//
// The `--ipc` workers are this file forked by node:cluster (`cluster.setupPrimary({ exec })`, not
// bench/run.ts): in a worker the branch just below the imports runs and exits, before the runner
// would ever be reached.
import cluster from 'node:cluster';
import { cpuUsage } from 'node:process';
import { fileURLToPath } from 'node:url';
import { SharedLimiter, SharedLimits } from '../../src/metering/shared-limiter.ts';
import { IpcChannel, type IpcEndpoint } from '../../src/storage/ipc.ts';
import { seedDataDir } from '../../test/support/process.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { startScript, stopChild, tempDir } from '../lib/children.ts';
import { pickLoadGenerator } from '../lib/load/load.ts';
import { cpuSeconds, machineBusySeconds } from '../lib/measures/cpu.ts';
import { record } from '../lib/report/results.ts';
import { machineLine } from '../lib/report/table.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { LIMITS, NO_CACHE, startGateway } from '../lib/targets/gateway.ts';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
// Limits on, never reached: every call runs the per-minute windows and the counters.
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };

const IPC_CALLS = 50_000;
/** Set in the environment of the workers `--ipc` forks: they run `ipcWorker`, nothing else. */
const IPC_WORKER_ENV = 'WORKERS_BENCH_IPC';

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

if (cluster.isWorker && process.env[IPC_WORKER_ENV] === '1') {
  await ipcWorker();
}

const OPTIONS = {
  ipc: { type: 'boolean', default: false, help: 'the primary\'s CPU per limiter round trip over IPC, 1, 2 and 4 workers (no gateway)' },
  seconds: { type: 'string', default: '8', help: 'measured seconds per row' },
  warmup: { type: 'string', default: '2', help: 'warm-up seconds per row, not counted' },
  connections: { type: 'string', default: '32', help: 'keep-alive connections of the load generator' },
  workers: { type: 'string', default: '1,2', help: 'WORKERS values, comma-separated' },
  loadgen: { type: 'string', help: 'wrk or undici (default: wrk when installed)' },
} as const;

export default defineScenario({
  summary: 'C56: req/s and CPU per request at WORKERS=1 and 2, no limits and limits in the primary; --ipc: the primary\'s CPU per limiter round trip',
  options: OPTIONS,
  duration: { option: 'seconds', unit: 's' },
  run: ({ opt }) => (opt.ipc ? ipc() : gateways(opt)),
});

/** `--ipc`: the primary's CPU per limiter round trip, with `n` workers asking at once. */
async function ipcPrimary(n: number): Promise<void> {
  const limits = new SharedLimits();
  // The workers run this file, not bench/run.ts (the process's own script, cluster's default).
  cluster.setupPrimary({ exec: fileURLToPath(import.meta.url), serialization: 'advanced' });
  const started = performance.now();
  const cpu0 = cpuUsage();
  await Promise.all(
    Array.from({ length: n }, () => {
      const w = cluster.fork({ [IPC_WORKER_ENV]: '1' });
      limits.serve(new IpcChannel(w));
      return new Promise<void>((resolve, reject) =>
        w.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`an --ipc worker exited with ${code}`)))),
      );
    }),
  );
  const cpu = cpuUsage(cpu0);
  const seconds = (performance.now() - started) / 1000;
  const calls = n * IPC_CALLS;
  const cpuUs = (cpu.user + cpu.system) / calls;
  const cores = (cpu.user + cpu.system) / 1e6 / seconds;
  console.log(
    `${String(n).padStart(2)} workers: ${Math.round(calls / seconds).toString().padStart(7)} round trips/s, primary CPU ${cpuUs.toFixed(1)} µs per round trip (${cores.toFixed(2)} cores)`,
  );
  record('limiter round trips over IPC, primary', `${n} workers`, {
    round_trips_per_s: calls / seconds,
    primary_cpu_per_round_trip_us: cpuUs,
    primary_cores: { unit: 'cores', value: cores },
  });
}

async function ipc(): Promise<number> {
  console.log(`--ipc: ${IPC_CALLS} limiter round trips per worker (a window and a counter each), 32 at a time per worker; node:cluster IPC, advanced serialization`);
  for (const n of [1, 2, 4]) await ipcPrimary(n);
  return 0;
}

async function gateways(opt: Values<typeof OPTIONS>): Promise<number> {
  await build();
  const load = pickLoadGenerator(opt.loadgen === 'wrk' || opt.loadgen === 'undici' ? opt.loadgen : undefined);
  const seconds = Number(opt.seconds);
  const connections = Number(opt.connections);
  console.log(machineLine(load.name));
  console.log(`each run: ${opt.warmup} s warm-up, then ${seconds} s at ${connections} keep-alive connections; POST ${BODY}\n`);
  const upstream = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
  let errors = 0;
  try {
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
          const cores = (cpu1 - cpu0) / r.seconds;
          const busy = (busy1 - busy0) / r.seconds;
          console.log(
            `${label.padEnd(42)} ${Math.round(r.rps).toString().padStart(7)} req/s  ${cpuUs.toFixed(1).padStart(6)} µs CPU/req (whole tree)  ${cores.toFixed(2)} cores  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  errors ${r.errors + r.non2xx}  machine busy ${busy.toFixed(2)} cores`,
          );
          errors += r.errors + r.non2xx;
          record(`${connections} connections`, label, {
            rps: r.rps,
            cpu_per_request_us: cpuUs,
            gateway_cores: { unit: 'cores', better: 'lower', value: cores },
            p50_ms: r.p50Ms,
            p99_ms: r.p99Ms,
            errors: { unit: '', better: 'lower', value: r.errors + r.non2xx },
            machine_busy_cores: { unit: 'cores', value: busy },
          });
        } finally {
          await stopChild(gw.child, 15_000);
        }
      }
    }
  } finally {
    await stopChild(upstream.child);
  }
  return errors > 0 ? 1 : 0;
}
