// `npx tsx bench/workers.ts`: requests/s and CPU per request of the gateway with WORKERS=1 (one
// process) and WORKERS=2 (a primary and two workers, C56), forwarding eth_blockNumber to a static
// upstream over keep-alive connections; with no limits (enterprise key) and with limits checked
// on every call (in-process: in the primary, one IPC round trip per call). CPU is the whole
// process tree's (primary, workers, storage thread); docs/scaling.md "Workers" reads the figures.
import { parseArgs } from 'node:util';
import { cleanup, cleanupOnSignals, startScript, stopChild } from './children.ts';
import { cpuSeconds, machineBusySeconds } from './cpu.ts';
import { LIMITS, NO_CACHE, startGateway } from './gateway.ts';
import { pickLoadGenerator } from './load.ts';
import { machineLine } from './report.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../scripts/build.mjs';

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
// Limits on, never reached: every call runs the per-minute windows and the counters.
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };

const { values: opt } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    workers: { type: 'string', default: '1,2' },
    loadgen: { type: 'string' },
  },
});

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
      const gw = await startGateway(
        { label, env: { WORKERS: String(n) }, config: { ...NO_CACHE, ...LIMITS }, ...(limits ? { account: { tier: 'free', limits: UNREACHABLE } } : {}) },
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
