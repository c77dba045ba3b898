// `npm run bench -- cold-key`: what a key not in memory costs on the RPC path, against a key the
// gateway holds in its key cache (src/keys/cache.ts), in the same run: the compiled gateway as its
// own process, one account with many keys made through the REST API (none of them looked up yet),
// then calls in turns: a round of calls each with a key never used before (one storage lookup
// each), a round with keys already in memory, the order swapped every round. One call at a time
// over one keep-alive connection, so each latency is one call's and nothing queues behind another.
// Goal: the cold key's p99 at most 2x the cached key's (the exit code is 1 when a row misses it).
//
// The call is eth_chainId with the response cache on (C44): answered from memory, so what the two
// differ in is the key (`--method eth_blockNumber` forwards to the bench's static upstream).
//
// --baseline: that checkout's gateway (dist/ built there) takes the same turns, on its own
// account and keys: before/after in one run, which is the comparison to quote on a shared host.
// PostgreSQL: BENCH_DATABASE_URL, else `junction_bench` on 127.0.0.1:5432 (made when missing;
// skipped when PostgreSQL does not answer).
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client } from 'undici';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { openStorage } from '../../src/storage/db.ts';
import { interrupted, startScript, stopChild, tempDir } from '../lib/children.ts';
import { cpuSeconds, machineBusySeconds } from '../lib/measures/cpu.ts';
import { Histogram } from '../lib/measures/histogram.ts';
import { record } from '../lib/report/results.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { BENCH_DATABASE_URL, benchDatabaseMissing, type GatewayVariant, LIMITS, type RunningGateway, startGateway } from '../lib/targets/gateway.ts';

const OPTIONS = {
  storage: { type: 'string', default: 'embedded,postgres', help: 'embedded, postgres or both, comma-separated' },
  calls: { type: 'string', default: '1000', help: 'calls of each kind (cold keys made: this many)' },
  round: { type: 'string', default: '50', help: 'calls of one kind in a turn' },
  'cached-keys': { type: 'string', default: '100', help: 'keys held in memory, used in turn' },
  method: { type: 'string', default: 'eth_chainId', help: 'the JSON-RPC method called' },
  'flush-ms': { type: 'string', help: 'usage and analytics flush interval (default the bench gateway\'s 500 ms)' },
  baseline: { type: 'string', help: 'another checkout (its dist/ built): its gateway takes the same turns, on its own account and keys' },
} as const;

export default defineScenario({
  summary: 'a key not in memory against a cached key, p50/p99 in turns, embedded and PostgreSQL (goal: cold p99 <= 2x cached)',
  options: OPTIONS,
  run: async (ctx) => {
    opt = ctx.opt;
    CALLS = Number(opt.calls);
    ROUND = Number(opt.round);
    CACHED_KEYS = Number(opt['cached-keys']);
    BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: opt.method, params: [] });
    return main();
  },
});

let opt: Values<typeof OPTIONS>;
let CALLS = 1000;
let ROUND = 50;
let CACHED_KEYS = 100;
let BODY = '';
/** Keys used once before the rounds, so the cold path's code is compiled and its statement prepared. */
const WARMUP_COLD = 50;
const GOAL = 2;
/** The free plan without limits: the bench's account makes all its keys without an admin (the admin token is startGateway's own). */
const NO_LIMITS = { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null, maxKeys: null, maxNetworks: null };

interface Figures {
  cold: Histogram;
  cached: Histogram;
  /** Busy CPU of the machine outside the gateway and this process, % of one core, over the rounds. */
  otherPct: number;
  seconds: number;
}

async function json<T>(url: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** An account of its own (on the free plan, which this bench's config lifts every limit of) and `n` keys made through the API, none looked up yet. */
async function makeKeys(url: string, n: number): Promise<string[]> {
  type Session = { data: { user: { id: string }; tokens: { accessToken: string } } };
  const email = `cold-key-${Date.now()}-${randomBytes(3).toString('hex')}@example.com`;
  const session = await json<Session>(`${url}/api/v1/auth/register`, 'POST', { email, password: 'bench password 123', name: 'Cold key bench' });
  const bearer = { authorization: `Bearer ${session.data.tokens.accessToken}` };
  const keys: string[] = [];
  for (let i = 0; i < n; i++) keys.push((await json<{ data: { key: string } }>(`${url}/api/v1/api-keys`, 'POST', { name: `k${i}` }, bearer)).data.key);
  return keys;
}

/** startGateway, tried again when the gateway is not ready in its minute (on a loaded shared host PGlite's first start can take longer). */
async function startWithRetries(variant: GatewayVariant, upstreamUrl: string, cwd: string | undefined): Promise<RunningGateway> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startGateway(variant, upstreamUrl, cwd ? { cwd } : {});
    } catch (err) {
      if (attempt === 3 || interrupted()) throw err;
      console.log(`  the gateway did not start (${(err as Error).message.split('\n')[0]}); trying again`);
    }
  }
}

/** One call, its latency in µs; throws unless the gateway served it. */
async function timedCall(client: Client, path: string, key: string): Promise<number> {
  const started = performance.now();
  const res = await client.request({ method: 'POST', path, headers: { 'content-type': 'application/json', 'x-api-key': key }, body: BODY });
  const text = await res.body.text();
  const us = (performance.now() - started) * 1000;
  if (res.statusCode !== 200 || !text.includes('"result"')) throw new Error(`answered ${res.statusCode}: ${text.slice(0, 300)}`);
  return us;
}

/** A gateway under test: this checkout's, or with `cwd` another checkout's (--baseline). */
interface Target {
  name: string;
  cwd?: string;
}

/** A started gateway with its keys: the ones never looked up, and the ones in memory. */
interface Running {
  target: Target;
  gw: RunningGateway;
  client: Client;
  path: string;
  cold: string[];
  cachedKeys: string[];
  figures: Figures;
}

/**
 * Every target started on `variant` (each with its own account and keys), then the rounds: each
 * round gives every target a turn of cold calls and a turn of cached ones, the order of targets
 * and of kinds swapped every other round.
 */
async function measure(variant: () => Promise<GatewayVariant>, targets: Target[], upstreamUrl: string): Promise<Array<{ target: Target; figures: Figures }>> {
  const running: Running[] = [];
  try {
    for (const target of targets) {
      const gw = await startWithRetries(await variant(), upstreamUrl, target.cwd);
      const url = new URL(gw.rpcUrl);
      const r: Running = { target, gw, client: new Client(url.origin, { pipelining: 1 }), path: url.pathname, cold: [], cachedKeys: [], figures: { cold: new Histogram(), cached: new Histogram(), otherPct: 0, seconds: 0 } };
      running.push(r);
      const made = Date.now();
      const keys = await makeKeys(gw.url, CALLS + WARMUP_COLD + CACHED_KEYS);
      console.log(`  ${target.name}: ${keys.length} keys made through the API in ${((Date.now() - made) / 1000).toFixed(1)} s`);
      r.cold = keys.slice(0, CALLS);
      r.cachedKeys = keys.slice(CALLS + WARMUP_COLD);
      // Warm-up, not counted: every cached key into memory, both paths compiled.
      for (let i = 0; i < 5 * CACHED_KEYS; i++) await timedCall(r.client, r.path, r.cachedKeys[i % CACHED_KEYS] as string);
      for (const k of keys.slice(CALLS, CALLS + WARMUP_COLD)) {
        await timedCall(r.client, r.path, k);
        await timedCall(r.client, r.path, r.cachedKeys[0] as string);
      }
    }
    const started = performance.now();
    const busy0 = machineBusySeconds();
    const cpu0 = process.cpuUsage();
    const gwCpu = () => running.reduce((sum, r) => sum + cpuSeconds(r.gw.child.pid), 0);
    const gwCpu0 = gwCpu();
    let c = 0;
    let w = 0;
    for (let round = 0; c < CALLS; round++) {
      const turns = round % 2 === 0 ? running : [...running].reverse();
      for (const r of turns) {
        const coldTurn = async () => {
          for (let i = 0; i < ROUND && c + i < CALLS; i++) r.figures.cold.record(await timedCall(r.client, r.path, r.cold[c + i] as string));
        };
        const cachedTurn = async () => {
          for (let i = 0; i < ROUND && w + i < CALLS; i++) r.figures.cached.record(await timedCall(r.client, r.path, r.cachedKeys[(w + i) % CACHED_KEYS] as string));
        };
        // A B, then B A: neither kind always runs right after the other.
        if (round % 2 === 0) {
          await coldTurn();
          await cachedTurn();
        } else {
          await cachedTurn();
          await coldTurn();
        }
      }
      c += ROUND;
      w += ROUND;
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const mine = (cpu.user + cpu.system) / 1e6 + (gwCpu() - gwCpu0);
    const otherPct = (Math.max(0, machineBusySeconds() - busy0 - mine) / seconds) * 100;
    for (const r of running) Object.assign(r.figures, { seconds, otherPct });
    return running.map((r) => ({ target: r.target, figures: r.figures }));
  } finally {
    for (const r of running) {
      await r.client.close().catch(() => undefined);
      await stopChild(r.gw.child, 10_000);
    }
  }
}

const ms = (h: Histogram, p: number) => h.percentileMs(p).toFixed(3);

async function main(): Promise<number> {
  const built = await build();
  console.log(`dist/: ${built.built} file(s) built, ${built.removed} stray removed`);
  console.log(`POST ${BODY}, one call at a time over one keep-alive connection; ${CALLS} calls with keys never looked up and ${CALLS} with ${CACHED_KEYS} keys in memory, in turns of ${ROUND}\n`);
  const upstream = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
  const storages = (opt.storage ?? '').split(',').filter(Boolean);
  const targets: Target[] = [{ name: 'this checkout' }, ...(opt.baseline ? [{ name: `baseline ${opt.baseline}`, cwd: path.resolve(opt.baseline) }] : [])];
  const results: string[] = [];
  let above = 0;
  try {
    for (const storage of storages) {
      // The response cache on (the default): eth_chainId is answered from memory.
      const base: GatewayVariant = { label: `gateway, ${storage}`, config: { limits: { ...LIMITS.limits, restPerMinute: 1_000_000 }, plans: { free: NO_LIMITS } } };
      if (opt['flush-ms'] !== undefined) base.config = { ...base.config, usage: { flushIntervalMs: Number(opt['flush-ms']) } };
      let variant: () => Promise<GatewayVariant>;
      if (storage === 'postgres') {
        const why = await benchDatabaseMissing();
        if (why) {
          console.log(`${storage}: skipped, ${why}`);
          continue;
        }
        // Given, as PostgreSQL requires (embedded storage generates its own); generated per run (C59).
        const env = { DATABASE_URL: BENCH_DATABASE_URL, JWT_SECRET: randomBytes(32).toString('hex'), KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex') };
        variant = async () => ({ ...base, env });
      } else if (storage === 'embedded') {
        variant = async () => {
          // Created (initdb, migrations) here first, without startGateway's minute to be ready: on a
          // loaded shared host PGlite's first start can take longer.
          const dataDir = tempDir('cold-key-data');
          await (await openStorage({ dataDir })).close();
          return { ...base, env: { DATA_DIR: dataDir } };
        };
      } else throw new Error(`--storage: embedded or postgres, not ${storage}`);
      console.log(`${storage}:`);
      for (const { target, figures: f } of await measure(variant, targets, upstream.url)) {
        const ratio = f.cold.percentileMs(99) / f.cached.percentileMs(99);
        const line =
          `${storage}, ${target.name}: cold p50 ${ms(f.cold, 50)} ms, p99 ${ms(f.cold, 99)} ms (max ${(f.cold.maxUs / 1000).toFixed(3)}); ` +
          `cached p50 ${ms(f.cached, 50)} ms, p99 ${ms(f.cached, 99)} ms (max ${(f.cached.maxUs / 1000).toFixed(3)}); ` +
          `p99 cold/cached ${ratio.toFixed(2)}x (goal <= ${GOAL}x): ${ratio <= GOAL ? 'OK' : 'ABOVE'}; other work on the machine ${f.otherPct.toFixed(0)}% of a core over ${f.seconds.toFixed(1)} s`;
        console.log(`  ${line}`);
        results.push(line);
        if (!(ratio <= GOAL)) above++;
        record(storage === 'postgres' ? 'PostgreSQL' : 'embedded storage', target.name, {
          cold_p50_ms: f.cold.percentileMs(50),
          cold_p99_ms: f.cold.percentileMs(99),
          cold_max_ms: f.cold.maxUs / 1000,
          cached_p50_ms: f.cached.percentileMs(50),
          cached_p99_ms: f.cached.percentileMs(99),
          cached_max_ms: f.cached.maxUs / 1000,
          // Lower is better; the goal is <= GOAL.
          p99_cold_over_cached: { unit: 'x', better: 'lower', value: ratio },
          other_pct: { unit: '% of a core', value: f.otherPct },
        });
      }
    }
  } finally {
    await stopChild(upstream.child);
  }
  console.log(`\n${results.join('\n')}`);
  return above > 0 ? 1 : 0;
}
