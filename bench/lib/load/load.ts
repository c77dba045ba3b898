import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChild, stopChild, tempDir } from '../children.ts';

/**
 * One load run over `connections` keep-alive connections: closed loop (each connection sends its
 * next request when the last answer is in), or with `rate` open loop (bench/lib/load/load-open.ts).
 */
export interface LoadSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  seconds: number;
  /** Open loop: requests per second over all connections, sent on a timetable (only the open-loop generator takes it). */
  rate?: number;
  /**
   * Open loop only: 16 hex digits. Each request then carries a W3C `traceparent` whose trace id is
   * these digits and its index (16 hex), sampled, and the result names the slowest traced
   * requests (`open.slowest`) and a spread of ordinary ones (`open.typical`) by index, so their
   * spans can be found (bench/lib/measures/waited-on.ts).
   */
  trace?: string;
  /** With `trace`: only every n-th request carries its traceparent (1: all); tracing every request would load the target. */
  traceEvery?: number;
}

/** One traced request of an open-loop run: its index in the timetable, its latency and when it was due (ms after the start). */
export interface TracedRequest {
  index: number;
  latencyMs: number;
  dueMs: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** The 99.9th percentile (the tail, where a held event loop shows). */
  p999Ms: number;
  /** Connect, read, write errors and timeouts. */
  errors: number;
  /** Answers with a status other than 2xx/3xx. */
  non2xx: number;
  /** Open loop only: latency counted from each request's scheduled send time (bench/lib/load/load-open.ts). */
  open?: OpenLoopFigures;
}

export interface OpenLoopFigures {
  /** The rate asked for, req/s. */
  offered: number;
  /** The generator's threads ran at a raised priority (nice -10; only where it may raise it, e.g. as root). */
  niced: boolean;
  maxMs: number;
  /** Sent more than 1 ms after their time with a connection free: the generator's own lateness (overload). */
  lateSends: number;
  /** The p99 of how late the requests with a connection free went out (the generator's own delay), ms. */
  sendDelayP99Ms: number;
  /** Found every connection busy at their time: the target was behind (their wait is in the latency). */
  waited: number;
  /** The generator's own CPU during the run, in % of one core. */
  cpuPct: number;
  /** With `trace`: the slowest 1% of the answered traced requests (at least one), slowest first. */
  slowest?: TracedRequest[];
  /** With `trace`: 200 answered traced requests spread evenly over the run (the ordinary case, to set beside the slowest). */
  typical?: TracedRequest[];
}

export interface LoadGenerator {
  name: string;
  run(spec: LoadSpec): Promise<LoadResult>;
}

const TIMEOUT_S = 5; // a request slower than this counts as a timeout error

/** `wrk -t1` with a Lua script for the POST; its done() hook prints exact figures (microseconds). */
function wrk(bin: string): LoadGenerator {
  const dir = tempDir('wrk');
  let scripts = 0;
  return {
    name: 'wrk (1 thread)',
    async run(spec) {
      const file = path.join(dir, `post-${scripts++}.lua`);
      const lua = (s: string) => `[==[${s}]==]`;
      writeFileSync(
        file,
        [
          'wrk.method = "POST"',
          `wrk.body = ${lua(spec.body)}`,
          'wrk.headers["Content-Type"] = "application/json"',
          ...Object.entries(spec.headers).map(([k, v]) => `wrk.headers[ ${lua(k)} ] = ${lua(v)}`),
          'function done(s, latency, requests)',
          '  local e = s.errors',
          '  io.write(string.format("WRK_RESULT %d %d %d %d %d %d %d %.1f %.1f %.1f\\n", s.requests, s.duration,',
          '    e.connect, e.read, e.write, e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))',
          'end',
        ].join('\n'),
      );
      const args = ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, `--timeout`, `${TIMEOUT_S}s`, '-s', file, spec.url];
      const child = startChild('wrk', bin, args, { role: 'driver' });
      const timer = setTimeout(() => void stopChild(child), (spec.seconds + TIMEOUT_S + 10) * 1000);
      const code = await child.exited;
      clearTimeout(timer);
      const m = /WRK_RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)/.exec(child.output());
      if (code !== 0 || !m) throw new Error(`wrk failed (exit ${code}):\n${child.output()}`);
      const [requests = 0, durationUs = 0, connect = 0, read = 0, write = 0, status = 0, timeout = 0, p50Us = 0, p99Us = 0, p999Us = 0] = m
        .slice(1)
        .map(Number);
      const seconds = durationUs / 1e6;
      return {
        requests,
        seconds,
        rps: requests / seconds,
        p50Ms: p50Us / 1000,
        p99Ms: p99Us / 1000,
        p999Ms: p999Us / 1000,
        errors: connect + read + write + timeout,
        non2xx: status,
      };
    },
  };
}

/** A generator of bench/ written in Node (`script`), in its own process; it prints one JSON line with the LoadResult. */
function nodeGenerator(name: string, script: string): LoadGenerator {
  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), script);
  return {
    name,
    async run(spec) {
      const child = startChild(script, process.execPath, ['--import', 'tsx', file, JSON.stringify({ ...spec, timeoutS: TIMEOUT_S })], { role: 'driver' });
      const timer = setTimeout(() => void stopChild(child), (spec.seconds + TIMEOUT_S + 10) * 1000);
      const code = await child.exited;
      clearTimeout(timer);
      const line = child.output().split('\n').find((l) => l.startsWith('{'));
      if (code !== 0 || !line) throw new Error(`load generator failed (exit ${code}):\n${child.output()}`);
      return JSON.parse(line) as LoadResult;
    },
  };
}

/** The fallback: bench/lib/load/load-undici.ts. */
function undiciGenerator(wrkMissing: boolean): LoadGenerator {
  const why = wrkMissing ? '; wrk is not installed: apt-get install wrk' : '';
  return nodeGenerator(`undici load generator in its own process (bench/lib/load/load-undici.ts${why})`, 'load-undici.ts');
}

/** Open loop at `spec.rate` (bench/lib/load/load-open.ts): latency from each request's scheduled send time. */
export function openLoopGenerator(): LoadGenerator {
  return nodeGenerator('open-loop generator in its own process (bench/lib/load/load-open.ts)', 'load-open.ts');
}

/**
 * wrk when installed: written in C, one thread of it drives far more requests than any target
 * here, so it is not the bottleneck; otherwise a small undici generator in its own process.
 */
export function pickLoadGenerator(prefer?: 'wrk' | 'undici'): LoadGenerator {
  if (prefer === 'undici') return undiciGenerator(false);
  const found = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (found.error && prefer === 'wrk') throw new Error('wrk is not installed (Debian/Ubuntu: apt-get install wrk)');
  return found.error ? undiciGenerator(true) : wrk('wrk');
}
