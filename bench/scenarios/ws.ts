// `npm run bench:ws`: WebSocket subscribers at one instance's limit. The compiled gateway
// (dist/main.js, as `npm start` runs it) in its own process; in front of it a scripted fake node
// (this process) that emits newHeads and logs at a set pace, with its send time (process.hrtime,
// one clock for every process of the machine) in each notification; the clients in several child
// processes (bench/lib/load/ws-clients.ts), every one on newHeads and a third on logs too. Prints the delay
// from the node's send to the last client's receipt per notification, the connection set-up time,
// the gateway's RSS per connection after a full GC (BENCH_GC=1 + --expose-gc: SIGUSR2, see
// src/ops/bench-gc.ts), and the gateway's CPU.
//
//   npm run bench -- ws --connections 18000 --processes 5 --notifications 30 --interval 1000
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { cpuSeconds } from '../lib/measures/cpu.ts';
import { type Child, cleanup, cleanupOnSignals, pinCpus, removeStaleTempDirs, ROOT } from '../lib/children.ts';
import { startGateway } from '../lib/targets/gateway.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { record } from '../lib/report/results.ts';

const OPTIONS = {
  connections: { type: 'string', default: '18000' },
  processes: { type: 'string', default: '5' },
  notifications: { type: 'string', default: '30' },
  interval: { type: 'string', default: '1000' }, // milliseconds between blocks
  'logs-every': { type: 'string', default: '3' }, // every n-th client also subscribes to logs
  concurrency: { type: 'string', default: '50' }, // connections being opened at once, per client process
  'source-addresses': { type: 'string', default: '4' }, // 127.0.0.1 .. 127.0.0.n
  'no-build': { type: 'boolean', default: false },
  pin: { type: 'boolean', default: false }, // the gateway alone on the last CPU, the clients and the node on the others (taskset)
  perf: { type: 'string' }, // a file: the gateway is sampled with `perf record -g` while it notifies (root, or perf_event_paranoid <= 1)
} as const;
let opt: Values<typeof OPTIONS>;

export default defineScenario({
  summary: 'WebSocket subscribers at one instance limit: fan-out delay, set-up, RSS per connection, gateway CPU',
  options: OPTIONS,
  run: async (ctx) => {
    opt = ctx.opt;
    connections = Number(opt.connections);
    processes = Number(opt.processes);
    notifications = Number(opt.notifications);
    intervalMs = Number(opt.interval);
    logsEvery = Number(opt['logs-every']);
    await main();
  },
});

const NETWORK = 'native-mainnet';
const TIME_LIMIT_MS = 300_000;
const LOG_ADDRESS = '0x00000000000000000000000000000000000b3c4d';
const ms = (ns: number) => ns / 1e6;
const hex = (n: number | bigint) => `0x${n.toString(16)}`;
const now = () => process.hrtime.bigint();
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;
/** User and system CPU seconds of one process (all its threads). */
function userSys(pid: number): { user: number; sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return { user: (f[11] ?? 0) / CLK_TCK, sys: (f[12] ?? 0) / CLK_TCK };
}

let connections = 18_000;
let processes = 5;
let notifications = 30;
let intervalMs = 1000;
let logsEvery = 3;

/** The scripted node: JSON-RPC over HTTP (fixed answers, for the gateway's probes) and WebSocket subscriptions. */
async function startFakeNode() {
  const body = Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1234"}');
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body));
  });
  const wss = new WebSocketServer({ server, perMessageDeflate: false });
  const subs = { newHeads: new Map<string, WebSocket>(), logs: new Map<string, WebSocket>() };
  let subscribes = 0;
  wss.on('connection', (ws) => {
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as { id: number; method: string; params: unknown[] };
      let result: unknown = '0x1234';
      if (m.method === 'eth_subscribe') {
        subscribes++;
        const id = hex(0xabc000 + subscribes);
        (m.params[0] === 'logs' ? subs.logs : subs.newHeads).set(id, ws);
        result = id;
      } else if (m.method === 'eth_unsubscribe') {
        subs.newHeads.delete(m.params[0] as string);
        subs.logs.delete(m.params[0] as string);
        result = true;
      }
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const emit = (kind: 'newHeads' | 'logs', result: (sentHex: string) => string): void => {
    for (const [id, ws] of subs[kind]) {
      const sent = hex(now());
      ws.send(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":${result(sent)}}}`);
    }
  };
  return {
    httpUrl: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    subscribes: () => subscribes,
    /** One block: its header to newHeads, one log of it to logs. The send time is in extraData and in the log's data. */
    block(n: number): void {
      const hash = `0x${n.toString(16).padStart(64, '0')}`;
      emit('newHeads', (sent) =>
        JSON.stringify({
          number: hex(n), hash, parentHash: `0x${(n - 1).toString(16).padStart(64, '0')}`, miner: '0x0000000000000000000000000000000000000000',
          stateRoot: `0x${'ab'.repeat(32)}`, transactionsRoot: `0x${'cd'.repeat(32)}`, receiptsRoot: `0x${'ef'.repeat(32)}`, logsBloom: `0x${'00'.repeat(256)}`,
          gasLimit: '0x1c9c380', gasUsed: '0x5208', timestamp: hex(Math.floor(Date.now() / 1000)), baseFeePerGas: '0x7', extraData: sent,
        }),
      );
      emit('logs', (sent) =>
        JSON.stringify({
          address: LOG_ADDRESS, topics: [`0x${'dd'.repeat(32)}`], data: sent, blockNumber: hex(n), blockHash: hash,
          transactionHash: `0x${(n + 7).toString(16).padStart(64, '0')}`, transactionIndex: '0x0', logIndex: '0x0', removed: false,
        }),
      );
    },
    close: () => {
      for (const c of wss.clients) c.terminate();
      server.closeAllConnections();
      server.close();
    },
  };
}

interface Report {
  received: Array<{ sent: string; kind: 'newHeads' | 'logs'; count: number; maxNs: number }>;
  buckets: Array<[number, number]>;
  unexpected: number;
  closedEarly: number;
}

/** The client processes, each under this machine's open-file limit. */
function startClients(n: number): ChildProcess[] {
  return Array.from({ length: n }, () =>
    fork(path.join(ROOT, 'bench', 'lib', 'load', 'ws-clients.ts'), [], { cwd: ROOT, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
}
const next = <T>(c: ChildProcess, type: string) =>
  new Promise<T>((resolve, reject) => {
    const on = (m: { type: string }) => {
      if (m.type !== type) return;
      c.off('message', on);
      resolve(m as T);
    };
    c.on('message', on);
    c.once('exit', (code) => reject(new Error(`a client process exited (${code}) before "${type}"`)));
  });

/** Asks the gateway for a full GC and its memory (src/ops/bench-gc.ts). */
async function gatewayMemory(gw: Child): Promise<{ rss: number; heapUsed: number; external: number; arrayBuffers: number; connections: number; framesBuilt: number; hubs: Array<Record<string, number | string>> }> {
  const lines = () => gw.output().split('\n').filter((l) => l.startsWith('bench-memory '));
  const count = lines().length;
  gw.proc.kill('SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const now = lines();
    if (now.length > count) return JSON.parse((now.at(-1) as string).slice('bench-memory '.length));
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the gateway printed no memory figure (started with BENCH_GC=1 and --expose-gc?):\n${gw.output().slice(-2000)}`);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

async function main(): Promise<void> {
  removeStaleTempDirs();
  cleanupOnSignals();
  const limit = setTimeout(() => {
    console.error(`bench:ws: still running after ${TIME_LIMIT_MS / 1000} s; giving up`);
    void cleanup().then(() => process.exit(1));
  }, TIME_LIMIT_MS);
  limit.unref();
  if (!opt['no-build']) {
    const b = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
    if (b.status !== 0) throw new Error('build failed');
  }
  const perProcess = Math.ceil(connections / processes);
  const nofile = Number(spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (connections + 200 > nofile) console.warn(`warning: ${connections} connections against an open-file limit of ${nofile} per process: the gateway will refuse some`);

  const pinned = pinCpus(opt.pin);
  if (pinned) spawnSync('taskset', ['-pc', os.availableParallelism() === 2 ? '0' : `0-${os.availableParallelism() - 2}`, String(process.pid)], { stdio: 'ignore' });
  const node = await startFakeNode();
  const clientProcs = startClients(processes); // forked after the pinning: they inherit it
  try {
    const gw = await startGateway({ label: 'gateway', env: { UPSTREAM_WS_NATIVE_MAINNET: node.wsUrl, BENCH_GC: '1' } }, node.httpUrl, { nodeArgs: ['--expose-gc'] });
    const url = `${gw.url.replace('http', 'ws')}/ws/${NETWORK}?apiKey=${gw.headers['x-api-key']}`;
    await Promise.all(clientProcs.map((c) => next(c, 'ready')));
    await new Promise((r) => setTimeout(r, 1_000)); // the gateway's own newHeads follower has subscribed
    const before = await gatewayMemory(gw.child);

    // Set-up: every client process opens its share at once.
    const sources = Array.from({ length: Number(opt['source-addresses']) }, (_, i) => `127.0.0.${i + 1}`);
    const cpu0 = cpuSeconds(gw.child.pid);
    const t0 = performance.now();
    const opened = clientProcs.map((c, i) => {
      const first = i * perProcess;
      const count = Math.max(0, Math.min(perProcess, connections - first));
      c.send({ type: 'init', url, first, count, logsEvery, logsFilter: { address: LOG_ADDRESS }, localAddresses: sources, concurrency: Number(opt.concurrency) });
      return next<{ ms: number; failures: number; firstFailure?: string }>(c, 'opened');
    });
    const openResults = await Promise.all(opened);
    const setupMs = performance.now() - t0;
    const setupCpu = cpuSeconds(gw.child.pid) - cpu0;
    const failures = openResults.reduce((a, r) => a + r.failures, 0);
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await gatewayMemory(gw.child);

    // Notifications at a set pace.
    const load0 = os.loadavg();
    const cpu1 = cpuSeconds(gw.child.pid);
    const us1 = userSys(gw.child.pid);
    const perf = opt.perf ? spawn('perf', ['record', '-g', '-q', '-o', opt.perf, '-p', String(gw.child.pid)], { stdio: 'ignore' }) : undefined;
    const t1 = performance.now();
    for (let n = 1; n <= notifications; n++) {
      node.block(n);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    const notifyMs = performance.now() - t1;
    const notifyCpu = cpuSeconds(gw.child.pid) - cpu1;
    const us2 = userSys(gw.child.pid);
    if (perf) {
      perf.kill('SIGINT');
      await once(perf, 'exit');
    }
    const kernelShare = (us2.sys - us1.sys) / (us2.user - us1.user + us2.sys - us1.sys);
    await new Promise((r) => setTimeout(r, 1_000));
    const reports = await Promise.all(
      clientProcs.map((c) => {
        const p = next<Report>(c, 'report');
        c.send({ type: 'report' });
        return p;
      }),
    );
    const final = await gatewayMemory(gw.child);

    // Per notification: the last client's delay, summed over the processes.
    const byNote = new Map<string, { kind: string; count: number; maxNs: number }>();
    const buckets = new Map<number, number>();
    for (const r of reports) {
      for (const x of r.received) {
        const t = byNote.get(x.sent) ?? { kind: x.kind, count: 0, maxNs: 0 };
        t.count += x.count;
        t.maxNs = Math.max(t.maxNs, x.maxNs);
        byNote.set(x.sent, t);
      }
      for (const [b, n] of r.buckets) buckets.set(b, (buckets.get(b) ?? 0) + n);
    }
    const logsClients = Math.ceil(connections / logsEvery);
    const summary = (kind: 'newHeads' | 'logs', expected: number) => {
      const notes = [...byNote.values()].filter((x) => x.kind === kind);
      const last = notes.map((x) => ms(x.maxNs));
      const missing = notes.length === 0 ? expected * notifications : notes.reduce((a, x) => a + (expected - x.count), 0) + (notifications - notes.length) * expected;
      return { last, missing };
    };
    const heads = summary('newHeads', connections);
    const logs = summary('logs', logsClients);
    let total = 0;
    for (const n of buckets.values()) total += n;
    let seen = 0;
    let medianAll = Number.NaN;
    for (const [b, n] of [...buckets].sort((a, c) => a[0] - c[0])) {
      seen += n;
      if (seen >= total / 2) {
        medianAll = b / 10;
        break;
      }
    }
    const perConn = (a: number, b: number) => (b - a) / connections / 1024;
    const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;
    const f = (x: number) => `${x.toFixed(1)} ms`;
    const subscribers = connections + logsClients;
    const frames = final.framesBuilt - after.framesBuilt;
    const hubOf = (m: typeof after) => m.hubs.find((h) => h.network === NETWORK) ?? {};
    const fanoutMs = ((Number(hubOf(final).deliverSeconds) - Number(hubOf(after).deliverSeconds)) * 1000) / (2 * notifications);
    const rssPerConn = perConn(before.rss, after.rss);

    console.log(`WebSocket fan-out: ${connections} clients in ${processes} processes on ${NETWORK} (every one on newHeads, ${logsClients} on logs too), ${notifications} blocks ${intervalMs} ms apart`);
    if (pinned) console.log(`  pinned                                ${pinned}`);
    console.log(`  machine                               ${os.cpus().length} CPUs, load average ${load0.map((x) => x.toFixed(2)).join(' ')} (1/5/15 min, before the notifications), open files per process ${nofile}`);
    console.log(`  connections open and subscribed       ${after.connections} of ${connections} (${failures} failed) in ${(setupMs / 1000).toFixed(1)} s: ${(connections / (setupMs / 1000)).toFixed(0)}/s, gateway CPU ${setupCpu.toFixed(1)} s (${((setupCpu * 1e6) / connections).toFixed(0)} µs per connection)`);
    console.log(`  upstream eth_subscribe calls          ${node.subscribes()} (newHeads, logs) for ${subscribers} client subscriptions`);
    console.log(`  frames serialised per notification    ${(frames / (2 * notifications)).toFixed(2)} (${frames} for ${2 * notifications} notifications to ${subscribers} subscriptions)`);
    console.log(`  gateway RSS after a full GC           ${mib(before.rss)} -> ${mib(after.rss)} (${mib(final.rss)} after the notifications)`);
    console.log(`  RSS per connection                    ${rssPerConn.toFixed(2)} KiB`);
    console.log(`  JS heap per connection                ${perConn(before.heapUsed, after.heapUsed).toFixed(2)} KiB; external + array buffers ${perConn(before.external + before.arrayBuffers, after.external + after.arrayBuffers).toFixed(2)} KiB`);
    console.log(`  gateway CPU while notifying           ${((notifyCpu / (notifyMs / 1000)) * 100).toFixed(0)}% of one core: ${((notifyCpu * 1000) / notifications).toFixed(1)} ms per block (${subscribers} frames), ${((notifyCpu * 1e9) / notifications / subscribers).toFixed(0)} ns per frame; ${(kernelShare * 100).toFixed(0)}% of it in the kernel`);
    console.log(`  gateway fan-out per notification      ${f(fanoutMs)} on average (the hub's loop over the topic's subscribers: ${((fanoutMs * 2e6) / subscribers).toFixed(0)} ns per frame)`);
    console.log(`  newHeads node -> last client          p50 ${f(pct(heads.last, 50))}, p99 ${f(pct(heads.last, 99))}, max ${f(Math.max(...heads.last))}`);
    console.log(`  logs node -> last client              p50 ${f(pct(logs.last, 50))}, p99 ${f(pct(logs.last, 99))}, max ${f(Math.max(...logs.last))}`);
    console.log(`  node -> client, all deliveries        p50 ${medianAll.toFixed(1)} ms`);
    console.log(`  notifications missing                 newHeads ${heads.missing}, logs ${logs.missing}; connections closed early ${reports.reduce((a, r) => a + r.closedEarly, 0)}`);
    record('subscribers', `${connections} connections, ${processes} client processes`, {
      setup_per_s: connections / (setupMs / 1000),
      setup_cpu_per_connection_us: (setupCpu * 1e6) / connections,
      rss_per_connection_kib: { unit: 'KiB', better: 'lower', value: rssPerConn },
      notify_cpu_per_frame_ns: (notifyCpu * 1e9) / notifications / subscribers,
      fanout_ms: fanoutMs,
      newheads_last_client_p50_ms: pct(heads.last, 50),
      newheads_last_client_p99_ms: pct(heads.last, 99),
      logs_last_client_p99_ms: pct(logs.last, 99),
      missing: { unit: 'notifications', better: 'lower', value: heads.missing + logs.missing },
    });
    const p99 = Math.max(pct(heads.last, 99), pct(logs.last, 99));
    const verdicts: Array<[string, boolean]> = [
      [`all ${connections} connections subscribed`, failures === 0 && after.connections === connections],
      ['every notification reached every subscriber', heads.missing === 0 && logs.missing === 0],
      ['one upstream subscription per topic (2)', node.subscribes() === 2],
      ['one frame serialised per notification and topic', frames === 2 * notifications],
      ['node -> last client p99 < 100 ms', p99 < 100],
      ['RSS per connection <= 4 KiB', rssPerConn <= 4],
    ];
    for (const [what, ok] of verdicts) console.log(`  ${ok ? 'PASS' : 'FAIL'} ${what}`);
    if (verdicts.some(([, ok]) => !ok)) process.exitCode = 1;
  } finally {
    for (const c of clientProcs) if (c.connected) c.send({ type: 'close' });
    await Promise.all(clientProcs.map((c) => (c.exitCode === null ? Promise.race([once(c, 'exit'), new Promise((r) => setTimeout(r, 3_000))]) : Promise.resolve())));
    for (const c of clientProcs) if (c.exitCode === null) c.kill('SIGKILL');
    await cleanup();
    node.close();
    clearTimeout(limit);
  }
}

