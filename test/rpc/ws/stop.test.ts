// C57 on the WebSocket side: a stop lets the calls in flight on each connection be answered before
// its 1001, turns new messages away, ends the subscriptions' notifications, is bounded by the same
// drain limit as HTTP, and counts as usage exactly the calls answered. Real parts throughout (the
// app listening, real clients); the node is a scripted one (test/support/fake-node.ts) that can
// be slow on demand, which a real node cannot.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { after, test } from 'node:test';
import { startFakeNode, type FakeNode } from '../../support/fake-node.ts';
import { createKey, startTestApp, type TestApp } from '../../support/app.ts';
import { connect, type FakeWsNode, sleep, startFakeWsNode, withUpstreams, wsAddress } from '../../support/ws.ts';
import { waitFor } from '../../support/wait.ts';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** A gateway whose native-mainnet node is `node` (HTTP) and `wsNode` (subscriptions). */
async function gateway(): Promise<{ t: TestApp; node: FakeNode; wsNode: FakeWsNode }> {
  const node = await startFakeNode({ head: 0x1234 });
  const wsNode = await startFakeWsNode();
  cleanups.push(() => node.close(), () => wsNode.close());
  const t = await startTestApp({
    listen: true,
    overrides: {
      networks: withUpstreams({ 'native-mainnet': [{ http: node.url, ws: wsNode.url }] }),
      plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } },
      // No response cache: every call reaches the node.
      cache: { enabled: false },
      ws: { closeGraceMs: 1_000 },
    },
  });
  let closed = false;
  cleanups.push(async () => {
    if (!closed) await t.app.close();
    await t.storage.close();
  });
  return {
    t: {
      ...t,
      close: async () => {
        closed = true;
        await t.app.close();
      },
    },
    node,
    wsNode,
  };
}

/** The stop's connection step as main.ts (and each worker) runs it: the HTTP drain and the WebSocket stop, side by side, with the same limit. */
function stopConnections(t: TestApp, drainMs: number): Promise<unknown> {
  return Promise.all([t.app.parts.drain.drain(drainMs), t.app.parts.ws.close(drainMs)]);
}

/** The key's requests today as stored, once the app's close has written the last usage. */
async function storedRequests(t: TestApp, userId: string, keyId: string): Promise<number> {
  return (await t.app.parts.usageQueries.usageByKey(userId, [keyId])).get(keyId)?.daily ?? 0;
}

const address = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

test('a stop answers the WebSocket calls in flight, then closes with 1001; a message sent after the stop began is turned away (-32603, retry hint); idle connections get their 1001 at once; subscriptions stop; usage counts the answered calls only (C57)', async () => {
  const { t, node, wsNode } = await gateway();
  const k = await createKey(t.app);
  const url = wsAddress(t, `/ws/native-mainnet?apiKey=${k.key}`);
  const busy = await connect(url);
  const idle = await connect(url);
  const idleClosed = idle.closed.then((c) => ({ ...c, answered: busy.messages.some((m) => m.id === 100) }));

  const sub = await busy.subscribe(['newHeads']);
  await waitFor(() => wsNode.live('newHeads') === 1, { what: 'the upstream subscription' });
  assert.equal(wsNode.emit('newHeads', { number: '0x1', hash: `0x${'1'.repeat(64)}` }), 1);
  await busy.notification(sub);

  // A call in flight at a slow node when the stop begins.
  node.setDelay(500);
  busy.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 100, method: 'eth_getBalance', params: [address(1), 'latest'] }));
  await waitFor(() => node.callCount('eth_getBalance') >= 1, { what: 'the call to reach the node' });
  const stopped = stopConnections(t, 5_000);

  // A message after the stop began: refused at once, under its id, with the retry hint of HTTP's 503.
  busy.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 101, method: 'eth_getBalance', params: [address(2), 'latest'] }));
  const refused = await busy.next((m) => m.id === 101, 2_000);
  assert.equal(refused.error?.code, -32603, JSON.stringify(refused));
  assert.match(refused.error?.message ?? '', /shutting down/);
  assert.deepEqual(refused.error?.data, { retryAfter: 2 });
  assert.equal(busy.messages.some((m) => m.id === 100), false, 'refused before the call in flight is answered');

  // The idle connection is closed at once, without waiting for the busy one.
  const idleClose = await idleClosed;
  assert.equal(idleClose.code, 1001);
  assert.equal(idleClose.answered, false, 'the idle connection closed before the call in flight was answered');

  // No notification after the stop began.
  const notesBefore = busy.notificationsOf(sub).length;
  wsNode.emit('newHeads', { number: '0x2', hash: `0x${'2'.repeat(64)}` });

  // The call in flight is answered, and the 1001 comes after its answer.
  const answer = await busy.next((m) => m.id === 100, 5_000);
  assert.deepEqual(answer.result, { method: 'eth_getBalance', params: [address(1), 'latest'] });
  const close = await busy.closed;
  assert.equal(close.code, 1001);
  assert.ok(busy.messages.indexOf(answer) >= 0);
  assert.equal(busy.notificationsOf(sub).length, notesBefore, 'no notification during the stop');
  assert.equal(node.callCount('eth_getBalance'), 1, 'the refused call never reached the node');

  await stopped;
  await t.close(); // writes the last usage
  // eth_subscribe and the call answered during the stop; not the call turned away.
  assert.equal(await storedRequests(t, k.user.id, k.id), 2);
});

test('a WebSocket call slower than the drain limit: its connection is closed with 1001 at the limit, and the call, never answered, is not counted (C57)', async () => {
  const { t, node } = await gateway();
  const k = await createKey(t.app);
  const c = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${k.key}`));
  // One call answered before the stop: counted.
  assert.deepEqual((await c.call('eth_getBalance', [address(3), 'latest'])).result, { method: 'eth_getBalance', params: [address(3), 'latest'] });

  const DRAIN_MS = 400;
  const NODE_MS = 2_500;
  node.setDelay(NODE_MS);
  c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 200, method: 'eth_getBalance', params: [address(4), 'latest'] }));
  await waitFor(() => node.callCount('eth_getBalance') >= 2, { what: 'the slow call to reach the node' });
  const at = performance.now();
  const stopped = stopConnections(t, DRAIN_MS);
  const close = await c.closed;
  const closedAfter = performance.now() - at;
  assert.equal(close.code, 1001);
  // The drain less the close handshake's time (closeGraceMs 1,000, at most half the drain).
  assert.ok(closedAfter >= DRAIN_MS / 2 - 50 && closedAfter < NODE_MS - 500, `closed at the drain limit: ${Math.round(closedAfter)} ms`);
  assert.equal(c.messages.some((m) => m.id === 200), false, 'the slow call was not answered');
  await stopped;
  assert.ok(t.logs.some((l) => l.includes('websocket calls still running after the drain')), 'the cut is logged');

  // The node's late answer reaches the gateway before the app closes: it must still not be counted.
  const sent = node.answersSent();
  await waitFor(() => node.answersSent() > sent, { timeoutMs: NODE_MS * 3, what: 'the node to answer the slow call' });
  await sleep(100);
  await t.close(); // writes the last usage
  assert.equal(await storedRequests(t, k.user.id, k.id), 1, 'the call answered before the stop only');
});

test('a client that never answers the close does not hold the stop past the drain limit: the last usage write keeps its time (C57)', async () => {
  const { t } = await gateway();
  const k = await createKey(t.app);
  const url = new URL(wsAddress(t, `/ws/native-mainnet?apiKey=${k.key}`));
  const socket = net.connect(Number(url.port), url.hostname);
  cleanups.push(async () => void socket.destroy());
  await once(socket, 'connect');
  socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  const [head] = (await once(socket, 'data')) as [Buffer];
  assert.match(head.toString(), /^HTTP\/1\.1 101 /);
  socket.pause(); // reads nothing more: the close frame is never answered

  const DRAIN_MS = 400;
  const at = performance.now();
  await stopConnections(t, DRAIN_MS);
  const took = performance.now() - at;
  // ws.closeGraceMs is 1,000 here: a stop that waited for it after the drain would take 1.4 s.
  assert.ok(took < DRAIN_MS + 300, `the WebSocket stop took ${Math.round(took)} ms, drain limit ${DRAIN_MS} ms`);
  await t.close();
});

test('outside a stop, a WebSocket call whose client left before its answer is counted, as over HTTP: the node did the work (C27, C57)', async () => {
  const { t, node } = await gateway();
  const k = await createKey(t.app);
  const c = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${k.key}`));
  node.setDelay(300);
  c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [address(5), 'latest'] }));
  await waitFor(() => node.callCount('eth_getBalance') >= 1, { what: 'the call to reach the node' });
  c.ws.close();
  await c.closed;
  const sent = node.answersSent();
  await waitFor(() => node.answersSent() > sent, { what: 'the node to answer' });
  await sleep(100);
  await t.close(); // writes the last usage
  assert.equal(await storedRequests(t, k.user.id, k.id), 1);
});
