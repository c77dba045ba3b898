// C60: clients that never read their answers, against the real gateway process.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

const CLIENTS = 20;
/** Each answer: 16 MiB of result, far more than the kernel's buffers take for a client that does not read. */
const RESULT_BYTES = 16 * 1024 * 1024;
const WRITE_TIMEOUT_MS = 3_000;
const MAX_PENDING = 32 * 1024 * 1024;
const MB = 1024 * 1024;
/** An answer as written: the result and its envelope. */
const ANSWER_BYTES = RESULT_BYTES + 1024;
/** The write timeout, plus the time a loaded machine takes to fetch and write 20 answers of 16 MiB. */
const GONE_WITHIN_MS = WRITE_TIMEOUT_MS + 25_000;

let dir: string;
let node: FakeNode;
let gw: GatewayProcess;
let key: string;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'junction-slow-'));
  node = await startFakeNode();
  // Every eth_call is answered with the same large result (each client asks with its own data:
  // no two calls are shared).
  node.setRaw('eth_call', `{"jsonrpc":"2.0","id":1,"result":"0x${'ab'.repeat(RESULT_BYTES / 2)}"}`);
  const configFile = path.join(dir, 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      // A connection left holding nothing (its answer all in the kernel's buffers) ends with the keep-alive timeout.
      server: { writeTimeoutMs: WRITE_TIMEOUT_MS, maxPendingBytes: MAX_PENDING, keepAliveTimeoutMs: 2_000 },
      plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } },
      ws: { plans: { free: { connectionsPerKey: 100 } } },
    }),
  );
  // BENCH_GC: SIGUSR2 makes the gateway collect its garbage and print its memory (src/ops/bench-gc.ts).
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: node.url, GATEWAY_CONFIG: configFile, BENCH_GC: '1', NODE_OPTIONS: '--expose-gc' };
  gw = await spawnGateway({ env, seeded: true });
  const post = async (p: string, body: unknown, headers: Record<string, string> = {}) =>
    ((await (await fetch(`${gw.url}${p}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json()) as { data: unknown }).data;
  const reg = (await post('/api/v1/auth/register', { email: 'slow@example.com', password: 'long enough pw', name: 'S' })) as { tokens: { accessToken: string } };
  key = ((await post('/api/v1/api-keys', { name: 'slow' }, { authorization: `Bearer ${reg.tokens.accessToken}` })) as { key: string }).key;
});

after(async () => {
  if (gw && gw.child.exitCode === null) {
    gw.child.kill('SIGTERM');
    await gw.exited;
  }
  await node?.close();
  rmSync(dir, { recursive: true, force: true });
});

const callBody = (i: number) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'eth_call', params: [{ to: `0x${'1'.repeat(40)}`, data: `0x${i.toString(16).padStart(8, '0')}` }, 'latest'] });

/**
 * The gateway's memory once it has collected its garbage (src/ops/bench-gc.ts): its resident
 * size and the bytes of answers it holds unsent (C60: `server.maxPendingBytes`).
 */
async function memory(): Promise<{ rss: number; pendingBytes: number }> {
  const seen = gw.output().split('bench-memory').length;
  process.kill(gw.child.pid as number, 'SIGUSR2');
  await waitFor(() => gw.output().split('bench-memory').length > seen, { what: 'the memory line' });
  const line = gw.output().split('bench-memory').at(-1) as string;
  return JSON.parse(line.slice(0, line.indexOf('\n'))) as { rss: number; pendingBytes: number };
}

/** The gateway's TCP connections on its listening port that are still established (its side of them). */
function established(): number {
  const port = Number(new URL(gw.url).port);
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${gw.child.pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${gw.child.pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {}
  }
  let n = 0;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols[3] === '01' && Number.parseInt((cols[1] ?? ':0').split(':')[1] as string, 16) === port && inodes.has(cols[9] as string)) n++;
  }
  return n;
}

/** Samples the gateway's memory until `done`: the most it held unsent and its resident size at most. */
async function sample(done: () => boolean, timeoutMs: number): Promise<{ pending: number; rss: number; gone: boolean; ms: number }> {
  const started = Date.now();
  let pending = 0;
  let rss = 0;
  for (;;) {
    const m = await memory();
    pending = Math.max(pending, m.pendingBytes);
    rss = Math.max(rss, m.rss);
    if (done()) return { pending, rss, gone: true, ms: Date.now() - started };
    if (Date.now() - started > timeoutMs) return { pending, rss, gone: false, ms: Date.now() - started };
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A client that reads: the whole answer over HTTP, its length. */
async function readingCall(i: number): Promise<number> {
  const res = await fetch(`${gw.url}/rpc/main/evm/50`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: callBody(i) });
  assert.equal(res.status, 200);
  return (await res.text()).length;
}

test('20 HTTP clients that never read a 16 MiB answer: the gateway holds at most server.maxPendingBytes (plus one answer) unsent for them, every such connection is cut within the write timeout, a reading client is still served (C60)', async (t) => {
  assert.ok((await readingCall(0)) > RESULT_BYTES, 'a reading client gets the whole answer');
  const base = (await memory()).rss;
  const before = established();
  const sentBefore = node.answersSent();
  const sockets: net.Socket[] = [];
  const { hostname, port } = new URL(gw.url);
  for (let i = 0; i < CLIENTS; i++) {
    const s = net.connect({ host: hostname, port: Number(port) });
    s.on('error', () => {});
    s.once('connect', () => {
      const body = callBody(100 + i);
      s.write(`POST /rpc/main/evm/50 HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nX-API-Key: ${key}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      s.pause(); // and never reads
    });
    sockets.push(s);
  }
  try {
    await waitFor(() => node.answersSent() >= sentBefore + CLIENTS, { timeoutMs: 30_000, what: 'every answer done at the node' });
    const { pending, rss, gone, ms } = await sample(() => established() <= before, GONE_WITHIN_MS);
    assert.ok(gone, `${established() - before} connections that never read are still open after ${ms} ms`);
    assert.ok(pending <= MAX_PENDING + ANSWER_BYTES, `the gateway held ${Math.round(pending / MB)} MiB unsent`);
    t.diagnostic(`connections gone ${ms} ms after the node's last answer; held unsent at most ${Math.round(pending / MB)} MiB; resident size grew ${Math.round((rss - base) / MB)} MiB`);
    // The gateway goes on serving whoever reads.
    assert.ok((await readingCall(1)) > RESULT_BYTES);
  } finally {
    for (const s of sockets) s.destroy();
  }
});

test('20 WebSocket clients that pause their socket: the same bound on unsent bytes, each connection is cut within the write timeout, a reading client is still served (C60)', async (t) => {
  const address = `${gw.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${key}`;
  // A reading WebSocket client first (the code path warmed up, as for HTTP).
  const reader = new WebSocket(address);
  await new Promise((resolve, reject) => reader.once('open', resolve).once('error', reject));
  reader.send(callBody(200));
  const first = await new Promise<Buffer>((resolve) => reader.once('message', (d: Buffer) => resolve(d)));
  assert.ok(first.length > RESULT_BYTES);
  const base = (await memory()).rss;
  const before = established();
  const sentBefore = node.answersSent();
  const clients: WebSocket[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const ws = new WebSocket(address);
    ws.on('error', () => {});
    clients.push(ws);
  }
  try {
    await Promise.all(clients.map((ws) => new Promise((resolve) => ws.once('open', resolve))));
    clients.forEach((ws, i) => {
      ws.send(callBody(300 + i));
      (ws as unknown as { _socket: net.Socket })._socket.pause(); // and never reads
    });
    await waitFor(() => node.answersSent() >= sentBefore + CLIENTS, { timeoutMs: 30_000, what: 'every answer done at the node' });
    const { pending, rss, gone, ms } = await sample(() => established() <= before, GONE_WITHIN_MS);
    assert.ok(gone, `${established() - before} WebSocket connections that never read are still open after ${ms} ms`);
    assert.ok(pending <= MAX_PENDING + ANSWER_BYTES, `the gateway held ${Math.round(pending / MB)} MiB unsent`);
    t.diagnostic(`connections gone ${ms} ms after the node's last answer; held unsent at most ${Math.round(pending / MB)} MiB; resident size grew ${Math.round((rss - base) / MB)} MiB`);
    // The reading client was not cut and is still served.
    reader.send(callBody(201));
    const next = await new Promise<Buffer>((resolve) => reader.once('message', (d: Buffer) => resolve(d)));
    assert.ok(next.length > RESULT_BYTES);
  } finally {
    for (const ws of clients) ws.terminate();
    reader.close();
  }
});
