// Open-loop load generator (the wrk2 way), in its own process (bench/lib/load/load.ts starts it). Usage:
// node --import tsx bench/lib/load/load-open.ts '<LoadSpec JSON with rate, + timeoutS>'.
// Requests are sent at a fixed rate over all connections, on a timetable: request i is due at
// start + i / rate, whatever became of the earlier ones. Each is sent on the next free keep-alive
// connection (one request in flight per connection, no pipelining), and its latency is counted
// from the time it was DUE, not from when it went out: if the target stalls and every connection
// is busy, the requests that should have gone out meanwhile count their wait (no coordinated
// omission). Raw sockets and a minimal HTTP/1.1 response reader keep the generator cheap: it
// shares the machine's cores with the target. Prints one JSON line with the LoadResult.
import { once } from 'node:events';
import net from 'node:net';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { Histogram } from '../measures/histogram.ts';
import type { LoadResult, LoadSpec, OpenLoopFigures, TracedRequest } from './load.ts';

const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec & { timeoutS: number };
if (!spec.rate || spec.rate <= 0) throw new Error('load-open.ts needs a rate (requests per second)');
const url = new URL(spec.url);
const body = Buffer.from(spec.body);
const head = [
  `POST ${url.pathname}${url.search} HTTP/1.1`,
  `Host: ${url.host}`,
  'Content-Type: application/json',
  `Content-Length: ${body.length}`,
  ...Object.entries(spec.headers).map(([k, v]) => `${k}: ${v}`),
];
const REQUEST = Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), body]);
// With `trace`: the request's own traceparent (trace id: the run's prefix, then the index), sampled.
const HEAD_TEXT = `${head.join('\r\n')}\r\n`;
const traced = (i: number) =>
  Buffer.concat([Buffer.from(`${HEAD_TEXT}traceparent: 00-${spec.trace}${i.toString(16).padStart(16, '0')}-${(i + 1).toString(16).padStart(16, '0')}-01\r\n\r\n`), body]);
const HEAD_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = Buffer.from('\r\n0\r\n\r\n');
const LATE_MS = 1;

const total = Math.max(1, Math.round(spec.rate * spec.seconds));
const intervalMs = 1000 / spec.rate;
const latency = new Histogram();
if (spec.trace !== undefined && !/^[0-9a-f]{16}$/.test(spec.trace)) throw new Error('trace is 16 lowercase hex digits');
const latencies = spec.trace === undefined ? undefined : new Float64Array(total).fill(-1); // per request, ms; -1: no answer
const traceEvery = Math.max(1, Math.round(spec.traceEvery ?? 1));
const isTraced = (i: number) => i % traceEvery === 0;
let start = 0;
let next = 0; // the next request of the timetable to send
let waitedUpTo = 0; // requests below this index found every connection busy at their time
let blocked = false; // every connection was busy at the last dispatch: nothing is sent until an answer frees one
let done = 0;
let errors = 0;
let non2xx = 0;
let lateSends = 0;
/** How long after its time each request went out with a connection free (the generator's own delay), µs. */
const sendDelay = new Histogram();
let waited = 0;
let lastAnswer = 0;
let finish: () => void = () => {};

interface Conn {
  socket: net.Socket;
  /** The request in flight, or -1. */
  request: number;
  buf: Buffer | undefined;
}
const idle: Conn[] = []; // first in, first out: every connection gets its turn (none sits idle past a keep-alive timeout)
/** Milliseconds on the monotonic clock both threads read (performance.now() drifts from it, here by ~0.8 ms a second). */
const clock = () => Number(process.hrtime.bigint()) / 1e6;
const due = (i: number) => start + i * intervalMs;

function connect(): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port || 80), noDelay: true });
    const conn: Conn = { socket, request: -1, buf: undefined };
    socket.once('connect', () => resolve(conn));
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => read(conn, chunk));
    socket.on('close', () => lost(conn));
  });
}

/** A connection closed (by the target, or an error): its request in flight is an error; a new connection takes its place. */
function lost(conn: Conn): void {
  const at = idle.indexOf(conn);
  if (at >= 0) idle.splice(at, 1);
  if (conn.request >= 0) answered(conn, false);
  conn.request = -2; // closed: never back in the idle list
  if (next < total && start > 0) {
    void connect().then(
      (c) => {
        idle.push(c);
        dispatch();
      },
      () => undefined,
    );
  }
}

/** Reads one answer (Content-Length or chunked); pipelining is off, so at most one is expected. */
function read(conn: Conn, chunk: Buffer): void {
  const buf = conn.buf ? Buffer.concat([conn.buf, chunk]) : chunk;
  const end = buf.indexOf(HEAD_END);
  if (end < 0 || conn.request < 0) {
    conn.buf = buf;
    return;
  }
  const headText = buf.toString('latin1', 0, end);
  const length = /\r\ncontent-length: *(\d+)/i.exec(headText);
  const complete = length ? buf.length >= end + 4 + Number(length[1]) : buf.indexOf(CHUNKED_END, end) >= 0;
  if (!complete) {
    conn.buf = buf;
    return;
  }
  conn.buf = undefined;
  const status = Number(headText.slice(9, 12));
  if (status >= 400) non2xx++;
  answered(conn, true);
  if (/\r\nconnection: *close/i.test(headText)) conn.socket.destroy();
  else {
    idle.push(conn);
    dispatch();
  }
}

function answered(conn: Conn, ok: boolean): void {
  const now = clock();
  if (ok) {
    latency.record((now - due(conn.request)) * 1000);
    if (latencies) latencies[conn.request] = now - due(conn.request);
  }
  else errors++;
  conn.request = -1;
  lastAnswer = now;
  if (++done === total) finish();
}

// The timetable's two threads ahead of the targets for a core: on a machine whose cores the
// generator shares with the targets, a wake-up of its own could otherwise wait behind a target's
// time slice, and the requests due meanwhile go out late. Its CPU per request is the same
// whichever target it drives. Linux keeps a nice value per thread and a new thread takes its
// creator's: set here, before the ticker starts. Without the right to raise it (not root), the
// generator runs at the priority it was given.
const NICE = -10;
let niced = false;
try {
  os.setPriority(NICE);
  niced = true;
} catch {
  // not allowed: as it is
}

// The timetable's clock. Node's timers wake at whole milliseconds (0-1 ms late, ~0.5 ms typically),
// which would add as much to every latency and send the requests in bursts. A helper thread
// sleeps on Atomics.wait (sub-ms timeouts) until the next request is due and wakes this thread
// with a message, at most every 0.2 ms; answers, which wake it anyway, dispatch what is due on the
// way. Against a fixed answer at 8,000 req/s: p50 ~0.2 ms (~0.8 with timers), for ~1.5x the
// generator's CPU (~40% of a core against ~25).
const shared = new SharedArrayBuffer(16);
const nextAt = new Float64Array(shared, 0, 1); // when the next request is due (clock() ms), +Infinity: none; NaN: stop
const signal = new Int32Array(shared, 8, 1); // bumped when nextAt moves earlier
nextAt[0] = Number.POSITIVE_INFINITY;
const TICKER = `
const { workerData: shared, parentPort } = require('node:worker_threads');
const nextAt = new Float64Array(shared, 0, 1);
const signal = new Int32Array(shared, 8, 1);
const now = () => Number(process.hrtime.bigint()) / 1e6;
for (;;) {
  const seen = Atomics.load(signal, 0);
  const at = nextAt[0];
  if (Number.isNaN(at)) break;
  const wait = at - now();
  if (wait > 0) { Atomics.wait(signal, 0, seen, Math.min(wait, 1000)); continue; }
  parentPort.postMessage(0);
  Atomics.wait(signal, 0, seen, 0.2);
}`;
const ticker = new Worker(TICKER, { eval: true, workerData: shared });
ticker.on('message', dispatch);

/** Tells the ticker when to wake this thread next. */
function arm(at: number): void {
  const earlier = at < (nextAt[0] as number);
  nextAt[0] = at;
  if (earlier) {
    Atomics.add(signal, 0, 1);
    Atomics.notify(signal, 0);
  }
}

/** The index of the request due last at `now`, plus one. */
const dueBy = (now: number) => Math.min(total, Math.floor((now - start) / intervalMs) + 1);

/** Sends every request that is due, each on the next free connection. */
function dispatch(): void {
  const now = clock();
  // Every connection was busy until an answer freed one: what came due meanwhile waited for a
  // connection, not for the generator (its wait counts in the latency all the same).
  if (blocked) {
    waitedUpTo = Math.max(waitedUpTo, dueBy(now));
    blocked = false;
  }
  while (next < total && due(next) <= now) {
    const conn = idle.shift();
    if (!conn) {
      // Every connection busy: the due requests wait for one (the target is behind); their wait counts.
      waitedUpTo = Math.max(waitedUpTo, dueBy(now));
      blocked = true;
      arm(Number.POSITIVE_INFINITY); // an answer frees a connection and dispatches
      return;
    }
    if (next < waitedUpTo) waited++;
    else {
      sendDelay.record(Math.max(0, now - due(next)) * 1000);
      if (now - due(next) > LATE_MS) lateSends++;
    }
    conn.request = next++;
    conn.socket.write(latencies && isTraced(conn.request) ? traced(conn.request) : REQUEST);
  }
  arm(next < total ? due(next) : Number.POSITIVE_INFINITY);
}

// The timetable starts once the ticker runs: a thread takes tens of milliseconds to start, and
// the requests due meanwhile (the first 30-50 at 2,000 req/s) would all go out late.
const tickerRunning = once(ticker, 'online');
const conns = await Promise.all(Array.from({ length: spec.connections }, () => connect()));
await tickerRunning;
idle.push(...conns);
const cpuBefore = process.cpuUsage();
start = clock() + 5;
const wallStart = start;
const scheduleEnd = due(total);
await new Promise<void>((resolve) => {
  finish = resolve;
  arm(start);
  // Whatever is not answered TIMEOUT_S after the timetable's end counts as an error.
  setTimeout(resolve, scheduleEnd - clock() + spec.timeoutS * 1000).unref();
});
nextAt[0] = Number.NaN;
Atomics.add(signal, 0, 1);
Atomics.notify(signal, 0);
const cpu = process.cpuUsage(cpuBefore);
const elapsedS = (Math.max(lastAnswer, scheduleEnd) - wallStart) / 1000;
errors += total - done;
for (const c of conns) c.socket.destroy();
const pct = (p: number) => latency.percentileMs(p);
/** With `trace`: the slowest 1% of the traced requests (at least one) and 200 traced requests spread over the run, by index. */
function tracedRequests(): Pick<OpenLoopFigures, 'slowest' | 'typical'> {
  if (!latencies) return {};
  const at = (index: number): TracedRequest => ({ index, latencyMs: latencies[index] as number, dueMs: index * intervalMs });
  const answered = [...latencies.keys()].filter((i) => isTraced(i) && (latencies[i] as number) >= 0);
  const slowest = [...answered].sort((a, b) => (latencies[b] as number) - (latencies[a] as number)).slice(0, Math.max(1, Math.ceil(answered.length / 100)));
  const step = Math.max(1, Math.floor(answered.length / 200));
  const typical = answered.filter((_, k) => k % step === 0).slice(0, 200);
  return { slowest: slowest.map(at), typical: typical.map(at) };
}
const result: LoadResult = {
  requests: latency.count,
  seconds: elapsedS,
  rps: latency.count / elapsedS,
  p50Ms: pct(50),
  p99Ms: pct(99),
  p999Ms: pct(99.9),
  errors,
  non2xx,
  open: { offered: spec.rate, niced, maxMs: latency.maxUs / 1000, lateSends, sendDelayP99Ms: sendDelay.percentileMs(99), waited, cpuPct: ((cpu.user + cpu.system) / 1e3 / (elapsedS * 1000)) * 100, ...tracedRequests() },
};
console.log(JSON.stringify(result));
process.exit(0);
