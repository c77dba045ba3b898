// Limits and hygiene of the WebSocket endpoint, in front of a fake node that emits notifications
// on demand: slow readers are cut off with bounded memory, silent clients are dropped, per-key
// connection and per-connection subscription limits, message size, upstream failures, and the
// graceful stop (1001 to every client, upstream connections closed).
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import WebSocket from 'ws';
import type { WsConnection } from '../../../src/rpc/ws/connection.ts';
import { createKey, setTier, startTestApp, type TestApp } from '../../support/app.ts';
import { type Client, connect, type FakeWsNode, sleep, startFakeWsNode, tryUpgrade, withUpstreams, wsAddress } from '../../support/ws.ts';
import { waitFor } from '../../support/wait.ts';

setFlagsFromString('--expose-gc');
const MAX_BUFFERED = 256 * 1024;
const NETWORKS = ['native-mainnet', 'native-testnet', 'ethereum'];
const ADMIN_TOKEN = 'ws-hygiene-test-admin-token-0123456789';

let t: TestApp;
let node: FakeWsNode;
let stopped = false;

before(async () => {
  node = await startFakeWsNode();
  t = await startTestApp({
    listen: true,
    env: { ADMIN_TOKEN },
    overrides: {
      networks: withUpstreams({
        // HTTP upstreams are never reached here; only the WebSocket side matters.
        'native-mainnet': [{ http: 'http://127.0.0.1:9', ws: node.url }],
        'native-testnet': [{ http: 'http://127.0.0.1:9', ws: 'ws://127.0.0.1:9' }], // nothing listens
        ethereum: [{ http: 'http://127.0.0.1:9' }], // no WebSocket upstream at all
      }),
      // C60: a client that reads nothing of its queue is cut soon after its 1013.
      server: { writeTimeoutMs: 500 },
      ws: {
        pingIntervalMs: 200,
        // Long enough that a paused client is cut by its queue, not first by its missing pongs, on a busy machine.
        idleTimeoutMs: 1_500,
        maxBufferedBytes: MAX_BUFFERED,
        maxPayloadBytes: 4096,
        upstreamTimeoutMs: 1_000,
        reconnectMinMs: 100,
        closeGraceMs: 1_000,
        plans: { free: { connectionsPerKey: 3, subscriptionsPerConnection: 2 } },
      },
    },
  });
});

after(async () => {
  if (!stopped) await t?.close();
  await node?.close();
});

/** A full collection (the tests run without --expose-gc). */
const gc = runInNewContext('gc') as () => void;

const newKey = async () => (await createKey(t.app, { networks: NETWORKS })).key;
const url = (key: string, network = '') => wsAddress(t, `/ws${network ? `/${network}` : ''}?apiKey=${key}`);
const serverSide = (keyId: string): WsConnection | undefined => [...t.app.parts.ws.connections].find((c) => c.key.keyId === keyId);

test('cuts off a client that stops reading once its queue passes ws.maxBufferedBytes; memory stays bounded and other clients go on', async () => {
  const slowKey = await createKey(t.app, { networks: NETWORKS });
  const readerKey = await newKey();

  // A reader that only counts (keeping 64 MiB of messages would blur the memory figure).
  let read = 0;
  const reader = new WebSocket(url(readerKey));
  await new Promise((r) => reader.once('open', r));
  reader.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }));
  await new Promise((r) => reader.once('message', r));
  reader.on('message', () => read++);

  const slow = await connect(url(slowKey.key));
  await slow.subscribe(['newHeads']);
  // Held weakly: the test must not keep the connection alive itself.
  const ref = new WeakRef(serverSide(slowKey.id) as WsConnection);
  assert.ok(ref.deref());
  const isClosed = () => ref.deref()?.closed ?? true;
  // The client stops reading: its TCP window fills, then the gateway's send queue grows.
  (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();

  const filler = 'f'.repeat(32 * 1024);
  const message = 32 * 1024 + 200;
  let sent = 0;
  // Notifications in bursts of 160 KiB (below the cap: the reader keeps up) until the cut.
  while (sent < 4_000 && !isClosed()) {
    for (let i = 0; i < 5; i++) if (node.emit('newHeads', { number: `0x${sent.toString(16)}`, filler })) sent++;
    await new Promise((r) => setImmediate(r));
  }
  await waitFor(isClosed, { timeoutMs: 5_000, what: 'the slow client to be cut off' });
  // The gateway's queue for the client is all it held for it: the cap plus one message at most.
  const peak = ref.deref()?.peakBufferedBytes ?? 0;
  assert.ok(peak > 0 && peak <= MAX_BUFFERED + message, `queue peaked at ${peak} bytes`);
  assert.ok(sent * message > 4 * MAX_BUFFERED, `only ${sent * message} bytes were sent before the cut`);
  // And once cut, nothing of it stays behind: the connection object, its queue and its socket
  // are collected (a count of process memory was tried here and is blurred by whatever else
  // the process does; an object that is collected cannot be retained).
  await waitFor(() => read >= sent, { timeoutMs: 10_000, what: 'the reader to get every notification' });
  // C60: closed with 1013, it leaves the set once its socket ends (at the latest after server.writeTimeoutMs).
  await waitFor(() => serverSide(slowKey.id) === undefined, { timeoutMs: 5_000, what: 'the connection to leave the set of open connections' });
  await waitFor(
    async () => {
      gc();
      await new Promise((r) => setTimeout(r, 20));
      return ref.deref() === undefined;
    },
    { timeoutMs: 5_000, what: 'the cut connection to be collected' },
  );

  // The client sees an abrupt end once it reads again; the reader goes on.
  (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  assert.equal((await slow.closed).code, 1006);
  await waitFor(() => read >= sent, { timeoutMs: 10_000, what: 'the reader to get every notification' });
  node.emit('newHeads', { number: '0xffff' });
  await waitFor(() => read === sent + 1, { timeoutMs: 5_000, what: 'the reader to get the next notification' });
  reader.close();
});

test('drops a client that answers no ping within ws.idleTimeoutMs, and keeps one that does', async () => {
  const key = await newKey();
  const silent = await connect(url(key), { autoPong: false });
  const alive = await connect(url(key));
  const closed = await Promise.race([silent.closed, sleep(3_000).then(() => null)]);
  assert.equal(closed?.code, 1006, 'the silent client was terminated');
  assert.equal(alive.ws.readyState, WebSocket.OPEN);
  assert.equal((await alive.call('eth_chainId')).error?.code, -32000, 'still answered (the HTTP upstream here is down)');
  await alive.close();
});

test('refuses connections past the per-key limit with 429 (-32005), and admits again once one closes', async () => {
  const k = await createKey(t.app, { networks: NETWORKS });
  const open = [await connect(url(k.key)), await connect(url(k.key)), await connect(url(k.key))];
  const refused = await tryUpgrade(url(k.key));
  assert.equal(refused.status, 429);
  const err = JSON.parse(refused.body).error;
  assert.equal(err.code, -32005);
  assert.deepEqual(err.data, { limit: 'connections', max: 3 });
  assert.ok(refused.headers['x-ratelimit-limit']);
  assert.equal(t.app.parts.ws.connectionsOf(k.id), 3);

  await open[0]?.close();
  await waitFor(() => t.app.parts.ws.connectionsOf(k.id) === 2, { timeoutMs: 2_000, what: 'the slot to be released' });
  const again = await connect(url(k.key));
  for (const c of [again, ...open.slice(1)]) await c.close();
});

test('upgrades fired at once past the per-key limit: exactly 3 of 7 open, the rest refused with 429, and every slot is given back', async () => {
  const k = await createKey(t.app, { networks: NETWORKS });
  const tries = await Promise.all(Array.from({ length: 7 }, () => tryUpgrade(url(k.key))));
  assert.equal(tries.filter((r) => r.status === 101).length, 3, JSON.stringify(tries.map((r) => r.status)));
  assert.equal(tries.filter((r) => r.status === 429).length, 4);
  assert.equal(t.app.parts.ws.connectionsOf(k.id), 3);
  for (const r of tries) r.ws?.close();
  await waitFor(() => t.app.parts.ws.connectionsOf(k.id) === 0, { timeoutMs: 2_000, what: 'the slots to be released' });
});

test('an upgrade ws refuses (a bad Sec-WebSocket-Key) gives its connection slot back at once', async () => {
  const k = await createKey(t.app, { networks: NETWORKS });
  const address = new URL(url(k.key));
  // Past the per-key limit of 3 if a refused handshake kept its slot.
  for (let i = 0; i < 4; i++) {
    const socket = net.connect(Number(address.port), address.hostname);
    const status = await new Promise<string>((resolve, reject) => {
      socket.on('connect', () =>
        socket.write(`GET ${address.pathname}${address.search} HTTP/1.1\r\nHost: ${address.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: not-a-key\r\nSec-WebSocket-Version: 13\r\n\r\n`),
      );
      socket.once('data', (d) => resolve(String(d).split('\r\n', 1)[0] ?? ''));
      socket.on('error', reject);
    });
    socket.destroy();
    assert.equal(status, 'HTTP/1.1 400 Bad Request');
  }
  await waitFor(() => t.app.parts.ws.connectionsOf(k.id) === 0, { timeoutMs: 2_000, what: 'the refused upgrades\' slots to be given back' });
  const open = [await connect(url(k.key)), await connect(url(k.key)), await connect(url(k.key))];
  assert.equal(t.app.parts.ws.connectionsOf(k.id), 3);
  for (const c of open) await c.close();
});

test("a connection's socket keeps ws's own close and error listeners alone: nothing of the upgrade or the HTTP drain stays on it (memory per connection, docs/scaling.md)", async () => {
  const k = await createKey(t.app, { networks: NETWORKS });
  const c = await connect(url(k.key));
  const socket = (serverSide(k.id)?.ws as unknown as { _socket: net.Socket })._socket;
  assert.equal(socket.listenerCount('close'), 1);
  assert.equal(socket.listenerCount('error'), 1);
  // The drain's record of the connection's requests is let go of at the upgrade: what stays on
  // the socket is one empty slot, no object and no boxed time.
  const drainState = Object.getOwnPropertySymbols(socket).filter((s) => s.description === 'drain state');
  assert.equal(drainState.length, 1);
  assert.equal((socket as unknown as Record<symbol, unknown>)[drainState[0] as symbol], undefined);
  // The last pong's time is a small integer (held in the field, not boxed as an epoch time would be).
  const conn = serverSide(k.id) as WsConnection;
  assert.ok(Number.isInteger(conn.lastPongAt) && conn.lastPongAt >= 0 && conn.lastPongAt < 2 ** 30, String(conn.lastPongAt));
  // Its close still gives the slot back (ws's listener, through the connection).
  await c.close();
  await waitFor(() => t.app.parts.ws.connectionsOf(k.id) === 0, { timeoutMs: 2_000, what: 'the slot to be released' });
});

test("a connection's WebSocket holds no listener of its own, and a key's connections hold the key they sent once (memory per connection, docs/scaling.md)", async () => {
  const k = await createKey(t.app, { networks: NETWORKS });
  const clients = [await connect(url(k.key)), await connect(url(k.key))];
  const conns = [...t.app.parts.ws.connections].filter((c) => c.key.keyId === k.id);
  assert.equal(conns.length, 2);
  const [a, b] = conns as [WsConnection, WsConnection];
  // Its events reach the connection without a listener table per client...
  assert.deepEqual(a.ws.eventNames(), []);
  assert.deepEqual(b.ws.eventNames(), []);
  // ...and still do: a message is answered, a close gives the slot back.
  assert.match(await (clients[0] as Client).subscribe(['newHeads']), /^0x[0-9a-f]{32}$/);
  // One object for the key of both: the same text sent twice is held once.
  assert.equal(a.slotKey, b.slotKey);
  assert.equal(a.slotKey.text, k.key);
  for (const c of clients) await c.close();
  await waitFor(() => t.app.parts.ws.connectionsOf(k.id) === 0, { timeoutMs: 2_000, what: 'the slots to be released' });
});

test('subscriptions kept one by one: each is served and unsubscribed on its own, in any order, and leaves its hub; a close ends the rest', async () => {
  const subscribers = () => t.app.parts.upstreams.hub('native-mainnet').stats().subscribers;
  // Two (the one, then a list) and twelve (past the list, a Map by id) on a pro key (100 a connection).
  const proKey = async () => {
    const { key, user } = await createKey(t.app, { networks: NETWORKS });
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    return key;
  };
  let block = 0x6000_0000 + Math.floor(Math.random() * 1e6);
  const emitHead = () => `0x${(++block).toString(16)}`;
  for (const [count, order] of [
    [2, [0, 1]],
    [2, [1, 0]],
    [12, [5, 0, 11, 7, 1, 2, 3, 4, 6, 8, 9, 10]],
  ] as const) {
    const before = subscribers();
    const c = await connect(url(count > 2 ? await proKey() : await newKey()));
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(await c.subscribe(['newHeads']));
    assert.equal(subscribers(), before + count);
    assert.equal(new Set(ids).size, count);
    let head = emitHead();
    assert.equal(node.emit('newHeads', { number: head }), 1);
    for (const id of ids) await c.next((m) => m.params?.subscription === id && (m.params.result as { number: string }).number === head);
    assert.equal((await c.call('eth_unsubscribe', ['0x00000000000000000000000000000000'])).result, false);
    const left = new Set(ids);
    for (const i of order) {
      const id = ids[i] as string;
      assert.equal((await c.call('eth_unsubscribe', [id])).result, true, `${count}: ${i} unsubscribed`);
      assert.equal((await c.call('eth_unsubscribe', [id])).result, false, `${count}: ${i} already gone`);
      left.delete(id);
      assert.equal(subscribers(), before + left.size);
      if (left.size === 0) break;
      head = emitHead();
      assert.equal(node.emit('newHeads', { number: head }), 1, 'the others still hold the topic');
      for (const other of left) await c.next((m) => m.params?.subscription === other && (m.params.result as { number: string }).number === head);
      assert.equal(c.messages.filter((m) => m.params?.subscription === id && (m.params.result as { number: string }).number === head).length, 0, 'none after its unsubscribe');
      // Half way through the twelve, the rest end with the connection.
      if (count > 2 && left.size === 6) break;
    }
    await c.close();
    await waitFor(() => subscribers() === before, { timeoutMs: 2_000, what: 'the hub to let go of a closed connection\'s subscriptions' });
  }
});

test('refuses subscriptions past the per-connection limit with -32005; an unsubscribe frees a place', async () => {
  const c = await connect(url(await newKey()));
  const first = await c.subscribe(['newHeads']);
  await c.subscribe(['newPendingTransactions']);
  const third = await c.call('eth_subscribe', ['logs', {}]);
  assert.equal(third.error?.code, -32005);
  assert.deepEqual(third.error?.data, { limit: 'subscriptions', max: 2 });
  assert.equal((await c.call('eth_unsubscribe', [first])).result, true);
  assert.match(await c.subscribe(['logs', {}]), /^0x/);
  await c.close();
});

test('closes with 1009 a message larger than ws.maxPayloadBytes', async () => {
  const c = await connect(url(await newKey()));
  c.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [{ data: `0x${'00'.repeat(4096)}` }, 'latest'] }));
  assert.equal((await c.closed).code, 1009);
});

test('answers -32000 when no upstream takes the subscription: no WebSocket upstream, or none reachable in time', async () => {
  const key = await newKey();
  const none = await connect(url(key, 'ethereum'));
  const noWs = await none.call('eth_subscribe', ['newHeads']);
  assert.equal(noWs.error?.code, -32000);
  assert.doesNotMatch(JSON.stringify(noWs), /127\.0\.0\.1/, 'no upstream address leaks');
  const down = await connect(url(key, 'native-testnet'));
  const started = Date.now();
  const unreachable = await down.call('eth_subscribe', ['newHeads']);
  assert.equal(unreachable.error?.code, -32000);
  assert.ok(Date.now() - started < 3_000);
  assert.doesNotMatch(JSON.stringify(unreachable), /127\.0\.0\.1/);
  await none.close();
  await down.close();
});

test('a notification is serialised once per topic, whatever the number of clients: each gets the same bytes but its own subscription id (C60, docs/scaling.md)', async () => {
  const keys = [await newKey(), await newKey()];
  const clients = await Promise.all([0, 1, 2, 3].map((i) => connect(url(keys[i % 2] as string))));
  const ids = await Promise.all(clients.map((c) => c.subscribe(['newHeads'])));
  assert.equal(new Set(ids).size, 4);
  const built = () => t.app.parts.ws.stats().framesBuilt;
  const hex = (n: number) => `0x${n.toString(16)}`;
  // Frame lengths of each size class of RFC 6455 (7-bit, 16-bit and 64-bit lengths), and text that is not ASCII.
  for (const extra of ['', 'é'.repeat(200), 'x'.repeat(70_000)]) {
    const n = 0x7000_0000 + Math.floor(Math.random() * 1e6);
    const header = { number: hex(n), hash: `0x${n.toString(16).padStart(64, 'a')}`, ...(extra ? { extraData: extra } : {}) };
    const before = built();
    assert.equal(node.emit('newHeads', header), 1, 'one upstream subscription');
    const body = JSON.stringify(header);
    for (const [i, c] of clients.entries()) {
      const note = await c.next((m) => m.params?.subscription === ids[i] && (m.params.result as { number?: string }).number === hex(n));
      assert.deepEqual(note.params?.result, header);
      // The bytes on the wire: the node's result as it wrote it, under this client's id.
      const raw = c.raw[c.messages.indexOf(note)];
      assert.equal(raw, `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${ids[i]}","result":${body}}}`);
    }
    assert.equal(built() - before, 1, 'one frame for four clients');
  }
  await Promise.all(clients.map((c) => c.close()));
});

test('on a graceful stop every client gets a 1001 close and the hubs close their upstream connections', async () => {
  const key = await newKey();
  const a = await connect(url(key));
  const b = await connect(url(key));
  await a.subscribe(['newHeads']);
  await waitFor(() => node.connections === 1, { timeoutMs: 2_000, what: 'the hub connected upstream' });
  stopped = true;
  await t.close();
  assert.equal((await a.closed).code, 1001);
  assert.equal((await b.closed).code, 1001);
  await waitFor(() => node.connections === 0, { timeoutMs: 2_000, what: 'the upstream connection to close' });
});
