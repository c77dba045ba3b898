import { cpuSeconds, machineBusySeconds, otherLoad } from './cpu.ts';
import { scrapeLoopDelay } from './event-loop.ts';
import type { LoadGenerator } from '../load/load.ts';
import type { Row } from '../report/table.ts';

/** What one table row pair measures. */
export interface Target {
  label: string;
  url: string;
  headers: Record<string, string>;
  /** The proxy process (with its children, e.g. nginx's worker), or null when the target is the upstream itself. */
  proxyPid: number | null;
  /** The gateway's GET /metrics: its event-loop delay during the run is read there (bench/lib/measures/event-loop.ts). */
  metricsUrl?: string;
}

export interface MeasureOptions {
  load: LoadGenerator;
  body: string;
  /** Keep-alive connections of each run, e.g. [32, 4]. */
  concurrencies: number[];
  warmupSeconds: number;
  seconds: number;
  /** The static upstream, whose CPU is reported on every row. */
  upstreamPid: number;
}

/** % of one core used outside the bench above which a run waits for quiet (and the report warns). */
export const QUIET = 25;
const QUIET_WAIT_S = 10;

/** Waits (at most QUIET_WAIT_S) for other work on the machine to calm down. */
export async function waitForQuiet(): Promise<void> {
  for (let waited = 0; waited < QUIET_WAIT_S; waited++) {
    const other = await otherLoad(1000);
    if (other < QUIET) return;
    if (waited === 0) console.log(`  (other processes use ${other.toFixed(0)}% of a core; waiting up to ${QUIET_WAIT_S} s for quiet)`);
  }
}

const ATTEMPTS = 2; // a run disturbed by other work is measured once more; the less disturbed attempt is kept

/** One measured run at `connections`, with the CPU each party used during it. */
async function once(target: Target, o: MeasureOptions, connections: number): Promise<Row> {
  const spec = { url: target.url, headers: target.headers, body: o.body, connections };
  await waitForQuiet();
  if (o.warmupSeconds > 0) await o.load.run({ ...spec, seconds: o.warmupSeconds });
  const sample = () => ({
    proxy: target.proxyPid === null ? 0 : cpuSeconds(target.proxyPid),
    upstream: cpuSeconds(o.upstreamPid),
    bench: cpuSeconds(process.pid, { reaped: true }), // everything the bench started, finished load runs included
    machine: machineBusySeconds(),
  });
  if (target.metricsUrl) await scrapeLoopDelay(target.metricsUrl); // starts the delays again
  const before = sample();
  const result = await o.load.run({ ...spec, seconds: o.seconds });
  const after = sample();
  const loop = target.metricsUrl ? await scrapeLoopDelay(target.metricsUrl) : null;
  const pct = (k: keyof typeof before) => ((after[k] - before[k]) / result.seconds) * 100;
  return {
    ...result,
    target: target.label,
    connections,
    loop,
    cpu: {
      proxy: target.proxyPid === null ? null : pct('proxy'),
      upstream: pct('upstream'),
      loadgen: pct('bench') - pct('proxy') - pct('upstream'),
      other: Math.max(0, pct('machine') - pct('bench')),
    },
  };
}

/**
 * One row per concurrency: wait for quiet, warm up (not counted), measure. A run during which
 * other processes took more than QUIET is repeated; the least disturbed attempt is kept.
 */
export async function measure(target: Target, o: MeasureOptions): Promise<Row[]> {
  const rows: Row[] = [];
  for (const connections of o.concurrencies) {
    let row = await once(target, o, connections);
    for (let attempt = 2; attempt <= ATTEMPTS && row.cpu.other >= QUIET; attempt++) {
      console.log(`  (${target.label}, ${connections} conns: other processes took ${row.cpu.other.toFixed(0)}% of a core; again, ${attempt}/${ATTEMPTS})`);
      const again = await once(target, o, connections);
      if (again.cpu.other < row.cpu.other) row = again;
    }
    rows.push(row);
    console.log(`  ${target.label}, ${connections} conns: ${row.rps.toFixed(0)} req/s, p50 ${row.p50Ms.toFixed(3)} ms, p99 ${row.p99Ms.toFixed(3)} ms, p99.9 ${row.p999Ms.toFixed(3)} ms${row.loop ? `, event loop delay p99 ${row.loop.p99Ms.toFixed(1)} ms, max ${row.loop.maxMs.toFixed(1)} ms` : ''}`);
  }
  return rows;
}
