// `npm run bench` (`npm run bench -- proxy`): requests/s and latency of one eth_blockNumber call sent
// straight to a static upstream, through nginx, through a bare Node.js proxy and through the gateway
// (bench/README.md).
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Child, interrupted, pinCpus, startScript, stopChild } from '../lib/children.ts';
import { BENCH_DATABASE_URL, benchDatabaseMissing, type GatewayVariant, LIMITS, NO_CACHE, setFlushIntervalMs, startGateway } from '../lib/targets/gateway.ts';
import { openLoopGenerator, pickLoadGenerator } from '../lib/load/load.ts';
import { type MeasureOptions, measure, QUIET } from '../lib/measures/measure.ts';
import { findNginx, startNginx } from '../lib/targets/nginx.ts';
import { type Comparison, interleaved, openLoopTail, type PairTarget } from '../lib/load/pairs.ts';
import { hotFunctions } from '../lib/measures/profile.ts';
import { recordingCost } from '../lib/measures/analytics-record.ts';
import { redisClusterSkip, startRedisCluster } from '../../test/support/redis-cluster.ts';
import { type ReceivedSpan, startOtlpReceiver } from '../../test/support/otlp-receiver.ts';
import { describe, summarize, traceIdOf } from '../lib/measures/waited-on.ts';
import { record } from '../lib/report/results.ts';
import { machineLine, type Row, table, verdicts } from '../lib/report/table.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';

/**
 * One gateway row pair (loaded and moderate) per entry; a new row is a new entry. E.g. "limits on,
 * in-process": `{ label, account: { tier: 'free', limits: { requestsPerMinute: 1e9, dailyLimit:
 * 1e9, monthlyLimit: 1e9 } } }` (limits checked on every call, never reached); "limits on, Redis":
 * the same plus `env: { REDIS_URL: 'redis://127.0.0.1:6379' }` and a `skip` saying when Redis does
 * not answer. The default account is enterprise (no limits).
 */
// Limits on: a free account whose overrides are too high to reach, so every request runs the
// per-minute windows, the daily counter and the monthly compute units without ever being refused.
const UNREACHABLE = { requestsPerMinute: 1_000_000_000, dailyLimit: 1_000_000_000, monthlyLimit: 1_000_000_000 };
const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
// C46: the same pass-through with analytics recording off, next to the row with it on (the default).
const ANALYTICS_OFF = 'gateway, X-API-Key, analytics off';
const ANALYTICS_ON = 'gateway, X-API-Key';
// The same pass-through with storage on PostgreSQL and limits on Redis (the production layout),
// beside embedded storage (the row above). Its account has limits, checked on every call, never reached.
const ON_POSTGRES = 'gateway, X-API-Key, PostgreSQL + Redis';
// Given, as PostgreSQL requires (embedded storage generates its own); the bench's database holds nothing else.
// Generated per run: C59 refuses a secret written in the repository.
const PG_SECRETS = { JWT_SECRET: randomBytes(32).toString('hex'), KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex') };
/** Why the Redis at REDIS cannot be used, or undefined when it answers. */
async function redisMissing(): Promise<string | undefined> {
  const u = new URL(REDIS);
  const up = await new Promise<boolean>((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port || 6379) }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
  return up ? undefined : `Redis does not answer at ${u.host}`;
}
const GATEWAY_VARIANTS: GatewayVariant[] = [
  { label: ANALYTICS_OFF, config: { ...NO_CACHE, ...LIMITS, analytics: { enabled: false } }, kind: 'pass-through' },
  { label: ANALYTICS_ON, config: { ...NO_CACHE, ...LIMITS }, kind: 'pass-through' },
  {
    label: ON_POSTGRES,
    account: { tier: 'free', limits: UNREACHABLE },
    config: { ...NO_CACHE, ...LIMITS },
    kind: 'pass-through',
    env: { DATABASE_URL: BENCH_DATABASE_URL, REDIS_URL: REDIS, ...PG_SECRETS },
    skip: async () => (await benchDatabaseMissing()) ?? (await redisMissing()),
  },
  { label: 'gateway, limits in-process', account: { tier: 'free', limits: UNREACHABLE }, config: { ...NO_CACHE, ...LIMITS }, kind: 'pass-through' },
  {
    label: 'gateway, cached eth_chainId',
    account: { tier: 'free', limits: UNREACHABLE },
    body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
    config: LIMITS,
    kind: 'cached',
  },
  {
    label: 'gateway, limits on Redis',
    account: { tier: 'free', limits: UNREACHABLE },
    config: { ...NO_CACHE, ...LIMITS },
    kind: 'pass-through',
    env: { REDIS_URL: REDIS },
    skip: redisMissing,
  },
  {
    // Its own 3-primary Redis Cluster (test/support/redis-cluster.ts, as the tests start one), started
    // for this row and stopped after it.
    label: 'gateway, limits on Redis Cluster',
    account: { tier: 'free', limits: UNREACHABLE },
    config: { ...NO_CACHE, ...LIMITS },
    kind: 'pass-through',
    skip: async () => redisClusterSkip(),
    setUp: async () => {
      const cluster = await startRedisCluster();
      return { env: { REDIS_CLUSTER_NODES: cluster.nodes.join(',') }, close: () => cluster.close() };
    },
  },
];

const OPTIONS = {
  seconds: { type: 'string', default: '10', help: 'measured seconds per run' },
  warmup: { type: 'string', default: '2', help: 'seconds of load before each run, not counted' },
  connections: { type: 'string', default: '32', help: 'the loaded runs' },
  moderate: { type: 'string', default: '4', help: 'the runs that give the latency the gateway adds' },
  profile: { type: 'boolean', default: false, help: '--cpu-prof on the gateway; prints where its CPU goes' },
  only: { type: 'string', help: 'run only the gateway rows whose label contains this text' },
  loadgen: { type: 'string', help: 'wrk (default when installed) or undici' },
  rounds: { type: 'string', default: '6', help: 'interleaved rounds after the table (0: none)' },
  'round-seconds': { type: 'string', default: '3', help: 'measured seconds of each target in a round' },
  pin: { type: 'string', default: 'off', help: 'on: the target alone on one CPU (taskset); off: wherever the scheduler puts it' },
  baseline: { type: 'string', help: 'another checkout (its dist/ built): its pass-through gateway (and its cached rows, when selected) join the interleaved rounds, and its gateway rows the open-loop tail\'s' },
  flags: { type: 'string', help: 'Node.js/V8 flags, written --flags="--max-semi-space-size=16": a pass-through gateway (and each cached row chosen) started with them joins the interleaved rounds, beside the same without; with --tail-rate, each gateway row of the open-loop tail too' },
  table: { type: 'string', default: 'on', help: 'off: no table, only the interleaved rounds (a quicker before/after)' },
  'flush-ms': { type: 'string', default: '500', help: 'the gateways\' usage and analytics flush interval (500: several flushes in every 3 s round; 2000 is the default the gateway runs with)' },
  // The tail at equal load, open loop (bench/lib/load/load-open.ts)
  'tail-rate': { type: 'string', help: 'the open-loop tail at equal load: req/s, or auto (half the gateway\'s closed-loop throughput)' },
  'tail-rounds': { type: 'string', default: '6', help: 'open-loop rounds' },
  'tail-seconds': { type: 'string', default: '5', help: 'measured seconds of each target in an open-loop round (after 1 s at the same rate)' },
} as const;
let opt: Values<typeof OPTIONS>;
let CONNECTIONS = 32;
let MODERATE = 4;

export default defineScenario({
  summary: 'one eth_blockNumber call direct, through nginx, a bare Node proxy, a fixed answer and the gateway variants; interleaved rounds',
  options: OPTIONS,
  duration: { option: 'seconds', unit: 's' },
  run: async (ctx) => {
    opt = ctx.opt;
    CONNECTIONS = Number(opt.connections);
    MODERATE = Number(opt.moderate);
    const flushMs = Number(opt['flush-ms']);
    if (!Number.isInteger(flushMs) || flushMs < 50) throw new Error(`--flush-ms: "${opt['flush-ms']}" is not a number of milliseconds (50 or more)`);
    setFlushIntervalMs(flushMs);
    return main();
  },
});

const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';
const DIRECT = 'direct to upstream';
const NGINX = 'nginx proxy_pass';
const BARE = 'node:http + undici only';
const FIXED = 'node:http fixed answer, gateway headers';
const TWIN = 'gateway, X-API-Key, twin';
const BASELINE_CHECKOUT = 'baseline checkout';
const BASELINE = `gateway, X-API-Key, ${BASELINE_CHECKOUT}`;

async function main(): Promise<number> {
  if (opt.loadgen !== undefined && opt.loadgen !== 'wrk' && opt.loadgen !== 'undici') throw new Error('--loadgen is wrk or undici');
  const load = pickLoadGenerator(opt.loadgen);
  const seconds = Number(opt.seconds);
  const warmupSeconds = Number(opt.warmup);
  if (opt.pin !== 'on' && opt.pin !== 'off') throw new Error('--pin is on or off');
  console.log(machineLine(load.name));
  const pinned = pinCpus(opt.pin === 'on');
  console.log(pinned ? `pinned: ${pinned}` : 'not pinned (--pin on to pin): every process runs wherever the scheduler puts it');
  console.log(`each run: ${warmupSeconds} s warm-up, then ${seconds} s at ${CONNECTIONS} and ${MODERATE} keep-alive connections; POST ${BODY}\n`);

  const upstream = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
  const o: MeasureOptions = { load, body: BODY, concurrencies: [CONNECTIONS, MODERATE], warmupSeconds, seconds, upstreamPid: upstream.child.pid };
  const rows: Row[] = [];
  const failures: string[] = [];
  /** Starts a proxy, measures it, stops it; a failure to start is recorded and the bench goes on. */
  const run = async (label: string, options: MeasureOptions, start: () => Promise<{ child: Child; url: string; headers?: Record<string, string>; metricsUrl?: string }>) => {
    let child: Child | undefined;
    try {
      const p = await start();
      child = p.child;
      rows.push(...(await measure({ label, url: p.url, headers: p.headers ?? {}, proxyPid: p.child.pid, ...(p.metricsUrl ? { metricsUrl: p.metricsUrl } : {}) }, options)));
      return true;
    } catch (err) {
      if (interrupted()) throw err;
      failures.push(`${label}: ${(err as Error).message}`);
      return false;
    } finally {
      if (child) await stopChild(child, 10_000); // a clean exit writes the gateway's CPU profile
    }
  };

  if (opt.table !== 'on' && opt.table !== 'off') throw new Error('--table is on or off');
  const withTable = opt.table === 'on';
  if (withTable) {
    rows.push(...(await measure({ label: DIRECT, url: upstream.url, headers: {}, proxyPid: null }, o)));
    const nginx = findNginx();
    if (nginx) await run(NGINX, o, () => startNginx(nginx, Number(new URL(upstream.url).port)));
    else console.log(`  ${NGINX}: skipped, nginx is not installed (Debian/Ubuntu: apt-get install nginx-light)`);
    await run(BARE, o, () => startScript('bare proxy', 'bare-proxy.ts', [upstream.url], 'target'));
    // The ceiling of a cached answer in Node.js (fixed-answer.ts): the cached row as a fraction of it.
    await run(FIXED, o, () => startScript('fixed answer', 'fixed-answer.ts', [], 'target'));
  }

  // Kept after the run (Chrome DevTools or speedscope open the .cpuprofile files); the path is printed.
  const profileDir = opt.profile ? mkdtempSync(path.join(os.tmpdir(), 'junction-bench-profile-')) : undefined;
  const nowUs = () => Number(process.hrtime.bigint() / 1000n); // the monotonic clock of the profiles
  const profiled: Array<{ label: string; dir: string; fromUs: number; toUs: number }> = [];
  const gateways: string[] = [];
  const kinds: Record<string, 'pass-through' | 'cached'> = {};
  // The gateway rows run the compiled JavaScript, as `npm start` does.
  const built = await build();
  console.log(`  dist/: ${built.built} file(s) built, ${built.removed} stray removed`);
  for (const [i, variant] of GATEWAY_VARIANTS.entries()) {
    if (!withTable) break;
    if (opt.only !== undefined && !variant.label.includes(opt.only)) continue;
    const why = await variant.skip?.();
    if (why) {
      console.log(`  ${variant.label}: skipped, ${why}`);
      continue;
    }
    const dir = profileDir && path.join(profileDir, String(i));
    const nodeArgs = dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
    let fromUs = 0;
    let toUs = 0;
    let extra: { env: Record<string, string>; close(): Promise<void> } | undefined;
    try {
      extra = await variant.setUp?.();
    } catch (err) {
      failures.push(`${variant.label}: ${(err as Error).message}`);
      continue;
    }
    const started = extra ? { ...variant, env: { ...variant.env, ...extra.env } } : variant;
    let ok = false;
    try {
      ok = await run(variant.label, variant.body ? { ...o, body: variant.body } : o, async () => {
        const gw = await startGateway(started, upstream.url, { nodeArgs });
        fromUs = nowUs();
        return { child: gw.child, url: gw.rpcUrl, headers: gw.headers, metricsUrl: gw.metricsUrl };
      });
    } finally {
      await extra?.close();
    }
    toUs = nowUs();
    if (ok) gateways.push(variant.label);
    if (ok && variant.kind) kinds[variant.label] = variant.kind;
    if (ok && dir) profiled.push({ label: variant.label, dir, fromUs, toUs });
  }

  for (const r of rows) {
    record(`table, ${r.connections} connections`, r.target, {
      rps: r.rps,
      p50_ms: r.p50Ms,
      p99_ms: r.p99Ms,
      p999_ms: r.p999Ms,
      loop_p99_ms: r.loop?.p99Ms,
      cpu_proxy_pct: r.cpu.proxy === null ? null : { unit: '% of a core', value: r.cpu.proxy },
      cpu_per_request_us: r.cpu.proxy === null || !r.rps ? null : (r.cpu.proxy * 10_000) / r.rps,
      other_pct: { unit: '% of a core', value: r.cpu.other },
      errors: { unit: '', better: 'lower', value: r.errors + r.non2xx },
    });
  }
  if (withTable) console.log(`\n${table(rows)}\n`);
  if (withTable) console.log(verdicts(rows, { nginx: NGINX, direct: DIRECT, bare: BARE, fixed: FIXED, kinds, gateways: [BARE, ...gateways], connections: CONNECTIONS, moderate: MODERATE }));
  const cost = analyticsCost(rows);
  if (cost) console.log(cost);
  const disturbed = rows.filter((r) => r.cpu.other >= QUIET).length;
  if (disturbed > 0) {
    console.log(`note: other processes used >= ${QUIET}% of a core during ${disturbed} run(s) (column "other"): rerun on a quiet machine before comparing figures`);
  }
  for (const p of profiled) {
    console.log(`\nwhere "${p.label}" spent its CPU under load (self time; profiler on, so slower than in the table):`);
    console.log(hotFunctions(p.dir, { fromUs: p.fromUs, toUs: p.toUs }).join('\n'));
    console.log(`profiles: ${p.dir}`);
  }
  const rounds = Number(opt.rounds);
  if (rounds > 0 && !interrupted()) {
    try {
      console.log(`\n${(await pairs(upstream.url, load, rounds)).join('\n')}`);
    } catch (err) {
      if (interrupted()) throw err;
      failures.push(`interleaved rounds: ${(err as Error).message}`);
    }
  }
  if (opt['tail-rate'] !== undefined && !interrupted()) {
    try {
      console.log(`\n${(await tail(upstream.url, load)).join('\n')}`);
    } catch (err) {
      if (interrupted()) throw err;
      failures.push(`open-loop tail: ${(err as Error).message}`);
    }
  }
  const recording = recordingLine(rows);
  if (recording && !interrupted()) console.log(`\n${recording}`);
  for (const f of failures) console.error(`\nFAILED ${f}`);
  return failures.length > 0 ? 1 : 0;
}

/**
 * C46 measured where a shared machine cannot blur it: the recording's own CPU per call, in this
 * process once the targets are stopped (bench/lib/measures/analytics-record.ts), as a share of the CPU the
 * gateway spends per forwarded request (its pass-through row without analytics, in the table).
 */
function recordingLine(rows: Row[]): string | undefined {
  const off = rows.find((r) => r.target === ANALYTICS_OFF && r.connections === CONNECTIONS);
  if (!off?.rps || off.cpu.proxy === null) return undefined;
  const perRequestUs = (off.cpu.proxy * 10_000) / off.rps;
  const { addedNs } = recordingCost();
  const share = addedNs / 1000 / perRequestUs;
  record('analytics recording (C46)', 'recording per call', { added_ns: addedNs, share_of_request_pct: { unit: '%', better: 'lower', value: share * 100 } });
  return (
    `analytics recording (C46), CPU time in process: +${addedNs.toFixed(0)} ns per call, against ${perRequestUs.toFixed(0)} µs of gateway CPU per forwarded request: ` +
    `${(share * 100).toFixed(2)}% (goal: within 3%): ${share <= 0.03 ? 'OK' : 'ABOVE'}`
  );
}

/**
 * The ratios the goals speak of, measured interleaved (bench/lib/load/pairs.ts): the bare proxy and the
 * gateway rows run side by side and take turns, so drift on a shared machine falls on both sides.
 */
async function pairs(upstreamUrl: string, load: ReturnType<typeof pickLoadGenerator>, rounds: number): Promise<string[]> {
  const wanted = await variants((v) => [ANALYTICS_OFF, ANALYTICS_ON, ON_POSTGRES].includes(v.label) || v.kind === 'cached');
  if (wanted.length === 0) return [];
  const children: Child[] = [];
  try {
    const targets = await startTargets(upstreamUrl, wanted.filter((v) => v.kind !== 'cached'), children);
    const cached = wanted.filter((w) => w.kind === 'cached');
    // The cached rows' other yardsticks: nginx proxy_pass, and the fixed answer (the ceiling in Node.js).
    const nginxBin = cached.length > 0 ? findNginx() : undefined;
    if (nginxBin) {
      const ng = await startNginx(nginxBin, Number(new URL(upstreamUrl).port));
      children.push(ng.child);
      targets.push({ label: NGINX, url: ng.url, headers: {}, body: BODY, pid: ng.child.pid });
    }
    if (cached.length > 0) {
      const fixed = await startScript('fixed answer', 'fixed-answer.ts', [], 'target');
      children.push(fixed.child);
      targets.push({ label: FIXED, url: fixed.url, headers: {}, body: BODY, pid: fixed.child.pid });
    }
    targets.push(...(await startTargets(upstreamUrl, cached, children, false)));
    // The control: a second, identical pass-through gateway. What it differs by from its twin is
    // the resolution of this run; a difference between on and off smaller than that means nothing.
    const on = wanted.find((v) => v.label === ANALYTICS_ON);
    if (on && wanted.some((v) => v.label === ANALYTICS_OFF)) {
      const twin = await startGateway(on, upstreamUrl);
      children.push(twin.child);
      targets.push({ label: TWIN, url: twin.rpcUrl, headers: twin.headers, body: on.body ?? BODY, pid: twin.child.pid });
    }
    // Before and after a change: the same pass-through gateway built from another checkout.
    const baseOf = wanted.find((v) => v.label === ANALYTICS_ON);
    if (opt.baseline !== undefined && baseOf) {
      const base = await startGateway({ ...baseOf, label: BASELINE }, upstreamUrl, { cwd: path.resolve(opt.baseline) });
      children.push(base.child);
      targets.push({ label: BASELINE, url: base.rpcUrl, headers: base.headers, body: baseOf.body ?? BODY, pid: base.child.pid, metricsUrl: base.metricsUrl });
    }
    // The cached rows and the pass-through on PostgreSQL + Redis too, each beside the same row
    // built from the other checkout.
    const alsoBeside = [...cached, ...wanted.filter((v) => v.label === ON_POSTGRES)];
    if (opt.baseline !== undefined) for (const v of alsoBeside) await startBaselineOf(v, opt.baseline, upstreamUrl, children, targets);
    // Runtime settings on trial: the same pass-through gateway started with --flags.
    const tuned = opt.flags === undefined ? undefined : `${ANALYTICS_ON}, ${opt.flags}`;
    if (tuned && on) {
      const gw = await startGateway({ ...on, label: tuned, nodeArgs: opt.flags?.split(/\s+/).filter(Boolean) }, upstreamUrl);
      children.push(gw.child);
      targets.push({ label: tuned, url: gw.rpcUrl, headers: gw.headers, body: on.body ?? BODY, pid: gw.child.pid, metricsUrl: gw.metricsUrl });
    }
    // And each cached row, beside the same started without them.
    const tunedCached = opt.flags === undefined ? [] : cached.map((v) => ({ v, label: `${v.label}, ${opt.flags}` }));
    for (const { v, label } of tunedCached) {
      const gw = await startGateway({ ...v, label, nodeArgs: opt.flags?.split(/\s+/).filter(Boolean) }, upstreamUrl);
      children.push(gw.child);
      targets.push({ label, url: gw.rpcUrl, headers: gw.headers, body: v.body ?? BODY, pid: gw.child.pid, metricsUrl: gw.metricsUrl });
    }
    const has = (label: string) => targets.some((t) => t.label === label);
    const comparisons: Comparison[] = [];
    if (has(ANALYTICS_ON)) comparisons.push({ name: `${ANALYTICS_ON} vs ${BARE}`, a: ANALYTICS_ON, b: BARE, goal: { min: 1.0, text: 'pass-through, goal >= 1.0' }, p99Max: 1.2 });
    if (has(ON_POSTGRES)) comparisons.push({ name: `${ON_POSTGRES} vs ${BARE}`, a: ON_POSTGRES, b: BARE, goal: { min: 1.0, text: 'pass-through, goal >= 1.0' }, p99Max: 1.2 });
    for (const v of cached) {
      // The goal is a share of Node's own ceiling (a node:http server answering a fixed body); the
      // bare proxy and nginx are shown beside it for scale.
      if (has(FIXED)) comparisons.push({ name: `${v.label} vs ${FIXED} (the fraction of the ceiling)`, a: v.label, b: FIXED, goal: { min: 0.9, text: 'cached, goal >= 0.9' } });
      comparisons.push({ name: `${v.label} vs ${BARE}`, a: v.label, b: BARE });
      if (has(NGINX)) comparisons.push({ name: `${v.label} vs ${NGINX}`, a: v.label, b: NGINX });
    }
    if (has(ANALYTICS_ON) && has(ANALYTICS_OFF)) comparisons.push({ name: 'analytics on vs off', a: ANALYTICS_ON, b: ANALYTICS_OFF, goal: { min: 0.97, text: 'C46, goal: within 3%' } });
    if (opt.baseline !== undefined) {
      for (const v of alsoBeside) if (has(`${v.label}, ${BASELINE_CHECKOUT}`)) comparisons.push({ name: `${v.label} vs the same built from ${opt.baseline}`, a: v.label, b: `${v.label}, ${BASELINE_CHECKOUT}` });
    }
    if (has(BASELINE)) {
      comparisons.push({ name: `${BASELINE} vs ${BARE}`, a: BASELINE, b: BARE, p99Max: 1.2 });
      comparisons.push({ name: `${ANALYTICS_ON} vs the same built from ${opt.baseline}`, a: ANALYTICS_ON, b: BASELINE });
    }
    if (tuned && has(tuned)) {
      comparisons.push({ name: `${tuned} vs ${BARE}`, a: tuned, b: BARE, goal: { min: 1.0, text: 'pass-through, goal >= 1.0' }, p99Max: 1.2 });
      comparisons.push({ name: `${opt.flags} vs without`, a: tuned, b: ANALYTICS_ON });
    }
    for (const { v, label } of tunedCached) {
      if (has(FIXED)) comparisons.push({ name: `${label} vs ${FIXED} (the fraction of the ceiling)`, a: label, b: FIXED, goal: { min: 0.9, text: 'cached, goal >= 0.9' } });
      comparisons.push({ name: `${opt.flags} vs without (${v.label})`, a: label, b: v.label });
    }
    if (has(TWIN)) comparisons.push({ name: 'identical twin vs analytics on (the resolution of this run)', a: TWIN, b: ANALYTICS_ON });
    return await interleaved(targets, comparisons, { load, connections: CONNECTIONS, rounds, warmupSeconds: 1, seconds: Number(opt['round-seconds']) });
  } finally {
    for (const c of children) await stopChild(c, 10_000);
  }
}

/** Starts `v` built from the checkout `dir` (`--baseline`) as one more target; resolves to its label. */
async function startBaselineOf(v: GatewayVariant, dir: string, upstreamUrl: string, children: Child[], targets: PairTarget[]): Promise<string> {
  const label = `${v.label}, ${BASELINE_CHECKOUT}`;
  const base = await startGateway({ ...v, label }, upstreamUrl, { cwd: path.resolve(dir) });
  children.push(base.child);
  targets.push({ label, url: base.rpcUrl, headers: base.headers, body: v.body ?? BODY, pid: base.child.pid, metricsUrl: base.metricsUrl });
  return label;
}

/** The gateway variants the rounds may run: those `wanted` keeps, `--only` lets through and this machine can run. */
async function variants(wanted: (v: GatewayVariant) => boolean): Promise<GatewayVariant[]> {
  const out: GatewayVariant[] = [];
  for (const v of GATEWAY_VARIANTS) {
    if (!wanted(v) || (opt.only !== undefined && !v.label.includes(opt.only))) continue;
    if (!(await v.skip?.())) out.push(v);
  }
  return out;
}

/** Starts the bare proxy (unless `withBare` is false) and a gateway per variant, side by side; each child joins `children`. */
async function startTargets(upstreamUrl: string, gateways: GatewayVariant[], children: Child[], withBare = true): Promise<PairTarget[]> {
  const targets: PairTarget[] = [];
  if (withBare) {
    const bare = await startScript('bare proxy', 'bare-proxy.ts', [upstreamUrl], 'target');
    children.push(bare.child);
    targets.push({ label: BARE, url: bare.url, headers: {}, body: BODY, pid: bare.child.pid });
  }
  for (const v of gateways) {
    const gw = await startGateway(v, upstreamUrl);
    children.push(gw.child);
    targets.push({ label: v.label, url: gw.rpcUrl, headers: gw.headers, body: v.body ?? BODY, pid: gw.child.pid, metricsUrl: gw.metricsUrl });
  }
  return targets;
}

/**
 * The gateway's tail beside the bare proxy's AT THE SAME LOAD. Closed loop at saturation,
 * p99 follows the CPU per request (latency = connections / throughput); here every target gets the
 * same offered rate, open loop (bench/lib/load/load-open.ts), in interleaved rounds, so what shows in the
 * tail is what holds an answer back (a flush every 500 ms falls in every round), not the throughput.
 * Pass-through on embedded storage and on PostgreSQL (when it answers) against the bare proxy.
 */
async function tail(upstreamUrl: string, closedLoop: ReturnType<typeof pickLoadGenerator>): Promise<string[]> {
  const gateways = await variants((v) => v.label === ANALYTICS_ON || v.label === ON_POSTGRES);
  if (gateways.length === 0) return ['open-loop tail: no gateway row selected (--only)'];
  const loadavg = () => os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const lines = [`load average at the start: ${loadavg()}`];
  const children: Child[] = [];
  try {
    const targets = await startTargets(upstreamUrl, gateways, children);
    // Before and after a change: each gateway row also built from the other checkout, in the same rounds.
    const beside: Array<{ label: string; base: string }> = [];
    if (opt.baseline !== undefined) {
      for (const v of gateways) beside.push({ label: v.label, base: await startBaselineOf(v, opt.baseline, upstreamUrl, children, targets) });
    }
    // Runtime settings on trial (--flags): each gateway row also started with them, in the same rounds.
    const nodeArgs = opt.flags?.split(/\s+/).filter(Boolean);
    const tuned: Array<{ label: string; base: string }> = [];
    if (nodeArgs !== undefined) {
      for (const v of gateways) {
        const label = `${v.label}, ${opt.flags}`;
        const gw = await startGateway({ ...v, label, nodeArgs }, upstreamUrl);
        children.push(gw.child);
        targets.push({ label, url: gw.rpcUrl, headers: gw.headers, body: v.body ?? BODY, pid: gw.child.pid, metricsUrl: gw.metricsUrl });
        tuned.push({ label, base: v.label });
      }
    }
    // Where the offered rate sits: each target's closed-loop throughput, measured now (1 s warm-up, 3 s).
    const capacity: Record<string, number> = {};
    for (const t of targets.slice(0, 2)) {
      const spec = { url: t.url, headers: t.headers, body: t.body, connections: CONNECTIONS };
      await closedLoop.run({ ...spec, seconds: 1 });
      capacity[t.label] = (await closedLoop.run({ ...spec, seconds: 3 })).rps;
    }
    const gatewayRps = capacity[ANALYTICS_ON] ?? capacity[gateways[0]?.label ?? ''] ?? 0;
    const rate = opt['tail-rate'] === 'auto' ? Math.max(100, Math.round(gatewayRps / 2 / 100) * 100) : Number(opt['tail-rate']);
    if (!(rate > 0)) throw new Error('--tail-rate is a number of requests per second, or auto');
    lines.push(
      `closed loop at ${CONNECTIONS} connections, just before: ${Object.entries(capacity).map(([l, r]) => `${l} ${Math.round(r)} req/s`).join(', ')}; ` +
        `offered rate ${rate} req/s = ${Object.entries(capacity).map(([l, r]) => `${(rate / r).toFixed(2)}x ${l === BARE ? 'the bare proxy' : 'the gateway'}'s`).join(', ')}`,
    );
    const comparisons: Comparison[] = gateways.map((g) => ({ name: `${g.label} vs ${BARE}`, a: g.label, b: BARE, p99Max: 1.2 }));
    for (const b of beside) {
      comparisons.push({ name: `${b.base} vs ${BARE}`, a: b.base, b: BARE, p99Max: 1.2 });
      comparisons.push({ name: `${b.label} vs the same built from ${opt.baseline}`, a: b.label, b: b.base });
    }
    for (const t of tuned) {
      comparisons.push({ name: `${t.label} vs ${BARE}`, a: t.label, b: BARE, p99Max: 1.2 });
      comparisons.push({ name: `${t.label} vs the same without them`, a: t.label, b: t.base });
    }
    const rounds = Number(opt['tail-rounds']);
    lines.push(...(await openLoopTail(targets, comparisons, { load: openLoopGenerator(), connections: CONNECTIONS, rounds, warmupSeconds: 1, seconds: Number(opt['tail-seconds']), rate })));
    lines.push(`load average at the end: ${loadavg()}`);
    for (const c of children.splice(0)) await stopChild(c, 10_000);
    for (const g of gateways) lines.push(...(await slowestWaitedOn(upstreamUrl, g, rate)));
    return lines;
  } finally {
    for (const c of children) await stopChild(c, 10_000);
  }
}

/**
 * What the slowest of a gateway's requests waited on at the tail's rate: one more open-loop run
 * with tracing on (C58) for the 1 request in TRACE_EVERY that carries its own sampled traceparent,
 * the spans received here (bench/lib/measures/waited-on.ts); the slowest 1% of those sit at about
 * the p99 of all. Tracing costs CPU, so this run's latencies are a little higher than the rounds';
 * what it shows is where the time of the slow ones goes, beside ordinary ones.
 */
/** One request in this many carries a sampled traceparent in the run that says what the slow ones waited on. */
const TRACE_EVERY = 20;

async function slowestWaitedOn(upstreamUrl: string, variant: GatewayVariant, rate: number): Promise<string[]> {
  const receiver = await startOtlpReceiver();
  let child: Child | undefined;
  try {
    // Only the requests that carry a sampled traceparent are traced (1 in TRACE_EVERY): tracing every
    // one would load the gateway past the rate under test and make the wait it measures.
    const env = { ...variant.env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'parentbased_always_off', OTEL_BSP_SCHEDULE_DELAY: '50' };
    const gw = await startGateway({ ...variant, env }, upstreamUrl);
    child = gw.child;
    const spec = { url: gw.rpcUrl, headers: gw.headers, body: variant.body ?? BODY, connections: CONNECTIONS, rate };
    const open = openLoopGenerator();
    await open.run({ ...spec, seconds: 1 }); // warm-up, untraced
    const prefix = randomBytes(8).toString('hex');
    const result = await open.run({ ...spec, seconds: Number(opt['tail-seconds']), trace: prefix, traceEvery: TRACE_EVERY });
    const slowest = result.open?.slowest ?? [];
    const typical = result.open?.typical ?? [];
    // The spans leave in batches every 50 ms: wait until those of the slowest are in (at most 10 s).
    const byTrace = () => {
      const m = new Map<string, ReceivedSpan[]>();
      for (const sp of receiver.spans) m.set(sp.traceId, [...(m.get(sp.traceId) ?? []), sp]);
      return m;
    };
    for (let waited = 0; waited < 100; waited++) {
      const m = byTrace();
      if (slowest.every((r) => m.get(traceIdOf(prefix, r.index))?.some((sp) => sp.kind === 2))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const m = byTrace();
    const spansOf = (id: string) => m.get(id) ?? [];
    const slow = summarize(slowest, spansOf, prefix);
    const usual = summarize(typical, spansOf, prefix);
    for (const [label, sum] of [['slowest 1% of the traced', slow], ['typical', usual]] as const) {
      record(`open loop, ${rate} req/s, what the requests waited on (tracing on)`, `${variant.label}, ${label}`, {
        latency_median_ms: sum.latencyMs.median,
        ...Object.fromEntries(Object.entries(sum.meanMs).map(([k, v]) => [`${k.replaceAll(/[^a-z]+/g, '_')}_ms`, v])),
        traced: { unit: '', better: 'higher', value: sum.found },
      });
    }
    return [
      `\nwhat the slowest requests of "${variant.label}" waited on, at ${rate} req/s (one more run, 1 request in ${TRACE_EVERY} traced: ` +
        `its p99 ${result.p99Ms.toFixed(2)} ms, p99.9 ${result.p999Ms.toFixed(2)} ms over all requests; mean ms per part, share of the mean latency):`,
      ...describe(`slowest 1% of the traced (about the p99 of all)`, slow),
      ...describe('typical (200 traced, spread over the run)', usual),
    ];
  } finally {
    if (child) await stopChild(child, 10_000);
    await receiver.close();
  }
}

/**
 * C46: recording analytics on vs off, from the two pass-through rows of this run: throughput and
 * the gateway's CPU per request (less disturbed by other work than req/s), at each concurrency.
 */
function analyticsCost(rows: Row[]): string | undefined {
  const lines: string[] = [];
  for (const connections of [CONNECTIONS, MODERATE]) {
    const off = rows.find((r) => r.target === ANALYTICS_OFF && r.connections === connections);
    const on = rows.find((r) => r.target === ANALYTICS_ON && r.connections === connections);
    if (!off || !on || !off.rps || !on.rps) continue;
    const usPerRequest = (r: Row) => (r.cpu.proxy === null ? null : (r.cpu.proxy * 10_000) / r.rps);
    const cpuOff = usPerRequest(off);
    const cpuOn = usPerRequest(on);
    const pct = (a: number, b: number) => `${((a / b - 1) * 100).toFixed(1)}%`;
    lines.push(
      `  ${connections} connections: ${Math.round(on.rps)} vs ${Math.round(off.rps)} req/s (${pct(on.rps, off.rps)})` +
        (cpuOn !== null && cpuOff !== null ? `, gateway CPU ${cpuOn.toFixed(1)} vs ${cpuOff.toFixed(1)} µs per request (${pct(cpuOn, cpuOff)})` : ''),
    );
  }
  return lines.length ? `analytics recording on vs off (goal: pass-through within 3%):\n${lines.join('\n')}` : undefined;
}
