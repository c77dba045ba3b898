// The floor for any Node.js WebSocket fan-out on this machine: a bare `ws` server (the package the
// gateway uses) with nothing else (no key, limits, routing, metrics, per-client subscription ids).
// It subscribes to the node once per topic (newHeads and logs, as the gateway does upstream), builds
// each notification's frame once per topic and writes it to every client of the topic. Clients
// subscribe as to a node: `eth_subscribe` is answered with a subscription id, one per topic for
// every client (the frame is then the same bytes for all: a prebuilt frame). The gateway's fan-out
// against this one is the cost of the gateway's own code (bench/scenarios/ws.ts).
//
// Run as its own process: `node --expose-gc --import tsx bench/lib/targets/bare-broadcaster.ts
// <node-ws-url> [logs-filter-json]`; it prints `listening <port>` once the node has confirmed both
// subscriptions. SIGUSR2 collects and prints its memory as the gateway does (src/ops/bench-gc.ts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { installBenchGc } from '../../../src/ops/bench-gc.ts';

type Topic = 'newHeads' | 'logs';
const nodeUrl = process.argv[2];
if (!nodeUrl) throw new Error('usage: bare-broadcaster.ts <node-ws-url> [logs-filter-json]');
const logsFilter: unknown = JSON.parse(process.argv[3] ?? '{}');

// As long as the gateway's ids (0x and 32 hex digits), so both frames have the same length.
const TOPIC_IDS: Record<Topic, string> = { newHeads: `0x${'1'.repeat(32)}`, logs: `0x${'2'.repeat(32)}` };
const subscribers: Record<Topic, Set<WebSocket>> = { newHeads: new Set(), logs: new Set() };
// The same notification text the gateway sends (src/rpc/ws/frame.ts), in three parts around the node's result.
const heads: Record<Topic, Buffer> = {
  newHeads: Buffer.from(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${TOPIC_IDS.newHeads}","result":`),
  logs: Buffer.from(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${TOPIC_IDS.logs}","result":`),
};
const END = Buffer.from('}}');
const RESULT = Buffer.from('","result":');
const NOTIFICATION = Buffer.from('"method":"eth_subscription"');
let connections = 0;
let framesBuilt = 0;

// The bench's own target: the memory report is always on (it still needs --expose-gc); heap
// snapshots too when the bench asks (BENCH_HEAP_SNAPSHOT_DIR, ws --heap-snapshots).
installBenchGc({ BENCH_GC: '1', BENCH_HEAP_SNAPSHOT_DIR: process.env.BENCH_HEAP_SNAPSHOT_DIR }, () => ({ connections, framesBuilt }));

const server = http.createServer((_req, res) => res.writeHead(426).end());
const wss = new WebSocketServer({ server, perMessageDeflate: false, clientTracking: false });
wss.on('connection', (ws) => {
  connections++;
  ws.on('message', (data: Buffer) => {
    let m: { id?: unknown; method?: unknown; params?: unknown[] };
    try {
      m = JSON.parse(data.toString()) as typeof m;
    } catch {
      ws.send('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
      return;
    }
    const id = m.id ?? null;
    if (m.method === 'eth_subscribe') {
      const topic: Topic = m.params?.[0] === 'logs' ? 'logs' : 'newHeads';
      subscribers[topic].add(ws);
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, result: TOPIC_IDS[topic] }));
    } else if (m.method === 'eth_unsubscribe') {
      const topic = (Object.keys(TOPIC_IDS) as Topic[]).find((t) => TOPIC_IDS[t] === m.params?.[0]);
      if (topic) subscribers[topic].delete(ws);
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, result: topic !== undefined }));
    } else {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } }));
    }
  });
  ws.once('close', () => {
    connections--;
    subscribers.newHeads.delete(ws);
    subscribers.logs.delete(ws);
  });
});

/**
 * One notification from the node to every client of its topic. The node's result is taken as its
 * bytes (the fake node's notifications end with the result and `}}`: nothing is parsed), and the
 * frame's payload is built once. ws 8 has no public call that writes one prepared frame to many
 * sockets (`Sender.frame` frames, but writing it means the socket ws keeps private), so each client
 * gets `send` of the same Buffer: ws adds a 2-to-10-byte header per client and writes both parts
 * (cork, write, write, uncork: one writev), copying nothing.
 */
function broadcast(topic: Topic, data: Buffer): void {
  const start = data.indexOf(RESULT);
  if (start < 0) return;
  const payload = Buffer.concat([heads[topic], data.subarray(start + RESULT.length, data.length - END.length), END]);
  framesBuilt++;
  for (const client of subscribers[topic]) client.send(payload, { binary: false });
}

const upstream = new WebSocket(nodeUrl, { perMessageDeflate: false });
const byNodeId = new Map<string, Topic>();
const SUBSCRIBE_IDS: Record<number, Topic> = { 1: 'newHeads', 2: 'logs' };
upstream.on('open', () => {
  upstream.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}');
  upstream.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['logs', logsFilter] }));
});
upstream.on('message', (data: Buffer) => {
  if (data.includes(NOTIFICATION)) {
    // The node's subscription id: after `"subscription":"`, 34 bytes at most in practice, read as text.
    const at = data.indexOf('"subscription":"') + '"subscription":"'.length;
    const topic = byNodeId.get(data.toString('latin1', at, data.indexOf('"', at)));
    if (topic) broadcast(topic, data);
    return;
  }
  const answer = JSON.parse(data.toString()) as { id: number; result?: unknown; error?: unknown };
  const topic = SUBSCRIBE_IDS[answer.id];
  if (!topic || typeof answer.result !== 'string') throw new Error(`the node refused a subscription: ${data.toString().slice(0, 300)}`);
  byNodeId.set(answer.result, topic);
  if (byNodeId.size === 2) server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as AddressInfo).port}`));
});
upstream.on('close', () => {
  if (!stopping) throw new Error('the node closed the connection');
});
upstream.on('error', (err) => {
  throw err;
});

let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
  upstream.terminate();
  server.closeAllConnections();
  server.close(() => process.exit(0));
  // Upgraded sockets are no longer the HTTP server's: closeAllConnections leaves them open.
  setTimeout(() => process.exit(0), 500).unref();
});
