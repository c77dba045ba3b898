// One of bench/scenarios/ws.ts's client processes: opens `count` WebSocket connections to the gateway, each
// subscribed to newHeads (and every `logsEvery`-th, by global index, to logs too), and records when
// each notification arrives. The fake node writes its send time (process.hrtime, CLOCK_MONOTONIC:
// one clock for every process of the machine) into each notification, so the delay is node ->
// this client, whatever process receives it. Driven by its parent over IPC; `disconnect` closes
// every connection and forgets what was received, so the same processes serve the next target.
import { once } from 'node:events';
import WebSocket from 'ws';

interface Init {
  type: 'init';
  url: string;
  first: number;
  count: number;
  logsEvery: number;
  logsFilter: unknown;
  /** Source addresses to spread connections over (127.0.0.x), so one 4-tuple range is not exhausted. */
  localAddresses: string[];
  concurrency: number;
}
type FromParent = Init | { type: 'report' } | { type: 'disconnect' } | { type: 'close' };

const HEAD_MARK = Buffer.from('"extraData":"0x');
const LOG_MARK = Buffer.from('"data":"0x');

/** Per notification (its send time in ns, as hex): how many clients got it, and the latest delay. */
const received = new Map<string, { kind: 'newHeads' | 'logs'; count: number; maxNs: number }>();
/** Every delay, in 0.1 ms buckets (up to 10 s), for the median client. */
const buckets = new Uint32Array(100_001);
const clients: WebSocket[] = [];
let unexpected = 0;
let closedEarly = 0;

function onNotification(data: Buffer): void {
  const at = process.hrtime.bigint();
  let kind: 'newHeads' | 'logs' = 'newHeads';
  let i = data.indexOf(HEAD_MARK);
  let start = i + HEAD_MARK.length;
  if (i < 0) {
    kind = 'logs';
    i = data.indexOf(LOG_MARK);
    start = i + LOG_MARK.length;
  }
  if (i < 0) {
    unexpected++;
    return;
  }
  const hex = data.toString('latin1', start, data.indexOf(0x22, start));
  const ns = Number(at - BigInt(`0x${hex}`));
  let r = received.get(hex);
  if (!r) received.set(hex, (r = { kind, count: 0, maxNs: 0 }));
  r.count++;
  if (ns > r.maxNs) r.maxNs = ns;
  buckets[Math.min(buckets.length - 1, Math.max(0, Math.round(ns / 100_000)))]!++;
}

function onClose(): void {
  if (!closing) closedEarly++;
}
let closing = false;

/** Opens one connection and makes its subscriptions; resolves when the gateway confirmed them. */
function open(init: Init, index: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const localAddress = init.localAddresses[index % init.localAddresses.length];
    const ws = new WebSocket(init.url, { perMessageDeflate: false, ...(localAddress ? { localAddress } : {}) });
    clients.push(ws);
    const wants = index % init.logsEvery === 0 ? 2 : 1;
    let answers = 0;
    const onAnswer = (data: Buffer) => {
      if (!data.includes('"result":"0x')) return reject(new Error(`eth_subscribe failed: ${data.toString().slice(0, 200)}`));
      if (++answers < wants) return;
      ws.off('message', onAnswer);
      ws.on('message', onNotification);
      resolve();
    };
    ws.on('message', onAnswer);
    ws.once('error', reject);
    ws.once('close', onClose);
    ws.once('open', () => {
      ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}');
      if (wants === 2) ws.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['logs', init.logsFilter] }));
    });
  });
}

async function openAll(init: Init): Promise<void> {
  const started = performance.now();
  let next = 0;
  const failures: string[] = [];
  const worker = async () => {
    while (next < init.count) {
      const i = init.first + next++;
      await open(init, i).catch((err: Error) => failures.push(err.message));
    }
  };
  await Promise.all(Array.from({ length: init.concurrency }, worker));
  process.send?.({ type: 'opened', ms: performance.now() - started, failures: failures.length, firstFailure: failures[0] });
}

/** Closes every connection, waits for their close, and starts the counts anew. */
async function disconnect(): Promise<void> {
  closing = true;
  const closed: Array<Promise<unknown>> = [];
  for (const c of clients) {
    if (c.readyState === WebSocket.CLOSED) continue;
    closed.push(once(c, 'close'));
    c.terminate();
  }
  await Promise.all(closed);
  clients.length = 0;
  received.clear();
  buckets.fill(0);
  unexpected = 0;
  closedEarly = 0;
  closing = false;
  process.send?.({ type: 'disconnected' });
}

process.on('message', (m: FromParent) => {
  if (m.type === 'init') void openAll(m);
  else if (m.type === 'disconnect') void disconnect();
  else if (m.type === 'report') {
    process.send?.({ type: 'report', received: [...received].map(([hex, r]) => ({ sent: hex, ...r })), buckets: [...buckets.entries()].filter(([, n]) => n > 0), unexpected, closedEarly });
  } else if (m.type === 'close') {
    closing = true;
    for (const c of clients) c.terminate();
    setTimeout(() => process.exit(0), 100);
  }
});
process.on('disconnect', () => process.exit(0));
process.send?.({ type: 'ready' });
