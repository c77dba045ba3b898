// What the slowest requests of an open-loop run waited on, from the gateway's own traces (C58).
// The open-loop generator sends each request with a traceparent whose trace id holds its index
// (bench/lib/load/load-open.ts, `trace`) and names the slowest traced ones and a spread of ordinary ones;
// the gateway, tracing on, exports a SERVER span per request with its stages (admission, limits,
// cache) and each upstream attempt (CLIENT) to the receiver here. A request's latency is then cut
// into: the time before the gateway's span began (the request waiting to be read: queued behind
// other work on the event loop, a GC pause, the kernel), each stage, the node's answer (the
// attempts), and the rest of the handler. Only durations measured in one process are compared, so
// clocks of two processes never meet; only "before" is a difference across the two (latency from
// the generator's clock minus the span's length from the gateway's).
import type { ReceivedSpan } from '../../../test/support/otlp-receiver.ts';
import type { TracedRequest } from '../load/load.ts';

/** The parts of one request's latency, milliseconds. */
export interface WaitedOn {
  /** Before the gateway's span began: waiting to be read (event loop busy, GC, kernel, network). */
  before: number;
  /** Per stage span name (admission, limits, cache), and `node` for the upstream attempts. */
  stages: Record<string, number>;
  /** In the gateway's span but in none of its stages or attempts: parsing, routing, writing the answer. */
  rest: number;
}

export interface WaitedOnSummary {
  /** The requests asked about whose server span arrived. */
  found: number;
  asked: number;
  latencyMs: { min: number; median: number; max: number };
  /** Mean milliseconds per part over the found requests; `before`, `rest` and each stage. */
  meanMs: Record<string, number>;
  /** The same as shares of the mean latency. */
  share: Record<string, number>;
  /** Groups of requests due within `burstMs` of each other: few groups mean a few stalls held many requests. */
  bursts: number;
}

const NODE = 'node';
const BURST_MS = 20;

/** The traceparent trace id of request `index` of a run traced with `prefix`. */
export function traceIdOf(prefix: string, index: number): string {
  return `${prefix}${index.toString(16).padStart(16, '0')}`;
}

/** Cuts one request's latency by its spans, or undefined when its server span did not arrive. */
export function waitedOn(latencyMs: number, spans: ReceivedSpan[]): WaitedOn | undefined {
  const server = spans.find((s) => s.kind === 2);
  if (!server) return undefined;
  const length = server.endMs - server.startMs;
  const stages: Record<string, number> = {};
  let inStages = 0;
  for (const s of spans) {
    if (s === server || s.parentSpanId !== server.spanId) continue;
    const name = s.kind === 3 ? NODE : s.name;
    const d = Math.max(0, s.endMs - s.startMs);
    stages[name] = (stages[name] ?? 0) + d;
    inStages += d;
  }
  return { before: Math.max(0, latencyMs - length), stages, rest: Math.max(0, length - inStages) };
}

/** The parts of `requests` (each looked up by its trace id among `spansOf`), summed up. */
export function summarize(requests: TracedRequest[], spansOf: (traceId: string) => ReceivedSpan[], prefix: string): WaitedOnSummary {
  const parts: WaitedOn[] = [];
  const latencies: number[] = [];
  for (const r of requests) {
    const w = waitedOn(r.latencyMs, spansOf(traceIdOf(prefix, r.index)));
    if (!w) continue;
    parts.push(w);
    latencies.push(r.latencyMs);
  }
  const sum: Record<string, number> = { before: 0, rest: 0 };
  for (const p of parts) {
    sum.before = (sum.before as number) + p.before;
    sum.rest = (sum.rest as number) + p.rest;
    for (const [k, v] of Object.entries(p.stages)) sum[k] = (sum[k] ?? 0) + v;
  }
  const n = Math.max(1, parts.length);
  const meanLatency = latencies.reduce((a, b) => a + b, 0) / n;
  const meanMs = Object.fromEntries(Object.entries(sum).map(([k, v]) => [k, v / n]));
  const share = Object.fromEntries(Object.entries(meanMs).map(([k, v]) => [k, meanLatency > 0 ? v / meanLatency : 0]));
  const sorted = [...latencies].sort((a, b) => a - b);
  const due = requests.map((r) => r.dueMs).sort((a, b) => a - b);
  let bursts = 0;
  for (let i = 0; i < due.length; i++) if (i === 0 || (due[i] as number) - (due[i - 1] as number) > BURST_MS) bursts++;
  return {
    found: parts.length,
    asked: requests.length,
    latencyMs: { min: sorted[0] ?? 0, median: sorted[Math.floor(sorted.length / 2)] ?? 0, max: sorted.at(-1) ?? 0 },
    meanMs,
    share,
    bursts,
  };
}

const PART_NAMES: Record<string, string> = {
  before: 'waiting to be read (event loop busy with other work, GC, kernel)',
  rest: 'in the handler outside its stages (parse, route, write the answer)',
  [NODE]: 'the node (upstream attempts)',
};

/** One line per part, largest first: mean ms and share of the mean latency. */
export function describe(title: string, s: WaitedOnSummary): string[] {
  const lines = [
    `  ${title}: ${s.found} of ${s.asked} requests traced, latency ${s.latencyMs.min.toFixed(2)}-${s.latencyMs.max.toFixed(2)} ms (median ${s.latencyMs.median.toFixed(2)})` +
      (s.asked > 1 ? `, due in ${s.bursts} burst(s) (${BURST_MS} ms apart or more)` : ''),
  ];
  const parts = Object.entries(s.meanMs).sort((a, b) => b[1] - a[1]);
  for (const [k, v] of parts) lines.push(`    ${(PART_NAMES[k] ?? k).padEnd(68)} ${v.toFixed(3).padStart(8)} ms  ${((s.share[k] ?? 0) * 100).toFixed(0).padStart(3)}%`);
  return lines;
}
