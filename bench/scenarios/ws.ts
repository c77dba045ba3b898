// `npm run bench:ws`: WebSocket subscribers at one instance's limit, against a yardstick. A scripted
// fake node (this process) emits newHeads and logs at a set pace, with its send time
// (process.hrtime, one clock for every process of the machine) in each notification; the clients
// in several child processes (bench/lib/load/ws-clients.ts), every one on newHeads and a third on
// logs too. The same client processes subscribe, in turns, through the compiled gateway
// (dist/main.js, as `npm start` runs it; `--workers N`: WORKERS=N) and through a bare `ws`
// broadcaster (bench/lib/targets/bare-broadcaster.ts: one frame per notification and topic,
// written to every client, the floor of a Node.js fan-out), each started afresh for its turn.
// Prints per turn the delay from the node's send to the last client's receipt per notification,
// the connection set-up time, the target's RSS per connection after a full GC (BENCH_GC=1 +
// --expose-gc: SIGUSR2, see src/ops/bench-gc.ts), its CPU; then the medians of the rounds and the
// gateway's p99 over the bare broadcaster's (goal <= 1.2x).
//
//   npm run bench -- ws --connections 18000 --processes 5 --notifications 30 --interval 1000
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { seedDataDir } from '../../test/support/process.ts';
import { cpuSeconds, processTree, userSystemSeconds } from '../lib/measures/cpu.ts';
import { hotFunctions } from '../lib/measures/profile.ts';
import { type Child, cleanup, cleanupOnSignals, pinCpus, removeStaleTempDirs, ROOT, startScript, stopChild, tempDir } from '../lib/children.ts';
import { startGateway } from '../lib/targets/gateway.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { median, record } from '../lib/report/results.ts';

const OPTIONS = {
  connections: { type: 'string', default: '18000' },
  processes: { type: 'string', default: '5' },
  notifications: { type: 'string', default: '30' },
  interval: { type: 'string', default: '1000' }, // milliseconds between blocks
  'logs-every': { type: 'string', default: '3' }, // every n-th client also subscribes to logs
  concurrency: { type: 'string', default: '50' }, // connections being opened at once, per client process
  'source-addresses': { type: 'string', default: '4' }, // 127.0.0.1 .. 127.0.0.n
  'no-build': { type: 'boolean', default: false },
  pin: { type: 'boolean', default: false }, // the target alone on the last CPU, the clients and the node on the others (taskset)
  perf: { type: 'string' }, // a file: the gateway's first turn is sampled with `perf record -g` while it notifies (root, or perf_event_paranoid <= 1)
  rounds: { type: 'string', default: '2' }, // rounds of turns (bare, gateway; then gateway, bare; ...)
  target: { type: 'string', default: 'both', help: 'gateway, bare (the bare ws broadcaster) or both, in turns' },
  workers: { type: 'string', help: 'the gateway\'s WORKERS (a number or auto; default: $WORKERS, else 1)' },
  profile: { type: 'boolean', default: false, help: '--cpu-prof on the gateway\'s first turn; prints where its CPU went while the clients connected and while it notified' },
  'heap-snapshots': { type: 'string', help: 'a folder: heap snapshots of each target\'s first turn after half and after all of the connections, in DIR/gateway and DIR/bare (npm run bench -- heap-diff DIR/gateway/01.heapsnapshot DIR/gateway/02.heapsnapshot)' },
} as const;
let opt: Values<typeof OPTIONS>;

export default defineScenario({
  summary: 'WebSocket subscribers against a bare ws broadcaster, in turns: node -> last client p50/p99 and their ratio, set-up, RSS per connection, CPU',
  options: OPTIONS,
  run: async (ctx) => {
    opt = ctx.opt;
    connections = Number(opt.connections);
    processes = Number(opt.processes);
    notifications = Number(opt.notifications);
    intervalMs = Number(opt.interval);
    logsEvery = Number(opt['logs-every']);
    rounds = Math.max(1, Number(opt.rounds));
    const w = opt.workers ?? process.env.WORKERS ?? '1';
    workers = w === 'auto' ? os.availableParallelism() : Number(w);
    if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers: "${w}" is not a number of workers (or auto)`);
    if (opt['heap-snapshots']) snapshotDir = path.resolve(opt['heap-snapshots']);
    if (!['gateway', 'bare', 'both'].includes(opt.target)) throw new Error(`--target: "${opt.target}" is not gateway, bare or both`);
    await main();
  },
});

const NETWORK = 'native-mainnet';
const TIME_LIMIT_PER_TURN_MS = 420_000;
const LOG_ADDRESS = '0x00000000000000000000000000000000000b3c4d';
const ms = (ns: number) => ns / 1e6;
const hex = (n: number | bigint) => `0x${n.toString(16)}`;
const now = () => process.hrtime.bigint();
const sleep = (msecs: number) => new Promise((r) => setTimeout(r, msecs));

let connections = 18_000;
let processes = 5;
let notifications = 30;
let intervalMs = 1000;
let logsEvery = 3;
let rounds = 2;
let workers = 1;
let snapshotDir: string | undefined;
/** With --profile: the gateway's first turn's CPU profile folder, and the set-up and notification windows (monotonic µs). */
let profiled: { dir: string; windows: Array<{ what: string; fromUs: number; toUs: number }> } | undefined;
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const profileArgs = (): string[] => {
  if (!opt.profile || profiled) return [];
  profiled = { dir: mkdtempSync(path.join(os.tmpdir(), 'junction-bench-ws-profile-')), windows: [] };
  return ['--cpu-prof', '--cpu-prof-dir', profiled.dir];
};
const snapshotsTaken: Partial<Record<Kind, number>> = {};
/** With --heap-snapshots: the target's folder of them (DIR/gateway, DIR/bare), in its environment. */
const snapshotsOf = (kind: Kind): Record<string, string> => {
  if (!snapshotDir) return {};
  mkdirSync(path.join(snapshotDir, kind), { recursive: true });
  return { BENCH_HEAP_SNAPSHOT_DIR: path.join(snapshotDir, kind) };
};

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
    // A target stopped after its turn: the next one's notifications are not sent to it.
    ws.once('close', () => {
      for (const map of [subs.newHeads, subs.logs]) for (const [id, s] of map) if (s === ws) map.delete(id);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  // One send time per notification, whatever the number of subscribers (a gateway's workers subscribe
  // each): the clients' delays of one notification are then counted together, up to its last client.
  const emit = (kind: 'newHeads' | 'logs', result: (sentHex: string) => string): void => {
    const text = result(hex(now()));
    for (const [id, ws] of subs[kind]) ws.send(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":${text}}}`);
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
type FakeNode = Awaited<ReturnType<typeof startFakeNode>>;

interface Report {
  received: Array<{ sent: string; kind: 'newHeads' | 'logs'; count: number; maxNs: number }>;
  buckets: Array<[number, number]>;
  unexpected: number;
  closedEarly: number;
}

/** The client processes, each under this machine's open-file limit; they serve every turn. */
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
      c.off('exit', onExit);
      resolve(m as T);
    };
    const onExit = (code: number | null) => reject(new Error(`a client process exited (${code}) before "${type}"`));
    c.on('message', on);
    c.once('exit', onExit);
  });

/** What a target process prints on SIGUSR2 (src/ops/bench-gc.ts; the bare broadcaster prints the same, without hubs). */
interface MemoryLine {
  rss: number;
  heapUsed: number;
  /** The JS heap's pages held (used or not): what of the RSS is the heap's. */
  heapTotal: number;
  /** The C library allocator's main heap (src/ops/bench-gc.ts). */
  mallocHeap: number;
  /** The JS heap's young generation, resident (src/ops/bench-gc.ts); absent from an older build. */
  newSpace?: number;
  external: number;
  arrayBuffers: number;
  connections: number;
  framesBuilt: number;
  hubs?: Array<Record<string, number | string>>;
  /** A gateway worker's number (WORKERS > 1). */
  worker?: number;
}
/** A target's memory: the sum over the processes that hold its connections, and each one's line. */
interface Memory extends Required<Omit<MemoryLine, 'worker'>> {
  lines: MemoryLine[];
}

/** Asks one process for a full GC and its memory; the line comes on `child`'s output (a worker's through its primary's). */
async function memoryOf(child: Child, pid: number): Promise<MemoryLine> {
  // Only what it printed after the signal: its output keeps the last 64 KiB, which a few of a
  // worker's long lines fill, so a count of lines would stop growing.
  const from = child.printed();
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const since = child.printed() - from;
    const after = since > 0 ? child.output().slice(-since) : '';
    // A line is whole once its newline has come.
    const line = after.split('\n').find((l) => l.startsWith('bench-memory ') && after.includes(`${l}\n`));
    if (line !== undefined) return JSON.parse(line.slice('bench-memory '.length)) as MemoryLine;
    await sleep(50);
  }
  throw new Error(`${child.name} printed no memory figure (started with BENCH_GC=1 and --expose-gc?):\n${child.output().slice(-2000)}`);
}

/** Whether `pid` has a handler for signal number `signal` (/proc/<pid>/status SigCgt): SIGUSR2 before it would kill it. */
function catches(pid: number, signal: number): boolean {
  try {
    const mask = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return mask !== undefined && (BigInt(`0x${mask}`) & (1n << BigInt(signal - 1))) !== 0n;
  } catch {
    return false;
  }
}
const SIGUSR2 = os.constants.signals.SIGUSR2;

type Kind = 'bare' | 'gateway';
interface Target {
  kind: Kind;
  label: string;
  child: Child;
  /** Where the clients connect. */
  url: string;
  /** The processes that hold the connections: the gateway's workers, or the one process. */
  servers: number[];
}

async function startTarget(kind: Kind, node: FakeNode): Promise<Target> {
  if (kind === 'bare') {
    const { child, url } = await startScript('bare ws broadcaster', 'bare-broadcaster.ts', [node.wsUrl, JSON.stringify({ address: LOG_ADDRESS })], 'target', ['--expose-gc'], snapshotsOf('bare'));
    return { kind, label: 'bare ws broadcaster', child, url: `${url.replace('http', 'ws')}/`, servers: [child.pid] };
  }
  const label = workers > 1 ? `gateway, WORKERS=${workers}` : 'gateway';
  // A migrated database copied in: every turn starts a gateway, and a new one's initdb takes seconds.
  const data = tempDir('ws-data');
  await seedDataDir(data);
  const gw = await startGateway(
    { label, env: { UPSTREAM_WS_NATIVE_MAINNET: node.wsUrl, BENCH_GC: '1', WORKERS: String(workers), DATA_DIR: data, ...snapshotsOf('gateway') } },
    node.httpUrl,
    { nodeArgs: ['--expose-gc', ...profileArgs()] },
  );
  const pid = gw.child.pid;
  let servers = [pid];
  if (workers > 1) {
    // The workers are the primary's children; each reports its own memory once its app is ready.
    const deadline = Date.now() + 120_000;
    for (;;) {
      servers = processTree(pid).slice(1);
      if (servers.length === workers && servers.every((p) => catches(p, SIGUSR2))) break;
      if (Date.now() > deadline) throw new Error(`${label}: ${servers.length} of ${workers} workers ready after 120 s:\n${gw.child.output().slice(-2000)}`);
      await sleep(200);
    }
  }
  return { kind, label, child: gw.child, url: `${gw.url.replace('http', 'ws')}/ws/${NETWORK}?apiKey=${gw.headers['x-api-key']}`, servers };
}

/** A full GC in every process of the target, one after another (a line each on one pipe), summed. */
async function targetMemory(t: Target): Promise<Memory> {
  const lines: MemoryLine[] = [];
  for (const pid of t.servers) lines.push(await memoryOf(t.child, pid));
  const sum = (f: (l: MemoryLine) => number) => lines.reduce((a, l) => a + f(l), 0);
  return {
    rss: sum((l) => l.rss),
    heapUsed: sum((l) => l.heapUsed),
    heapTotal: sum((l) => l.heapTotal),
    mallocHeap: sum((l) => l.mallocHeap ?? 0),
    newSpace: sum((l) => l.newSpace ?? 0),
    external: sum((l) => l.external),
    arrayBuffers: sum((l) => l.arrayBuffers),
    connections: sum((l) => l.connections),
    framesBuilt: sum((l) => l.framesBuilt),
    hubs: lines.flatMap((l) => l.hubs ?? []),
    lines,
  };
}

const SETTLE_SAMPLES = 10;
const SETTLE_MIB = 2;
const SETTLE_LIMIT_MS = 60_000;
/** The young generation's resident pages once V8 has given back what a burst of allocation grew (0.3-1.3 MiB seen). */
const SETTLE_YOUNG_MIB = 4;

/** Whether every process of the target holds at most SETTLE_YOUNG_MIB of young generation. */
const youngGivenBack = (m: Memory) => m.lines.every((l) => (l.newSpace ?? 0) <= SETTLE_YOUNG_MIB * 1048576);

/**
 * The target's memory once its RSS has settled: a full GC a second until the last
 * SETTLE_SAMPLES lie within SETTLE_MIB and the young generation holds at most SETTLE_YOUNG_MIB,
 * at most SETTLE_LIMIT_MS. A gateway just started gives back tens of MiB over its first ~15 s (its
 * JS heap's reserve first, then more of the process), and any process gives back its young
 * generation (up to 32 MiB) 5-20 s after a burst of allocation: either would count against the
 * connections opened meanwhile.
 */
async function settledMemory(t: Target): Promise<{ memory: Memory; seconds: number; spreadMiB: number }> {
  const started = performance.now();
  const window: Memory[] = [];
  for (;;) {
    window.push(await targetMemory(t));
    if (window.length > SETTLE_SAMPLES) window.shift();
    const rss = window.map((m) => m.rss);
    const spreadMiB = (Math.max(...rss) - Math.min(...rss)) / 1048576;
    const seconds = (performance.now() - started) / 1000;
    const youngBack = youngGivenBack(window.at(-1) as Memory);
    if ((window.length === SETTLE_SAMPLES && spreadMiB <= SETTLE_MIB && youngBack) || seconds * 1000 > SETTLE_LIMIT_MS) {
      return { memory: window.at(-1) as Memory, seconds, spreadMiB };
    }
    await sleep(1_000);
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

/** One target's figures in one turn. */
interface Turn {
  kind: Kind;
  label: string;
  opened: number;
  failures: number;
  setupMs: number;
  setupCpu: number;
  /** How long the RSS took to settle before the connections, and its spread over the last samples then. */
  settleSeconds: number;
  settleMiB: number;
  /** After each half of the connections: the young generation's resident bytes right after the set-up and once settled, whether the memory settled (RSS and young generation) and how long that took. */
  halves: Array<{ young: number; youngSettled: number; settled: boolean; settleSeconds: number }>;
  rssBefore: number;
  rssMid: number;
  rssAfter: number;
  rssFinal: number;
  /** RSS per connection over the second half of the connections (the goal's figure). */
  rssPerConn: number;
  /** RSS per connection from none to all. */
  rssPerConnFromZero: number;
  heapPerConn: number;
  heapTotalPerConn: number;
  mallocPerConn: number;
  externalPerConn: number;
  notifyCpu: number;
  notifyMs: number;
  kernelShare: number;
  upstreamSubscribes: number;
  frames: number;
  /** The gateway's hubs' loop over a topic's subscribers, per notification and process. */
  fanoutMs: number;
  heads: { last: number[]; missing: number };
  logs: { last: number[]; missing: number };
  medianAll: number;
  closedEarly: number;
  load: number[];
  /** Connections per gateway worker, by worker number (WORKERS > 1). */
  spread: Array<[number, number]>;
}

const subscribers = () => connections + Math.ceil(connections / logsEvery);

/** One turn: the target started, the clients connected, `notifications` blocks, the figures; the clients disconnected, the target stopped. */
async function turn(kind: Kind, node: FakeNode, clientProcs: ChildProcess[], firstBlock: number, perfFile?: string): Promise<Turn> {
  const subscribes0 = node.subscribes();
  const t = await startTarget(kind, node);
  try {
    // Also the time the gateway's own newHeads follower takes to subscribe.
    const { memory: before, seconds: settleSeconds, spreadMiB: settleMiB } = await settledMemory(t);

    // Set-up: every client process opens its share at once, in two halves with the memory taken
    // between them. The second half's RSS per connection is what one more connection costs, without
    // the one-time growth the first connections bring (the JS heap's spaces growing under load).
    const perProcess = Math.ceil(connections / processes);
    const sources = Array.from({ length: Number(opt['source-addresses']) }, (_, i) => `127.0.0.${i + 1}`);
    const shares = clientProcs.map((_, i) => {
      const first = i * perProcess;
      const count = Math.max(0, Math.min(perProcess, connections - first));
      return { first, count, half: Math.ceil(count / 2) };
    });
    const halfway = shares.reduce((a, x) => a + x.half, 0);
    let setupMs = 0;
    let setupCpu = 0;
    const openResults: Array<{ failures: number; firstFailure?: string }> = [];
    const profiling = kind === 'gateway' && profiled?.windows.length === 0 ? profiled : undefined;
    const halves: Turn['halves'] = [];
    const open = async (part: (x: (typeof shares)[number]) => { first: number; count: number }) => {
      const cpu0 = cpuSeconds(t.child.pid);
      const t0 = performance.now();
      const from = nowUs();
      const opened = clientProcs.map((c, i) => {
        c.send({ type: 'init', url: t.url, ...part(shares[i] as (typeof shares)[number]), logsEvery, logsFilter: { address: LOG_ADDRESS }, localAddresses: sources, concurrency: Number(opt.concurrency) });
        return next<{ ms: number; failures: number; firstFailure?: string }>(c, 'opened');
      });
      openResults.push(...(await Promise.all(opened)));
      profiling?.windows.push({ what: 'connecting and subscribing', fromUs: from, toUs: nowUs() });
      setupMs += performance.now() - t0;
      setupCpu += cpuSeconds(t.child.pid) - cpu0;
      await sleep(1_000);
      // Each target's first turn, with --heap-snapshots: a snapshot with each memory line (src/ops/bench-gc.ts).
      if (snapshotDir && (snapshotsTaken[t.kind] ?? 0) < 2) {
        snapshotsTaken[t.kind] = (snapshotsTaken[t.kind] ?? 0) + 1;
        writeFileSync(path.join(snapshotDir, t.kind, 'next'), '');
      }
      // Right after a burst of set-up, the JS heap's young generation holds up to twice
      // --max-semi-space-size of pages (32 MiB by default), empty after the full GC but resident;
      // V8 gives them back a few seconds later. Counted, they would be charged to the connections:
      // the figure is the settled RSS, as before the connections, with the young generation's size
      // right after set-up beside it.
      const young = (await targetMemory(t)).newSpace;
      const settled = await settledMemory(t);
      halves.push({ young, youngSettled: settled.memory.newSpace, settled: settled.spreadMiB <= SETTLE_MIB && youngGivenBack(settled.memory), settleSeconds: settled.seconds });
      return settled.memory;
    };
    const mid = await open((x) => ({ first: x.first, count: x.half }));
    const after = await open((x) => ({ first: x.first + x.half, count: x.count - x.half }));
    const failures = openResults.reduce((a, r) => a + r.failures, 0);
    const firstFailure = openResults.find((r) => r.firstFailure)?.firstFailure;
    if (firstFailure) console.log(`  ${t.label}: ${failures} connections failed, the first: ${firstFailure}`);

    // Notifications at a set pace.
    const load = os.loadavg();
    const cpu1 = cpuSeconds(t.child.pid);
    const us1 = userSystemSeconds(t.child.pid);
    const perf = perfFile ? spawn('perf', ['record', '-g', '-q', '-o', perfFile, '-p', processTree(t.child.pid).join(',')], { stdio: 'ignore' }) : undefined;
    const t1 = performance.now();
    const notifyFrom = nowUs();
    for (let n = firstBlock; n < firstBlock + notifications; n++) {
      node.block(n);
      await sleep(intervalMs);
    }
    profiling?.windows.push({ what: 'notifying', fromUs: notifyFrom, toUs: nowUs() });
    const notifyMs = performance.now() - t1;
    const notifyCpu = cpuSeconds(t.child.pid) - cpu1;
    const us2 = userSystemSeconds(t.child.pid);
    if (perf) {
      perf.kill('SIGINT');
      await once(perf, 'exit');
    }
    await sleep(1_000);
    const reports = await Promise.all(
      clientProcs.map((c) => {
        const p = next<Report>(c, 'report');
        c.send({ type: 'report' });
        return p;
      }),
    );
    const final = await targetMemory(t);
    await Promise.all(
      clientProcs.map((c) => {
        const p = next(c, 'disconnected');
        c.send({ type: 'disconnect' });
        return p;
      }),
    );

    // Per notification: the last client's delay, over the processes.
    const byNote = new Map<string, { kind: string; count: number; maxNs: number }>();
    const buckets = new Map<number, number>();
    for (const r of reports) {
      for (const x of r.received) {
        const n = byNote.get(x.sent) ?? { kind: x.kind, count: 0, maxNs: 0 };
        n.count += x.count;
        n.maxNs = Math.max(n.maxNs, x.maxNs);
        byNote.set(x.sent, n);
      }
      for (const [b, n] of r.buckets) buckets.set(b, (buckets.get(b) ?? 0) + n);
    }
    const summary = (k: 'newHeads' | 'logs', expected: number) => {
      const notes = [...byNote.values()].filter((x) => x.kind === k);
      const last = notes.map((x) => ms(x.maxNs));
      const got = notes.reduce((a, x) => a + x.count, 0);
      return { last, missing: expected * notifications - got };
    };
    const heads = summary('newHeads', connections);
    const logs = summary('logs', Math.ceil(connections / logsEvery));
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
    const perSecondHalf = (a: number, b: number) => (b - a) / (connections - halfway) / 1024;
    const deliver = (m: Memory) => m.hubs.filter((h) => h.network === NETWORK).reduce((a, h) => a + Number(h.deliverSeconds), 0);
    return {
      kind,
      label: t.label,
      opened: after.connections,
      failures,
      setupMs,
      setupCpu,
      settleSeconds,
      settleMiB,
      halves,
      rssBefore: before.rss,
      rssAfter: after.rss,
      rssFinal: final.rss,
      rssMid: mid.rss,
      rssPerConn: perSecondHalf(mid.rss, after.rss),
      rssPerConnFromZero: perConn(before.rss, after.rss),
      heapPerConn: perSecondHalf(mid.heapUsed, after.heapUsed),
      heapTotalPerConn: perSecondHalf(mid.heapTotal, after.heapTotal),
      mallocPerConn: perSecondHalf(mid.mallocHeap, after.mallocHeap),
      externalPerConn: perSecondHalf(mid.external + mid.arrayBuffers, after.external + after.arrayBuffers),
      notifyCpu,
      notifyMs,
      kernelShare: (us2.sys - us1.sys) / (us2.user - us1.user + us2.sys - us1.sys),
      upstreamSubscribes: node.subscribes() - subscribes0,
      frames: final.framesBuilt - after.framesBuilt,
      fanoutMs: kind === 'gateway' ? ((deliver(final) - deliver(after)) * 1000) / (2 * notifications * workers) : Number.NaN,
      heads,
      logs,
      medianAll,
      closedEarly: reports.reduce((a, r) => a + r.closedEarly, 0),
      load,
      spread: after.lines.filter((l) => l.worker !== undefined).map((l) => [l.worker as number, l.connections] as [number, number]).sort((a, b) => a[0] - b[0]),
    };
  } finally {
    await stopChild(t.child);
  }
}

const lastP99 = (x: Turn) => pct([...x.heads.last, ...x.logs.last], 99);
const f1 = (x: number) => `${x.toFixed(1)} ms`;
const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;

function printTurn(x: Turn, round: number): void {
  const subs = subscribers();
  console.log(`round ${round}, ${x.label}:`);
  console.log(`  connections open and subscribed       ${x.opened} of ${connections} (${x.failures} failed) in ${(x.setupMs / 1000).toFixed(1)} s (two halves): ${(connections / (x.setupMs / 1000)).toFixed(0)}/s, CPU ${x.setupCpu.toFixed(1)} s (${((x.setupCpu * 1e6) / connections).toFixed(0)} µs per connection)`);
  if (x.spread.length > 0) console.log(`  connections per worker                ${x.spread.map(([w, n]) => `${w}: ${n}`).join(', ')}`);
  console.log(`  upstream eth_subscribe calls          ${x.upstreamSubscribes} (newHeads, logs${x.kind === 'gateway' && workers > 1 ? ', per worker' : ''}) for ${subs} client subscriptions`);
  console.log(`  frames serialised per notification    ${(x.frames / (2 * notifications)).toFixed(2)} (${x.frames} for ${2 * notifications} notifications to ${subs} subscriptions)`);
  const settled = x.settleMiB <= SETTLE_MIB ? `settled in ${x.settleSeconds.toFixed(0)} s` : `NOT settled in ${x.settleSeconds.toFixed(0)} s: still ${x.settleMiB.toFixed(1)} MiB apart`;
  const settledHalf = (h: Turn['halves'][number] | undefined) => (!h ? '' : `${h.settled ? 'settled' : 'NOT settled'} in ${h.settleSeconds.toFixed(0)} s`);
  console.log(`  RSS after a full GC                   ${mib(x.rssBefore)} (${settled}) -> ${mib(x.rssMid)} (half the connections, ${settledHalf(x.halves[0])}) -> ${mib(x.rssAfter)} (all, ${settledHalf(x.halves[1])}; ${mib(x.rssFinal)} after the notifications)`);
  console.log(`  young generation's pages              ${x.halves.map((h) => `${mib(h.young)} right after set-up, ${mib(h.youngSettled)} settled`).join('; ')}`);
  console.log(`  RSS per connection, second half       ${x.rssPerConn.toFixed(2)} KiB (from none: ${x.rssPerConnFromZero.toFixed(2)} KiB); JS heap ${x.heapPerConn.toFixed(2)} KiB (its pages ${x.heapTotalPerConn.toFixed(2)} KiB); native allocator's heap ${x.mallocPerConn.toFixed(2)} KiB; external + array buffers ${x.externalPerConn.toFixed(2)} KiB`);
  console.log(`  CPU while notifying                   ${((x.notifyCpu / (x.notifyMs / 1000)) * 100).toFixed(0)}% of one core: ${((x.notifyCpu * 1000) / notifications).toFixed(1)} ms per block (${subs} frames), ${((x.notifyCpu * 1e9) / notifications / subs).toFixed(0)} ns per frame; ${(x.kernelShare * 100).toFixed(0)}% of it in the kernel; load average ${x.load.map((l) => l.toFixed(2)).join(' ')} before`);
  if (x.kind === 'gateway') console.log(`  fan-out per notification              ${f1(x.fanoutMs)} on average (the hub's loop over the topic's subscribers: ${((x.fanoutMs * 2e6 * workers) / subs).toFixed(0)} ns per frame)`);
  console.log(`  newHeads node -> last client          p50 ${f1(pct(x.heads.last, 50))}, p99 ${f1(pct(x.heads.last, 99))}, max ${f1(Math.max(...x.heads.last))}`);
  console.log(`  logs node -> last client              p50 ${f1(pct(x.logs.last, 50))}, p99 ${f1(pct(x.logs.last, 99))}, max ${f1(Math.max(...x.logs.last))}`);
  console.log(`  node -> client, all deliveries        p50 ${x.medianAll.toFixed(1)} ms`);
  console.log(`  notifications missing                 newHeads ${x.heads.missing}, logs ${x.logs.missing}; connections closed early ${x.closedEarly}`);
}

function recordTurns(section: string, turns: Turn[]): void {
  const subs = subscribers();
  const v = (f: (x: Turn) => number) => turns.map(f);
  const gateway = turns[0]?.kind === 'gateway';
  const workerCounts = new Map<number, number[]>();
  for (const x of turns) for (const [w, n] of x.spread) workerCounts.set(w, [...(workerCounts.get(w) ?? []), n]);
  record(section, turns[0]?.label ?? '', {
    setup_per_s: v((x) => connections / (x.setupMs / 1000)),
    setup_cpu_per_connection_us: v((x) => (x.setupCpu * 1e6) / connections),
    rss_per_connection_kib: { unit: 'KiB', better: 'lower', value: v((x) => x.rssPerConn) },
    rss_per_connection_from_none_kib: { unit: 'KiB', better: 'lower', value: v((x) => x.rssPerConnFromZero) },
    heap_per_connection_kib: { unit: 'KiB', better: 'lower', value: v((x) => x.heapPerConn) },
    heap_pages_per_connection_kib: { unit: 'KiB', better: 'lower', value: v((x) => x.heapTotalPerConn) },
    malloc_heap_per_connection_kib: { unit: 'KiB', better: 'lower', value: v((x) => x.mallocPerConn) },
    young_generation_after_setup_mib: { unit: 'MiB', value: v((x) => Math.max(...x.halves.map((h) => h.young)) / 1048576) },
    notify_cpu_per_frame_ns: v((x) => (x.notifyCpu * 1e9) / notifications / subs),
    kernel_share_pct: { unit: '%', value: v((x) => x.kernelShare * 100) },
    fanout_ms: gateway ? v((x) => x.fanoutMs) : null,
    newheads_last_client_p50_ms: v((x) => pct(x.heads.last, 50)),
    newheads_last_client_p99_ms: v((x) => pct(x.heads.last, 99)),
    logs_last_client_p50_ms: v((x) => pct(x.logs.last, 50)),
    logs_last_client_p99_ms: v((x) => pct(x.logs.last, 99)),
    last_client_p50_ms: v((x) => pct([...x.heads.last, ...x.logs.last], 50)),
    last_client_p99_ms: v(lastP99),
    all_deliveries_p50_ms: v((x) => x.medianAll),
    missing: { unit: 'notifications', better: 'lower', value: v((x) => x.heads.missing + x.logs.missing) },
    ...Object.fromEntries([...workerCounts].map(([w, n]) => [`worker_${w}_connections`, { unit: 'connections', value: n }])),
  });
}

const range = (xs: number[], digits = 2) => `${Math.min(...xs).toFixed(digits)}-${Math.max(...xs).toFixed(digits)}`;

async function main(): Promise<void> {
  removeStaleTempDirs();
  cleanupOnSignals();
  const kinds: Kind[] = opt.target === 'both' ? ['bare', 'gateway'] : [opt.target as Kind];
  const limitMs = TIME_LIMIT_PER_TURN_MS * rounds * kinds.length;
  const limit = setTimeout(() => {
    console.error(`bench:ws: still running after ${limitMs / 1000} s; giving up`);
    void cleanup().then(() => process.exit(1));
  }, limitMs);
  limit.unref();
  if (!opt['no-build'] && kinds.includes('gateway')) {
    const b = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, stdio: 'inherit' });
    if (b.status !== 0) throw new Error('build failed');
  }
  const nofile = Number(spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (connections + 200 > nofile) console.warn(`warning: ${connections} connections against an open-file limit of ${nofile} per process: the target will refuse some`);

  const pinned = pinCpus(opt.pin);
  if (pinned) spawnSync('taskset', ['-pc', os.availableParallelism() === 2 ? '0' : `0-${os.availableParallelism() - 2}`, String(process.pid)], { stdio: 'ignore' });
  const node = await startFakeNode();
  const clientProcs = startClients(processes); // forked after the pinning: they inherit it
  const logsClients = Math.ceil(connections / logsEvery);
  try {
    await Promise.all(clientProcs.map((c) => next(c, 'ready')));
    console.log(`WebSocket fan-out: ${connections} clients in ${processes} processes on ${NETWORK} (every one on newHeads, ${logsClients} on logs too), ${notifications} blocks ${intervalMs} ms apart, ${rounds} round(s) of ${kinds.join(', ')}${workers > 1 ? `; gateway WORKERS=${workers}` : ''}`);
    if (pinned) console.log(`  pinned                                ${pinned}`);
    console.log(`  machine                               ${os.cpus().length} CPUs, open files per process ${nofile}`);

    const turns = new Map<Kind, Turn[]>(kinds.map((k) => [k, []]));
    let block = 1;
    let perfFile = opt.perf;
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? kinds : [...kinds].reverse();
      for (const kind of order) {
        const x = await turn(kind, node, clientProcs, block, kind === 'gateway' ? perfFile : undefined);
        if (kind === 'gateway') perfFile = undefined;
        block += notifications;
        turns.get(kind)?.push(x);
        printTurn(x, round);
      }
    }

    const section = `${connections} connections, ${processes} client processes`;
    console.log(`\nmedians of ${rounds} round(s) [lowest-highest]: node -> last client per notification (both topics), RSS per connection after a full GC, CPU per frame`);
    for (const [kind, xs] of turns) {
      recordTurns(section, xs);
      const p50 = xs.map((x) => pct([...x.heads.last, ...x.logs.last], 50));
      const p99 = xs.map(lastP99);
      const rss = xs.map((x) => x.rssPerConn);
      const cpu = xs.map((x) => (x.notifyCpu * 1e9) / notifications / subscribers());
      console.log(`  ${(xs[0]?.label ?? kind).padEnd(26)} p50 ${f1(median(p50))} [${range(p50, 1)}], p99 ${f1(median(p99))} [${range(p99, 1)}]; ${median(rss).toFixed(2)} KiB RSS per connection (second half); ${median(cpu).toFixed(0)} ns CPU per frame`);
    }
    const bare = turns.get('bare') ?? [];
    const gw = turns.get('gateway') ?? [];
    let ratio: number | undefined;
    if (bare.length > 0 && gw.length === bare.length) {
      const p99 = gw.map((x, i) => lastP99(x) / lastP99(bare[i] as Turn));
      const p50 = gw.map((x, i) => pct([...x.heads.last, ...x.logs.last], 50) / pct([...(bare[i] as Turn).heads.last, ...(bare[i] as Turn).logs.last], 50));
      ratio = median(p99);
      record(section, `${gw[0]?.label} vs bare ws broadcaster`, {
        p99_ratio: { unit: 'x', better: 'lower', value: p99 },
        p50_ratio: { unit: 'x', better: 'lower', value: p50 },
      });
      console.log(`  ${gw[0]?.label} / bare p99: ${ratio.toFixed(2)}x [rounds ${range(p99)}], p50 ${median(p50).toFixed(2)}x (goal: p99 <= 1.2x): ${ratio <= 1.2 ? 'OK' : 'ABOVE'}`);
    }

    // Each verdict over every turn of its target.
    const all = [...turns.values()].flat();
    const verdicts: Array<[string, boolean]> = [
      [`all ${connections} connections subscribed, every turn`, all.every((x) => x.failures === 0 && x.opened === connections)],
      ['every notification reached every subscriber', all.every((x) => x.heads.missing === 0 && x.logs.missing === 0 && x.closedEarly === 0)],
      [`one upstream subscription per topic (2${workers > 1 ? ` per gateway worker, ${2 * workers}` : ''})`, all.every((x) => x.upstreamSubscribes === 2 * (x.kind === 'gateway' ? workers : 1))],
      [`one frame serialised per notification and topic${workers > 1 ? ' (and gateway worker)' : ''}`, all.every((x) => x.frames === 2 * notifications * (x.kind === 'gateway' ? workers : 1))],
    ];
    if (gw.length > 0) verdicts.push([`gateway RSS per connection <= 4 KiB (second half, median ${median(gw.map((x) => x.rssPerConn)).toFixed(2)} KiB)`, median(gw.map((x) => x.rssPerConn)) <= 4]);
    for (const [what, ok] of verdicts) console.log(`  ${ok ? 'PASS' : 'FAIL'} ${what}`);
    if (verdicts.some(([, ok]) => !ok)) process.exitCode = 1;
    // The profile is written when the gateway exits (its turn stopped it).
    for (const w of profiled?.windows ?? []) {
      console.log(`\nwhere the gateway's first turn spent its CPU ${w.what} (self time; profiler on, so slower):`);
      for (const line of hotFunctions((profiled as { dir: string }).dir, w, 30)) console.log(`  ${line}`);
    }
    if (profiled) console.log(`profile: ${profiled.dir}`);
  } finally {
    for (const c of clientProcs) if (c.connected) c.send({ type: 'close' });
    await Promise.all(clientProcs.map((c) => (c.exitCode === null ? Promise.race([once(c, 'exit'), sleep(3_000)]) : Promise.resolve())));
    for (const c of clientProcs) if (c.exitCode === null) c.kill('SIGKILL');
    await cleanup();
    node.close();
    clearTimeout(limit);
  }
}
