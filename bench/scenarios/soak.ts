// `npm run soak -- --minutes 30`: hours of ordinary traffic, compressed into a run, against the
// compiled gateway on its devnet (16 anvil chains): JSON-RPC over HTTP (single calls and batches,
// every network), WebSocket `newHeads` subscriptions that are closed and opened again, REST reads,
// and webhooks (whale alerts and `webhook.test` events) delivered to a receiver in this process.
// Each `--sample-seconds` (60) it asks the gateway for a full garbage collection (BENCH_GC=1 and
// --expose-gc; src/ops/bench-gc.ts) and samples RSS, JS heap, active handles (its /metrics) and
// the event loop's delay over the interval (prom-client's monitorEventLoopDelay, reset at each
// scrape). It prints a line per sample and, at the end, each figure's growth from the first
// samples after warm-up to the last ones (goal < 5%), the answers by status, the 5xx count and
// the webhooks received. Exits 1 on a 5xx, an error log line, a growth of 5% or more in RSS, heap
// or handles, or webhook events lost.
//
//   npm run soak                          # 30 minutes
//   npm run soak -- --minutes 3 --sample-seconds 20
//   npm run soak -- --minutes 12 --heap-snapshots /tmp/snaps && npm run bench -- heap-diff /tmp/snaps/01.heapsnapshot /tmp/snaps/02.heapsnapshot
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import WebSocket from 'ws';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { type Child, cleanupOnSignals, freePort, ROOT, startChild, tempDir, waitUntil } from '../lib/children.ts';
import { startFlags } from '../lib/targets/gateway.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { record } from '../lib/report/results.ts';

const OPTIONS = {
  minutes: { type: 'string', default: '30' },
  'sample-seconds': { type: 'string', default: '60' },
  'warmup-fraction': { type: 'string', default: '0.2', help: 'the first part of the run not judged: caches, JIT and pools fill up then' },
  'http-workers': { type: 'string', default: '3' },
  'ws-connections': { type: 'string', default: '24' },
  'heap-snapshots': { type: 'string', help: 'a folder: heap snapshots of the gateway at the first judged sample and the last (npm run bench -- heap-diff)' },
} as const;
let opt: Values<typeof OPTIONS>;

export default defineScenario({
  summary: 'hours of ordinary traffic compressed into a run (HTTP, WebSocket, REST, webhooks): growth of RSS, heap, handles',
  options: OPTIONS,
  duration: { option: 'minutes', unit: 'min' },
  run: async (ctx) => {
    opt = ctx.opt;
    MINUTES = Number(opt.minutes);
    SAMPLE_MS = Number(opt['sample-seconds']) * 1000;
    WARMUP = Number(opt['warmup-fraction']);
    SNAPSHOT_DIR = opt['heap-snapshots'] ? path.resolve(opt['heap-snapshots']) : undefined;
    await main();
  },
});

let MINUTES = 30;
let SAMPLE_MS = 60_000;
let WARMUP = 0.2;
const GOAL = 0.05;
let SNAPSHOT_DIR: string | undefined;

interface Network {
  slug: string;
  chainId: number;
}
interface Memory {
  rss: number;
  heapUsed: number;
  snapshot?: string;
}
interface Sample {
  at: number;
  rss: number;
  heapUsed: number;
  handles: number;
  /** Active handles by kind (Socket, Server, Timer...), to tell connections from leaks. */
  handlesByType: Record<string, number>;
  /** The gateway's established TCP connections by peer: "in" (to its port) or the peer's port. */
  connections: Record<string, number>;
  loopP99Ms: number;
  loopMaxMs: number;
  calls: number;
}

const statuses = new Map<number, number>();
const inc = <K>(m: Map<K, number>, k: K) => m.set(k, (m.get(k) ?? 0) + 1);
const fiveHundreds: string[] = [];
let calls = 0;
let notifications = 0;
let wsReconnects = 0;
let wsUnexpectedCloses = 0;
let stopping = false;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function request(url: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(url, init);
  inc(statuses, res.status);
  calls++;
  if (res.status >= 500) fiveHundreds.push(`${init.method ?? 'GET'} ${new URL(url).pathname.replace(/\/[0-9a-f]{32,}$/, '/<key>')}: ${res.status} ${(await res.clone().text()).slice(0, 600)}`);
  return res;
}

async function postJson<T>(url: string, body: unknown, headers: Record<string, string> = {}, method = 'POST'): Promise<T> {
  const res = await request(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** A webhook receiver: counts events by webhook-id (a redelivery is not a new event). */
async function startReceiver(): Promise<{ url: string; ids: Set<string>; deliveries: () => number; close: () => void }> {
  const ids = new Set<string>();
  let deliveries = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      deliveries++;
      const id = req.headers['webhook-id'];
      if (typeof id === 'string') ids.add(id);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, ids, deliveries: () => deliveries, close: () => server.close() };
}

async function startGateway(): Promise<{ child: Child; url: string; adminToken: string; errorLines: string[]; memory: () => Promise<Memory> }> {
  const built = await build();
  console.log(`dist/: ${built.built} file(s) built`);
  const port = await freePort();
  const adminToken = randomBytes(16).toString('hex');
  const configFile = path.join(tempDir('soak-config'), 'config.json');
  // A whale transfer every 5 s on each native chain (webhook events); limits out of the way.
  writeFileSync(configFile, JSON.stringify({ devnet: { whaleEverySeconds: 5 }, limits: { registrationsPerHour: 1_000_000 } }));
  const child = startChild('gateway --devnet', process.execPath, [...startFlags(ROOT), '--expose-gc', 'dist/main.js', '--devnet'], {
    role: 'target',
    env: {
      ...process.env,
      DATABASE_URL: undefined,
      REDIS_URL: undefined,
      METRICS_TOKEN: undefined,
      METRICS_PORT: undefined,
      GATEWAY_CONFIG: configFile,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: tempDir('soak-data'),
      LOG_LEVEL: 'info',
      ADMIN_TOKEN: adminToken,
      BENCH_GC: '1',
      BENCH_HEAP_SNAPSHOT_DIR: SNAPSHOT_DIR,
    },
  });
  const errorLines: string[] = [];
  const memoryWaiters: ((m: Memory) => void)[] = [];
  let partialOut = '';
  child.proc.stdout?.on('data', (d: Buffer) => {
    const lines = (partialOut + d.toString()).split('\n');
    partialOut = lines.pop() ?? '';
    for (const l of lines) if (/"level":(50|60)\b/.test(l)) errorLines.push(l);
  });
  let partialErr = '';
  child.proc.stderr?.on('data', (d: Buffer) => {
    const lines = (partialErr + d.toString()).split('\n');
    partialErr = lines.pop() ?? '';
    for (const l of lines) if (l.startsWith('bench-memory ')) memoryWaiters.shift()?.(JSON.parse(l.slice('bench-memory '.length)));
  });
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(child, 'readiness (devnet chains up)', async () => (await fetch(`${url}/health/ready`)).ok, 240_000);
  const memory = () =>
    new Promise<Memory>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the gateway printed no memory figure (BENCH_GC=1 and --expose-gc?)')), SNAPSHOT_DIR ? 120_000 : 10_000);
      memoryWaiters.push((m) => {
        clearTimeout(timer);
        resolve(m);
      });
      child.proc.kill('SIGUSR2');
    });
  return { child, url, adminToken, errorLines, memory };
}

/** The established TCP connections of a process, from `ss`: "in" for those to `port`, else by the peer's port. */
function connectionsOf(pid: number, port: number): Record<string, number> {
  const out: Record<string, number> = {};
  let text = '';
  try {
    text = execFileSync('ss', ['-tnpH', 'state', 'established'], { encoding: 'utf8' });
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    const [, , local, peer] = line.trim().split(/\s+/);
    const group = local?.endsWith(`:${port}`) ? 'in' : `:${peer?.split(':').at(-1)}`;
    out[group] = (out[group] ?? 0) + 1;
  }
  return out;
}

/** The value of an unlabelled series in Prometheus' text format. */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name} ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function httpWorker(url: string, key: string, networks: Network[], seed: number): Promise<void> {
  const methods = [
    { method: 'eth_blockNumber', params: [] },
    { method: 'eth_chainId', params: [] },
    { method: 'eth_getBalance', params: ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest'] },
    { method: 'eth_getBlockByNumber', params: ['latest', false] },
    { method: 'eth_gasPrice', params: [] },
  ];
  for (let i = seed; !stopping; i++) {
    const net = networks[i % networks.length] as Network;
    const body =
      i % 7 === 0
        ? methods.map((m, j) => ({ jsonrpc: '2.0', id: j, ...m }))
        : { jsonrpc: '2.0', id: i, ...(methods[i % methods.length] as (typeof methods)[number]) };
    try {
      const res = await request(`${url}/v1/${net.slug}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      await res.arrayBuffer();
    } catch (err) {
      if (!stopping) fiveHundreds.push(`HTTP ${net.slug}: ${(err as Error).message}`);
    }
    await sleep(20);
  }
}

/** One subscriber: newHeads on a network; every `lifeMs` it closes and subscribes again. */
async function wsWorker(url: string, key: string, net: Network, lifeMs: number): Promise<void> {
  while (!stopping) {
    await new Promise<void>((resolve) => {
      const ws = new WebSocket(`${url.replace('http', 'ws')}/ws/${net.slug}?apiKey=${key}`);
      let closedByUs = false;
      const timer = setTimeout(() => {
        closedByUs = true;
        ws.close();
      }, lifeMs);
      ws.on('open', () => ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] })));
      ws.on('message', (data) => {
        if ((data as Buffer).toString().includes('eth_subscription')) notifications++;
      });
      ws.on('error', () => {});
      ws.on('close', () => {
        clearTimeout(timer);
        if (!closedByUs && !stopping) wsUnexpectedCloses++;
        resolve();
      });
    });
    wsReconnects++;
    if (!stopping) await sleep(200);
  }
}

async function restWorker(url: string, bearer: Record<string, string>, webhookId: string, login: () => Promise<string>): Promise<void> {
  let loggedInAt = Date.now();
  const paths = ['/api/v1/usage/stats', '/api/v1/api-keys', '/api/v1/networks', '/api/v1/whale-alerts?limit=5', `/api/v1/webhooks/${webhookId}/deliveries?limit=5`, '/api/v1/auth/me'];
  for (let i = 0; !stopping; i++) {
    try {
      // Access tokens live 15 minutes (auth.accessTokenTtlSeconds): a new one every 10, as a dashboard does.
      if (Date.now() - loggedInAt > 600_000) {
        bearer.authorization = `Bearer ${await login()}`;
        loggedInAt = Date.now();
      }
      const res = await request(`${url}${paths[i % paths.length]}`, { headers: bearer });
      await res.arrayBuffer();
      // A webhook.test event every 30 requests (about one a minute).
      if (i % 30 === 0) await postJson(`${url}/api/v1/webhooks/${webhookId}/test`, {}, bearer);
    } catch (err) {
      if (!stopping) fiveHundreds.push(`REST: ${(err as Error).message}`);
    }
    await sleep(2000);
  }
}

const mib = (b: number) => (b / 1_048_576).toFixed(1);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

async function main(): Promise<void> {
  cleanupOnSignals();
  if (SNAPSHOT_DIR) mkdirSync(SNAPSHOT_DIR, { recursive: true });
  const receiver = await startReceiver();
  const gw = await startGateway();
  const { url } = gw;
  const credentials = { email: `soak-${Date.now()}@example.com`, password: 'soak password 123' };
  const session = await postJson<{ data: { user: { id: string }; tokens: { accessToken: string } } }>(`${url}/api/v1/auth/register`, { ...credentials, name: 'Soak' });
  const login = async () => (await postJson<{ data: { tokens: { accessToken: string } } }>(`${url}/api/v1/auth/login`, credentials)).data.tokens.accessToken;
  // The enterprise plan: webhooks, every network, no limits (the soak is about memory, not limits).
  await postJson(`${url}/api/v1/admin/users/${session.data.user.id}`, { tier: 'enterprise' }, { 'x-admin-token': gw.adminToken }, 'PATCH');
  const bearer: Record<string, string> = { authorization: `Bearer ${session.data.tokens.accessToken}` };
  const key = (await postJson<{ data: { key: string } }>(`${url}/api/v1/api-keys`, { name: 'soak' }, bearer)).data.key;
  const networks = ((await (await request(`${url}/api/v1/networks`)).json()) as { data: Network[] }).data;
  const hook = (await postJson<{ data: { id: string } }>(`${url}/api/v1/webhooks`, { url: receiver.url, events: ['whale.alert', 'webhook.test'] }, bearer)).data;

  const wsCount = Number(opt['ws-connections']);
  console.log(
    `soak: ${MINUTES} min against ${url} (devnet, ${networks.length} networks): ${opt['http-workers']} HTTP callers, ${wsCount} WebSocket subscribers ` +
      `(each reconnects every 60-120 s), REST every 2 s, whale alerts every 5 s to a webhook; a sample every ${SAMPLE_MS / 1000} s after a full GC`,
  );
  const workers: Promise<void>[] = [];
  for (let i = 0; i < Number(opt['http-workers']); i++) workers.push(httpWorker(url, key, networks, i * 1000));
  for (let i = 0; i < wsCount; i++) workers.push(wsWorker(url, key, networks[i % networks.length] as Network, 60_000 + ((i * 2_500) % 60_000)));
  workers.push(restWorker(url, bearer, hook.id, login));

  const samples: Sample[] = [];
  const started = Date.now();
  const end = started + MINUTES * 60_000;
  console.log('\n  min    RSS MiB  heap MiB  handles  loop p99 ms  loop max ms   calls');
  while (Date.now() < end) {
    await sleep(Math.min(SAMPLE_MS, end - Date.now()));
    // A snapshot with the first judged sample and with the last: the gateway writes one when it finds `next`.
    const firstJudged = !samples.some((p) => p.at >= MINUTES * WARMUP) && Date.now() - started >= MINUTES * WARMUP * 60_000;
    if (SNAPSHOT_DIR && (firstJudged || Date.now() >= end - 1_000)) writeFileSync(path.join(SNAPSHOT_DIR, 'next'), '');
    const mem = await gw.memory();
    if (mem.snapshot) console.log(`  (heap snapshot ${mem.snapshot})`);
    const text = await (await fetch(`${url}/metrics`)).text();
    const s: Sample = {
      at: (Date.now() - started) / 60_000,
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      handles: metric(text, 'junction_nodejs_active_handles_total'),
      connections: connectionsOf(gw.child.proc.pid as number, Number(new URL(url).port)),
      handlesByType: Object.fromEntries([...text.matchAll(/^junction_nodejs_active_handles\{type="([^"]+)"\} ([0-9]+)$/gm)].map((m) => [m[1] as string, Number(m[2])])),
      loopP99Ms: metric(text, 'junction_nodejs_eventloop_lag_p99_seconds') * 1000,
      loopMaxMs: metric(text, 'junction_nodejs_eventloop_lag_max_seconds') * 1000,
      calls,
    };
    samples.push(s);
    console.log(
      `  ${s.at.toFixed(1).padStart(4)}  ${mib(s.rss).padStart(9)}  ${mib(s.heapUsed).padStart(8)}  ${String(s.handles).padStart(7)}  ${s.loopP99Ms.toFixed(1).padStart(11)}  ${s.loopMaxMs.toFixed(1).padStart(11)}  ${String(s.calls).padStart(6)}`,
    );
  }
  stopping = true;
  await Promise.race([Promise.all(workers), sleep(15_000)]);
  // Deliveries still in flight: a few seconds for the last ones.
  await sleep(5_000);
  bearer.authorization = `Bearer ${await login()}`;
  const deliveries = (await postJson<{ data: { eventId: string; status: string }[] }>(`${url}/api/v1/webhooks/${hook.id}/deliveries?limit=100`, undefined, bearer, 'GET')).data;
  const pendingOrFailed = deliveries.filter((d) => d.status !== 'delivered');

  // Growth: the median of the first three samples after warm-up against the median of the last three.
  const judged = samples.filter((s) => s.at >= MINUTES * WARMUP);
  const first = judged.slice(0, 3);
  const last = judged.slice(-3);
  const failures: string[] = [];
  console.log(`\ngrowth after warm-up (${(WARMUP * 100).toFixed(0)}% of the run), median of the first 3 judged samples -> median of the last 3 (goal < 5%):`);
  for (const [label, pick, judgedFigure] of [
    ['RSS', (s: Sample) => s.rss, true],
    ['JS heap after GC', (s: Sample) => s.heapUsed, true],
    ['active handles', (s: Sample) => s.handles, true],
    ['event-loop delay p99', (s: Sample) => s.loopP99Ms, false],
  ] as const) {
    if (first.length === 0 || last.length === 0) break;
    const a = median(first.map(pick));
    const b = median(last.map(pick));
    const growth = (b - a) / a;
    const ok = growth < GOAL;
    const unit = label === 'RSS' || label.startsWith('JS') ? 'MiB' : label.includes('delay') ? 'ms' : 'handles';
    const scale = unit === 'MiB' ? 1 / 1_048_576 : 1;
    record('after warm-up', label, {
      samples: { unit, better: 'lower', value: judged.map((x) => pick(x) * scale) },
      growth_pct: { unit: '%', better: 'lower', value: growth * 100 },
    });
    if (judgedFigure && !ok) failures.push(`${label} grew ${(growth * 100).toFixed(1)}%`);
    const show = (v: number) => (label === 'RSS' || label.startsWith('JS') ? `${mib(v)} MiB` : v.toFixed(label.includes('delay') ? 1 : 0));
    console.log(`  ${label}: ${show(a)} -> ${show(b)} (${growth >= 0 ? '+' : ''}${(growth * 100).toFixed(1)}%)${judgedFigure ? (ok ? ' OK' : ' ABOVE') : ' (reported: it follows the machine\'s other work)'}`);
  }
  const byType = (s: Sample | undefined) => (s ? Object.entries(s.handlesByType).map(([t, n]) => `${t} ${n}`).join(', ') : '');
  console.log(`  active handles by kind, first judged sample: ${byType(first[0])}; last: ${byType(last.at(-1))}`);
  const peers = (s: Sample | undefined) => (s ? Object.entries(s.connections).sort((x, y) => y[1] - x[1]).map(([t, n]) => `${t} ${n}`).join(', ') : '');
  console.log(`  TCP connections by peer ("in": callers), first judged sample: ${peers(first[0])}; last: ${peers(last.at(-1))}`);
  const minutes = (Date.now() - started) / 60_000;
  console.log(`\nanswers by HTTP status: ${[...statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}: ${n}`).join(', ')} (${(calls / minutes / 60).toFixed(0)} per second)`);
  console.log(`5xx and failed requests: ${fiveHundreds.length}${fiveHundreds.length ? `\n  ${fiveHundreds.slice(0, 10).join('\n  ')}` : ''}`);
  console.log(`WebSocket: ${notifications} notifications, ${wsReconnects} reconnects, ${wsUnexpectedCloses} closed by the gateway`);
  console.log(`webhooks: ${receiver.ids.size} events received (${receiver.deliveries()} deliveries); of the newest ${deliveries.length}, ${pendingOrFailed.length} not delivered`);
  console.log(`gateway error log lines: ${gw.errorLines.length}${gw.errorLines.length ? `\n  ${gw.errorLines.slice(0, 5).join('\n  ')}` : ''}`);
  if (fiveHundreds.length) failures.push(`${fiveHundreds.length} 5xx or failed requests`);
  if (gw.errorLines.length) failures.push(`${gw.errorLines.length} error log lines`);
  if (wsUnexpectedCloses) failures.push(`${wsUnexpectedCloses} WebSocket connections closed by the gateway`);
  if (receiver.ids.size === 0) failures.push('no webhook event received');
  if (pendingOrFailed.some((d) => d.status === 'failed')) failures.push('webhook deliveries failed');
  receiver.close();
  console.log(failures.length ? `\nFAILED: ${failures.join('; ')}` : '\nOK');
  process.exitCode = failures.length ? 1 : 0;
}
