import { cpuSeconds } from './cpu.ts';
import { type LoopDelay, scrapeLoopDelay } from './event-loop.ts';
import type { LoadGenerator } from './load.ts';

// Interleaved comparisons: the targets of a comparison run side by side (an idle one costs
// nothing) and take turns under load, round after round, in an order that alternates (A B, then
// B A). A machine whose load drifts during the bench (other work starting, caches warming, CPU
// frequency) then disturbs both sides of every round alike, and the median of the rounds' ratios
// says what one long run after another cannot: whether two targets differ by a few per cent.

export interface PairTarget {
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  pid: number;
  /** A gateway's GET /metrics: its event-loop delay in each round (bench/event-loop.ts). */
  metricsUrl?: string;
}

export interface Comparison {
  /** What is compared, e.g. "analytics on vs off". */
  name: string;
  a: string;
  b: string;
  /** Goal for the median of a/b in throughput, e.g. { min: 0.97 }. */
  goal?: { min: number; text: string };
  /** Issue 28: also compare the tail, a's p99 at most this multiple of b's (median of the rounds). */
  p99Max?: number;
}

interface Sample {
  rps: number;
  /** The target's CPU per request, in microseconds. */
  cpuUs: number;
  p99Ms: number;
  p999Ms: number;
  loop: LoopDelay | null;
}

export interface PairOptions {
  load: LoadGenerator;
  connections: number;
  rounds: number;
  warmupSeconds: number;
  seconds: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

async function sample(t: PairTarget, o: PairOptions): Promise<Sample> {
  const spec = { url: t.url, headers: t.headers, body: t.body, connections: o.connections };
  if (o.warmupSeconds > 0) await o.load.run({ ...spec, seconds: o.warmupSeconds });
  if (t.metricsUrl) await scrapeLoopDelay(t.metricsUrl); // starts the delays again
  const before = cpuSeconds(t.pid);
  const r = await o.load.run({ ...spec, seconds: o.seconds });
  const used = cpuSeconds(t.pid) - before;
  const loop = t.metricsUrl ? await scrapeLoopDelay(t.metricsUrl) : null;
  if (r.errors > 0 || r.non2xx > 0) throw new Error(`${t.label}: ${r.errors} errors and ${r.non2xx} non-2xx answers during an interleaved round`);
  return { rps: r.rps, cpuUs: (used * 1e6) / Math.max(1, r.requests), p99Ms: r.p99Ms, p999Ms: r.p999Ms, loop };
}

/**
 * Runs `rounds` rounds; in each, every target once, the order reversed every other round. Returns
 * the report lines: per comparison the median throughput ratio and CPU-per-request ratio with
 * their spread over the rounds, and the verdict against the goal.
 */
export async function interleaved(targets: PairTarget[], comparisons: Comparison[], o: PairOptions): Promise<string[]> {
  const samples = new Map<string, Sample[]>(targets.map((t) => [t.label, []]));
  for (let round = 0; round < o.rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) samples.get(t.label)?.push(await sample(t, o));
    console.log(`  interleaved round ${round + 1}/${o.rounds}: ${order.map((t) => `${t.label} ${Math.round(samples.get(t.label)?.at(-1)?.rps ?? 0)}`).join(', ')} req/s`);
  }
  const lines = [`interleaved, ${o.rounds} rounds of ${o.seconds} s at ${o.connections} connections (medians; the spread is the lowest and highest round):`];
  for (const t of targets) {
    const s = samples.get(t.label) ?? [];
    const loops = s.flatMap((x) => (x.loop ? [x.loop] : []));
    const loop = loops.length ? `, event loop delay p99 ${median(loops.map((l) => l.p99Ms)).toFixed(1)} ms (median), max ${Math.max(...loops.map((l) => l.maxMs)).toFixed(1)} ms (all rounds)` : '';
    lines.push(
      `  ${t.label}: ${Math.round(median(s.map((x) => x.rps)))} req/s, ${median(s.map((x) => x.cpuUs)).toFixed(1)} µs CPU per request, ` +
        `p99 ${median(s.map((x) => x.p99Ms)).toFixed(2)} ms, p99.9 ${median(s.map((x) => x.p999Ms)).toFixed(2)} ms${loop}`,
    );
  }
  for (const c of comparisons) {
    const a = samples.get(c.a) ?? [];
    const b = samples.get(c.b) ?? [];
    if (a.length === 0 || a.length !== b.length) continue;
    const rps = a.map((x, i) => x.rps / (b[i] as Sample).rps);
    const cpu = a.map((x, i) => x.cpuUs / (b[i] as Sample).cpuUs);
    const m = median(rps);
    const spread = `${Math.min(...rps).toFixed(2)}-${Math.max(...rps).toFixed(2)}`;
    const verdict = c.goal ? ` (${c.goal.text}): ${m >= c.goal.min ? 'OK' : 'BELOW'}` : '';
    lines.push(`  ${c.name}: ${m.toFixed(3)}x the throughput [rounds ${spread}], ${median(cpu).toFixed(3)}x the CPU per request${verdict}`);
    if (c.p99Max !== undefined) {
      const p99 = a.map((x, i) => x.p99Ms / (b[i] as Sample).p99Ms);
      const p999 = a.map((x, i) => x.p999Ms / (b[i] as Sample).p999Ms);
      const t = median(p99);
      lines.push(
        `    tail: p99 ${t.toFixed(2)}x [rounds ${Math.min(...p99).toFixed(2)}-${Math.max(...p99).toFixed(2)}], p99.9 ${median(p999).toFixed(2)}x ` +
          `(goal: p99 <= ${c.p99Max}x): ${t <= c.p99Max ? 'OK' : 'ABOVE'}`,
      );
    }
  }
  return lines;
}
