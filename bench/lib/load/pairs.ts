import { cpuSeconds, machineBusySeconds, mainThreadWaitSeconds } from '../measures/cpu.ts';
import { type LoopDelay, scrapeLoopDelay } from '../measures/event-loop.ts';
import type { LoadGenerator, OpenLoopFigures } from './load.ts';
import { QUIET, waitForQuiet } from '../measures/measure.ts';
import { median, record } from '../report/results.ts';

// Interleaved comparisons: the targets of a comparison run side by side (an idle one costs
// nothing) and take turns under load, round after round, each round in an order of its own
// (`roundOrders`). A machine whose load drifts during the bench (other work starting, caches
// warming, CPU frequency) then disturbs both sides of every round alike, and the median of the
// rounds' ratios says what one long run after another cannot: whether two targets differ by a few
// per cent. Where a target runs in the round, and after which other, counts on this host: with
// the order reversed every other round (A B C, C B A) a gateway read 0.927x its identical twin,
// the twin running last and so twice in a row at each round's end; with the order turned by one
// each round (A B C, B C A), where the twin always ran right after it, 1.07x and 1.13x. So the
// order is shuffled each round (the same shuffles every run), never with a target twice in a
// row: no place and no neighbour belongs to one target.

export interface PairTarget {
  label: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  pid: number;
  /** A gateway's GET /metrics: its event-loop delay in each round (bench/lib/measures/event-loop.ts). */
  metricsUrl?: string;
}

export interface Comparison {
  /** What is compared, e.g. "analytics on vs off". */
  name: string;
  a: string;
  b: string;
  /** Goal for the median of a/b in throughput, e.g. { min: 0.97 }. */
  goal?: { min: number; text: string };
  /** Also compare the tail, a's p99 at most this multiple of b's (median of the rounds). */
  p99Max?: number;
}

interface Sample {
  rps: number;
  /** The target's CPU per request, in microseconds. */
  cpuUs: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  loop: LoopDelay | null;
  /** A gateway's young-generation collections per 1,000 requests of the run (NaN for other targets). */
  scavengesPer1k: number;
  /** A gateway's mean scavenge pause during the run, in ms (NaN for other targets, or a run without one). */
  scavengePauseMs: number;
  /** Open loop (`rate`): the generator's own figures. */
  open?: OpenLoopFigures;
  /** CPU used outside the bench during the run, in % of one core. */
  otherPct: number;
  /** Milliseconds per second the target's main thread was runnable but not running (waiting for a core). */
  waitMsPerS: number;
}

export interface PairOptions {
  load: LoadGenerator;
  connections: number;
  rounds: number;
  warmupSeconds: number;
  seconds: number;
  /** Open loop: every target at this many requests per second (the load generator must be bench/lib/load/load-open.ts). */
  rate?: number;
}


async function sample(t: PairTarget, o: PairOptions): Promise<Sample> {
  const spec = { url: t.url, headers: t.headers, body: t.body, connections: o.connections, ...(o.rate ? { rate: o.rate } : {}) };
  if (o.rate) await waitForQuiet(); // a tail is what other work disturbs most
  if (o.warmupSeconds > 0) await o.load.run({ ...spec, seconds: o.warmupSeconds });
  const start = t.metricsUrl ? await scrapeLoopDelay(t.metricsUrl) : null; // starts the delays again
  const before = { target: cpuSeconds(t.pid), bench: cpuSeconds(process.pid, { reaped: true }), machine: machineBusySeconds(), wait: mainThreadWaitSeconds(t.pid) };
  const r = await o.load.run({ ...spec, seconds: o.seconds });
  const used = cpuSeconds(t.pid) - before.target;
  const waitMsPerS = ((mainThreadWaitSeconds(t.pid) - before.wait) * 1000) / r.seconds;
  const bench = cpuSeconds(process.pid, { reaped: true }) - before.bench;
  const otherPct = (Math.max(0, machineBusySeconds() - before.machine - bench) / r.seconds) * 100;
  const loop = t.metricsUrl ? await scrapeLoopDelay(t.metricsUrl) : null;
  if (r.errors > 0 || r.non2xx > 0) throw new Error(`${t.label}: ${r.errors} errors and ${r.non2xx} non-2xx answers during an interleaved round`);
  const scavengesPer1k = loop && start ? ((loop.scavenges - start.scavenges) * 1000) / Math.max(1, r.requests) : Number.NaN;
  const scavengePauseMs = loop && start && loop.scavenges > start.scavenges ? ((loop.scavengeSeconds - start.scavengeSeconds) * 1000) / (loop.scavenges - start.scavenges) : Number.NaN;
  return { rps: r.rps, cpuUs: (used * 1e6) / Math.max(1, r.requests), p50Ms: r.p50Ms, p99Ms: r.p99Ms, p999Ms: r.p999Ms, loop, scavengesPer1k, scavengePauseMs, otherPct, waitMsPerS, ...(r.open ? { open: r.open } : {}) };
}

/**
 * The order of each of `rounds` rounds: the targets shuffled anew each round by a seeded generator
 * (the same orders every run), the first never the one that ran last in the round before (two
 * targets keep one order: the other would run one of them twice in a row).
 */
export function roundOrders<T>(targets: readonly T[], rounds: number): T[][] {
  let seed = 0x5eed;
  // mulberry32: small, and plenty for shuffling a handful of targets.
  const random = (): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const orders: T[][] = [];
  for (let round = 0; round < rounds; round++) {
    const last = orders.at(-1)?.at(-1);
    let order: T[];
    do {
      order = [...targets];
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j] as T, order[i] as T];
      }
    } while (targets.length > 1 && order[0] === last);
    orders.push(order);
  }
  return orders;
}

/** Every target once a round, in {@link roundOrders}; the samples by target. */
async function rounds(targets: PairTarget[], o: PairOptions): Promise<Map<string, Sample[]>> {
  const samples = new Map<string, Sample[]>(targets.map((t) => [t.label, []]));
  const orders = roundOrders(targets, o.rounds);
  for (let round = 0; round < o.rounds; round++) {
    const order = orders[round] as PairTarget[];
    for (const t of order) samples.get(t.label)?.push(await sample(t, o));
    const figure = (s: Sample | undefined) => (o.rate ? `p99 ${s?.p99Ms.toFixed(2)} ms` : `${Math.round(s?.rps ?? 0)} req/s`);
    console.log(`  ${o.rate ? 'open-loop' : 'interleaved'} round ${round + 1}/${o.rounds}: ${order.map((t) => `${t.label} ${figure(samples.get(t.label)?.at(-1))}`).join(', ')}`);
  }
  return samples;
}

/** Every target's figures in each round, and each comparison's ratio in each round, into the run's JSON. */
function recordRounds(section: string, samples: Map<string, Sample[]>, comparisons: Comparison[]): void {
  for (const [label, s] of samples) {
    record(section, label, {
      rps: s.map((x) => x.rps),
      cpu_per_request_us: s.map((x) => x.cpuUs),
      p50_ms: s.map((x) => x.p50Ms),
      p99_ms: s.map((x) => x.p99Ms),
      p999_ms: s.map((x) => x.p999Ms),
      loop_p99_ms: s.every((x) => x.loop) ? s.map((x) => x.loop?.p99Ms ?? 0) : null,
      scavenges_per_1k_requests: s.every((x) => Number.isFinite(x.scavengesPer1k)) ? { unit: 'per 1k', better: 'lower', value: s.map((x) => x.scavengesPer1k) } : null,
      scavenge_pause_ms: s.every((x) => Number.isFinite(x.scavengePauseMs)) ? s.map((x) => x.scavengePauseMs) : null,
      other_pct: s.map((x) => x.otherPct),
      late_sends: s.every((x) => x.open) ? { unit: 'requests', better: 'lower', value: s.map((x) => x.open?.lateSends ?? 0) } : null,
      send_delay_p99_ms: s.every((x) => x.open) ? s.map((x) => x.open?.sendDelayP99Ms ?? 0) : null,
    });
  }
  for (const c of comparisons) {
    const a = samples.get(c.a) ?? [];
    const b = samples.get(c.b) ?? [];
    if (a.length === 0 || a.length !== b.length) continue;
    const ratio = (f: (x: Sample) => number) => a.map((x, i) => f(x) / f(b[i] as Sample));
    record(section, c.name, {
      rps_ratio: { unit: 'x', better: 'higher', value: ratio((x) => x.rps) },
      cpu_ratio: { unit: 'x', better: 'lower', value: ratio((x) => x.cpuUs) },
      p99_ratio: { unit: 'x', better: 'lower', value: ratio((x) => x.p99Ms) },
    });
  }
}

/** The generator's own send delay (p99) at most this share of the lowest target p99: a clean open-loop run. */
const SEND_DELAY_SHARE = 0.1;

/**
 * Why an open-loop run gives no verdict (none: it is clean). A verdict only from a clean run: the
 * generator on time, and other work on the machine under QUIET in at least two runs out of three.
 * On time: late sends (over 1 ms, a share of the requests) <= 0.1%, or the generator's own delay
 * too small to shape the tail under test: its p99 (`delayP99`, the median of the runs) at most
 * SEND_DELAY_SHARE of the lowest target's p99. A stall of the whole machine delays the generator's
 * sends as it delays every target, and on a shared VM it makes more than 0.1% late whatever the
 * generator does.
 */
export function uncleanBecause(run: { late: number; delayP99: number; lowestP99: number; otherPct: readonly number[] }): string[] {
  const disturbed = run.otherPct.filter((p) => p > QUIET).length;
  return [
    ...(run.late > 0.001 && run.delayP99 > SEND_DELAY_SHARE * run.lowestP99
      ? [`${(run.late * 100).toFixed(1)}% of the requests sent late, the generator's own delay p99 ${run.delayP99.toFixed(2)} ms against the lowest p99 ${run.lowestP99.toFixed(2)} ms`]
      : []),
    ...(disturbed * 3 > run.otherPct.length ? [`other work over ${QUIET}% of a core in ${disturbed} of ${run.otherPct.length} runs`] : []),
  ];
}

const range = (xs: number[], digits = 2) => `${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)}`;

/** The event-loop delay line of a gateway's samples: the median of the rounds' p99 and the largest delay of all; its scavenges' mean pause. */
const loopText = (s: Sample[]) => {
  const loops = s.flatMap((x) => (x.loop ? [x.loop] : []));
  const pauses = s.map((x) => x.scavengePauseMs).filter(Number.isFinite);
  const pause = pauses.length ? `, scavenge pause ${median(pauses).toFixed(2)} ms (mean in a round, median)` : '';
  return loops.length ? `, event loop delay p99 ${median(loops.map((l) => l.p99Ms)).toFixed(1)} ms (median), max ${Math.max(...loops.map((l) => l.maxMs)).toFixed(1)} ms (all rounds)${pause}` : '';
};

/**
 * Runs `rounds` rounds; in each, every target once, in {@link roundOrders}. Returns
 * the report lines: per comparison the median throughput ratio and CPU-per-request ratio with
 * their spread over the rounds, and the verdict against the goal.
 */
export async function interleaved(targets: PairTarget[], comparisons: Comparison[], o: PairOptions): Promise<string[]> {
  const samples = await rounds(targets, o);
  recordRounds(`interleaved, ${o.connections} connections`, samples, comparisons);
  const lines = [`interleaved, ${o.rounds} rounds of ${o.seconds} s at ${o.connections} connections (medians; the spread is the lowest and highest round):`];
  for (const t of targets) {
    const s = samples.get(t.label) ?? [];
    lines.push(
      `  ${t.label}: ${Math.round(median(s.map((x) => x.rps)))} req/s, ${median(s.map((x) => x.cpuUs)).toFixed(1)} µs CPU per request, ` +
        `p99 ${median(s.map((x) => x.p99Ms)).toFixed(2)} ms, p99.9 ${median(s.map((x) => x.p999Ms)).toFixed(2)} ms${loopText(s)}`,
    );
  }
  for (const c of comparisons) {
    const a = samples.get(c.a) ?? [];
    const b = samples.get(c.b) ?? [];
    if (a.length === 0 || a.length !== b.length) continue;
    const rps = a.map((x, i) => x.rps / (b[i] as Sample).rps);
    const cpu = a.map((x, i) => x.cpuUs / (b[i] as Sample).cpuUs);
    const m = median(rps);
    const spread = range(rps);
    const verdict = c.goal ? ` (${c.goal.text}): ${m >= c.goal.min ? 'OK' : 'BELOW'}` : '';
    lines.push(`  ${c.name}: ${m.toFixed(3)}x the throughput [rounds ${spread}], ${median(cpu).toFixed(3)}x the CPU per request${verdict}`);
    if (c.p99Max !== undefined) {
      const p99 = a.map((x, i) => x.p99Ms / (b[i] as Sample).p99Ms);
      const p999 = a.map((x, i) => x.p999Ms / (b[i] as Sample).p999Ms);
      const t = median(p99);
      lines.push(
        `    tail: p99 ${t.toFixed(2)}x [rounds ${range(p99)}], p99.9 ${median(p999).toFixed(2)}x ` +
          `(goal: p99 <= ${c.p99Max}x): ${t <= c.p99Max ? 'OK' : 'ABOVE'}`,
      );
    }
  }
  return lines;
}

/**
 * The tail at equal load: every target at the same offered rate (open loop, bench/lib/load/load-open.ts),
 * in interleaved rounds. Per target the medians of the rounds' percentiles (latency counted from
 * each request's scheduled send time) with their spread, and per comparison the median of the
 * rounds' p99 ratios against the goal (`p99Max`).
 */
export async function openLoopTail(targets: PairTarget[], comparisons: Comparison[], o: PairOptions & { rate: number }): Promise<string[]> {
  const samples = await rounds(targets, o);
  recordRounds(`open loop, ${o.rate} req/s`, samples, comparisons);
  const all = [...samples.values()].flat();
  const lines = [
    `open loop, ${o.rounds} rounds of ${o.seconds} s at ${o.rate} req/s offered over ${o.connections} connections ` +
      '(latency from each request\'s scheduled send time; medians of the rounds [lowest-highest round]):',
  ];
  for (const t of targets) {
    const s = samples.get(t.label) ?? [];
    const of = (f: (x: Sample) => number) => s.map(f);
    lines.push(
      `  ${t.label}: p50 ${median(of((x) => x.p50Ms)).toFixed(2)} ms, p99 ${median(of((x) => x.p99Ms)).toFixed(2)} ms [${range(of((x) => x.p99Ms))}], ` +
        `p99.9 ${median(of((x) => x.p999Ms)).toFixed(2)} ms [${range(of((x) => x.p999Ms))}], max ${Math.max(...of((x) => x.open?.maxMs ?? 0)).toFixed(1)} ms (all rounds), ` +
        `${Math.round(median(of((x) => x.rps)))} req/s achieved, ${median(of((x) => x.cpuUs)).toFixed(1)} µs CPU per request${loopText(s)}, ` +
        `main thread waiting for a core ${median(of((x) => x.waitMsPerS)).toFixed(0)} ms per second (median)`,
    );
  }
  const sum = (f: (x: Sample) => number) => all.reduce((n, x) => n + f(x), 0);
  const late = sum((x) => x.open?.lateSends ?? 0) / Math.max(1, sum((x) => x.rps * o.seconds));
  const delayP99 = median(all.map((x) => x.open?.sendDelayP99Ms ?? 0));
  const lowestP99 = Math.min(...targets.map((t) => median((samples.get(t.label) ?? []).map((x) => x.p99Ms))));
  const unclean = uncleanBecause({ late, delayP99, lowestP99, otherPct: all.map((x) => x.otherPct) });
  lines.push(
    `  load generator: ${sum((x) => x.open?.lateSends ?? 0)} requests sent > 1 ms late with a connection free, its own delay p99 ${delayP99.toFixed(2)} ms ` +
      `(median of the runs; ${((delayP99 / lowestP99) * 100).toFixed(0)}% of the lowest target p99, clean at <= ${SEND_DELAY_SHARE * 100}%), ` +
      `${sum((x) => x.open?.waited ?? 0)} found every connection busy (the target behind; counted in the latency), ` +
      `${median(all.map((x) => x.open?.cpuPct ?? 0)).toFixed(0)}% of a core (median); other work on the machine: ${median(all.map((x) => x.otherPct)).toFixed(0)}% of a core (median) [${range(all.map((x) => x.otherPct), 0)}], ` +
      `over ${QUIET}% in ${all.filter((x) => x.otherPct > QUIET).length} of ${all.length} runs`,
  );
  for (const c of comparisons) {
    const a = samples.get(c.a) ?? [];
    const b = samples.get(c.b) ?? [];
    if (a.length === 0 || a.length !== b.length) continue;
    const p99 = a.map((x, i) => x.p99Ms / (b[i] as Sample).p99Ms);
    const p999 = a.map((x, i) => x.p999Ms / (b[i] as Sample).p999Ms);
    const cpu = a.map((x, i) => x.cpuUs / (b[i] as Sample).cpuUs);
    const m = median(p99);
    const ratios = `  ${c.name}: p99 ${m.toFixed(2)}x [rounds ${range(p99)}], p99.9 ${median(p999).toFixed(2)}x [rounds ${range(p999)}], ${median(cpu).toFixed(2)}x the CPU per request`;
    // A comparison without a goal (a build against another) is its ratios only.
    if (c.p99Max === undefined) lines.push(ratios);
    else lines.push(`${ratios} (goal: p99 <= ${c.p99Max}x): ${unclean.length ? `not judged (${unclean.join(', ')}: rerun on a quiet machine)` : m <= c.p99Max ? 'OK' : 'ABOVE'}`);
  }
  return lines;
}
