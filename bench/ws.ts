// `npm run bench:ws`: 1,000 WebSocket clients subscribed to newHeads on one network, through
// the gateway (its own process), in front of a fake node that emits a block header every 500 ms.
// Prints how many subscriptions reached the node (must be 1), the gateway's resident memory per
// connection, and the delay from the node's notification to the last client's receipt.
//
//   npm run bench:ws -- --connections 1000 --notifications 10
//
// The same file is the gateway process when started with --gateway (the parent does that).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket, { WebSocketServer } from 'ws';

const { values: opt } = parseArgs({
  options: {
    gateway: { type: 'boolean', default: false }, // internal: run as the gateway process
    upstream: { type: 'string' }, // internal: the fake node's ws:// address
    connections: { type: 'string', default: '1000' },
    notifications: { type: 'string', default: '10' },
    interval: { type: 'string', default: '500' }, // milliseconds between notifications
  },
});

const NETWORK = 'native-mainnet';
const TIME_LIMIT_MS = 120_000;

/** A ws message as text: a Buffer by default, fragments or an ArrayBuffer under other binary types. */
const text = (data: WebSocket.RawData): string =>
  (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)).toString();

type FromGateway =
  | { type: 'ready'; port: number; key: string }
  | { type: 'stats'; rss: number; js: number; hubs: unknown[]; connections: number };

if (opt.gateway) await runGateway(opt.upstream as string);
else await runBench();

/** The gateway process: embedded storage, one enterprise key, the network's ws upstream = the fake node. */
async function runGateway(upstream: string): Promise<void> {
  const { buildApp } = await import('../src/app.ts');
  const { loadConfig } = await import('../src/config/load.ts');
  const { openStorage } = await import('../src/storage/db.ts');
  const adminToken = 'bench-ws-admin-token-0123456789';
  const base = loadConfig({ env: {} });
  const config = loadConfig({
    env: { LOG_LEVEL: 'warn', ADMIN_TOKEN: adminToken },
    overrides: {
      networks: base.networks.map((n) => (n.slug === NETWORK ? { ...n, upstreams: [{ http: 'http://127.0.0.1:9', ws: upstream }] } : n)),
    },
  });
  const storage = await openStorage({ databaseUrl: null, dataDir: 'memory' });
  const app = await buildApp(config, {
    storage,
    secrets: { jwtSecret: 'bench-ws-jwt-secret-0123456789abcdef012345', keyEncryptionSecret: 'bench-ws-key-secret-0123456789abcdef012345' },
  });
  const port = await app.listen({ host: '127.0.0.1', port: 0 }).then(() => (app.server.address() as AddressInfo).port);

  const reg = await app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email: 'bench-ws@example.com', password: 'bench password', name: 'bench' } });
  const { user, tokens } = reg.json().data;
  // Enterprise: no connection, rate or quota limit gets in the way of 1,000 connections.
  await app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${user.id}`, headers: { 'x-admin-token': adminToken }, payload: { tier: 'enterprise' } });
  const keyRes = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: { authorization: `Bearer ${tokens.accessToken}` }, payload: { name: 'bench' } });
  const key = keyRes.json().data.key as string;

  const send = (m: FromGateway) => process.send?.(m);
  process.on('message', (m: { type: string }) => {
    if (m.type !== 'stats') return;
    // RSS as it is (what the machine pays); the JS figure after a full collection (what stays live).
    const rss = process.memoryUsage().rss;
    (globalThis as { gc?: () => void }).gc?.();
    const mem = process.memoryUsage();
    const s = app.parts.ws.stats();
    send({ type: 'stats', rss, js: mem.heapUsed + mem.external + mem.arrayBuffers, hubs: s.hubs, connections: s.connections });
  });
  const stop = async () => {
    await app.close();
    await storage.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('disconnect', () => void stop());
  send({ type: 'ready', port, key });
}

async function runBench(): Promise<void> {
  const connections = Number(opt.connections);
  const notifications = Number(opt.notifications);
  const intervalMs = Number(opt.interval);
  const deadline = setTimeout(() => {
    console.error(`bench:ws: still running after ${TIME_LIMIT_MS / 1000} s; giving up`);
    void cleanup().then(() => process.exit(1));
  }, TIME_LIMIT_MS);

  // The fake node: answers eth_subscribe, counts it, and emits newHeads on demand.
  const node = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(node, 'listening');
  let upstreamSubscribes = 0;
  const live = new Map<string, WebSocket>();
  node.on('connection', (ws) => {
    ws.on('message', (data) => {
      const m = JSON.parse(text(data)) as { id: number; method: string; params: unknown[] };
      if (m.method === 'eth_subscribe') {
        upstreamSubscribes++;
        const id = `0x${upstreamSubscribes.toString(16).padStart(32, '0')}`;
        live.set(id, ws);
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: id }));
      } else if (m.method === 'eth_unsubscribe') {
        live.delete(m.params[0] as string);
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: true }));
      }
    });
  });
  const nodeUrl = `ws://127.0.0.1:${(node.address() as AddressInfo).port}`;

  const child: ChildProcess = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), '--gateway', '--upstream', nodeUrl], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const fromChild = <T extends FromGateway['type']>(type: T) =>
    new Promise<Extract<FromGateway, { type: T }>>((resolve, reject) => {
      const onMessage = (m: FromGateway) => {
        if (m.type !== type) return;
        child.off('message', onMessage);
        resolve(m as Extract<FromGateway, { type: T }>);
      };
      child.on('message', onMessage);
      child.once('exit', (code) => reject(new Error(`gateway exited (${code})`)));
    });
  const stats = () => {
    const p = fromChild('stats');
    child.send({ type: 'stats' });
    return p;
  };

  const clients: WebSocket[] = [];
  async function cleanup(): Promise<void> {
    for (const c of clients) c.terminate();
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([once(child, 'exit'), new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    for (const c of node.clients) c.terminate();
    await new Promise<void>((r) => node.close(() => r()));
  }
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));

  try {
    const { port, key } = await fromChild('ready');
    const url = `ws://127.0.0.1:${port}/ws/${NETWORK}?apiKey=${key}`;

    // Arrival time of every notification at every client, by block number.
    const arrivals = new Map<number, number[]>();
    const open = async (): Promise<void> => {
      const ws = new WebSocket(url, { perMessageDeflate: false });
      clients.push(ws);
      await once(ws, 'open');
      ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}');
      const [answer] = (await once(ws, 'message')) as [Buffer];
      if (!String(answer).includes('"result"')) throw new Error(`eth_subscribe failed: ${String(answer)}`);
      ws.on('message', (data: Buffer) => {
        const at = performance.now();
        const n = Number(JSON.parse(String(data)).params.result.number);
        let list = arrivals.get(n);
        if (!list) arrivals.set(n, (list = []));
        list.push(at);
      });
    };

    // Baseline: the gateway with one subscriber (its hub and upstream connection exist).
    await open();
    await new Promise((r) => setTimeout(r, 500));
    const before = await stats();
    const started = performance.now();
    for (let i = 1; i < connections; i += 50) await Promise.all(Array.from({ length: Math.min(50, connections - i) }, open));
    const openMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, 1_000));
    const afterOpen = await stats();

    // Notifications: the delay from the node's send to each client's receipt.
    const header = (n: number) => ({
      number: `0x${n.toString(16)}`,
      hash: `0x${n.toString(16).padStart(64, '0')}`,
      parentHash: `0x${(n - 1).toString(16).padStart(64, '0')}`,
      miner: '0x0000000000000000000000000000000000000000',
      stateRoot: `0x${'ab'.repeat(32)}`,
      transactionsRoot: `0x${'cd'.repeat(32)}`,
      receiptsRoot: `0x${'ef'.repeat(32)}`,
      logsBloom: `0x${'00'.repeat(256)}`,
      gasLimit: '0x1c9c380',
      gasUsed: '0x0',
      timestamp: `0x${Math.floor(Date.now() / 1000).toString(16)}`,
      baseFeePerGas: '0x7',
    });
    const sentAt = new Map<number, number>();
    for (let n = 1; n <= notifications; n++) {
      const body = JSON.stringify(header(n));
      sentAt.set(n, performance.now());
      for (const [id, ws] of live) ws.send(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${id}","result":${body}}}`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    await new Promise((r) => setTimeout(r, 1_000));

    const lastDelays: number[] = [];
    const medianDelays: number[] = [];
    let missing = 0;
    for (const [n, t0] of sentAt) {
      const list = (arrivals.get(n) ?? []).map((t) => t - t0).sort((a, b) => a - b);
      missing += connections - list.length;
      if (list.length === 0) continue;
      lastDelays.push(list[list.length - 1] as number);
      medianDelays.push(list[Math.floor(list.length / 2)] as number);
    }
    const hub = (afterOpen.hubs as Array<{ network: string; topics: number; subscribers: number }>).find((h) => h.network === NETWORK);
    const mib = (b: number) => (b / 1048576).toFixed(1);
    const pct = (xs: number[], p: number) => {
      const s = [...xs].sort((a, b) => a - b);
      return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN;
    };
    const ms = (x: number) => `${x.toFixed(1)} ms`;

    console.log(`WebSocket fan-out: ${connections} clients on ${NETWORK} newHeads, ${notifications} notifications ${intervalMs} ms apart`);
    console.log(`  connections opened and subscribed     ${afterOpen.connections} in ${(openMs / 1000).toFixed(1)} s`);
    console.log(`  upstream eth_subscribe calls          ${upstreamSubscribes} (hub: ${hub?.topics} topic, ${hub?.subscribers} subscribers)`);
    console.log(`  gateway RSS                           ${mib(before.rss)} MiB -> ${mib(afterOpen.rss)} MiB`);
    // RSS only grows once the heap outgrows the pages the process already holds (startup and
    // migrations leave plenty): small runs show less than the live figure below.
    console.log(`  RSS delta per connection              ${((afterOpen.rss - before.rss) / (connections - 1) / 1024).toFixed(1)} KiB`);
    console.log(`  live JS + buffers per connection      ${((afterOpen.js - before.js) / (connections - 1) / 1024).toFixed(1)} KiB (heap, external and buffers after a full GC)`);
    console.log(`  node -> last client: p50 ${ms(pct(lastDelays, 50))}, p99 ${ms(pct(lastDelays, 99))}, max ${ms(Math.max(...lastDelays))}`);
    console.log(`  node -> median client: p50 ${ms(pct(medianDelays, 50))}`);
    console.log(`  last-client delays (ms)               ${lastDelays.map((d) => d.toFixed(0)).join(" ")}`);
    console.log(`  notifications missing                 ${missing}`);
    console.log('  (clients and the fake node share one process, so the delays include receiving all 1,000 copies there)');
    if (upstreamSubscribes !== 1) {
      console.error(`FAIL: expected 1 upstream subscription, saw ${upstreamSubscribes}`);
      process.exitCode = 1;
    }
    if (missing > 0) process.exitCode = 1;
  } finally {
    clearTimeout(deadline);
    await cleanup();
  }
}
