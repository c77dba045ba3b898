// C60: the room a pool's attempts take for large answers as they are read, and give back however
// the attempt ends (answered, cut over rpc.maxResponseBytes, the node gone mid-answer); an answer
// that finds no room is a final failure of its own kind, and the node is not blamed for it.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { AnswerRoomError } from '../../src/errors/upstream.ts';
import { toRpcError } from '../../src/errors/rpc.ts';
import { type AnswerRoom, ROOM_FROM_BYTES } from '../../src/upstreams/http/types.ts';
import { call, closeAfter, pool } from './helpers.ts';

/** A room that counts what it lends, and lends nothing while `refusing`. */
class CountingRoom implements AnswerRoom {
  held = 0;
  most = 0;
  takes = 0;
  refusing = false;
  take(bytes: number): boolean {
    this.takes++;
    if (this.refusing) return false;
    this.held += bytes;
    this.most = Math.max(this.most, this.held);
    return true;
  }
  give(bytes: number): void {
    this.held -= bytes;
  }
}

/**
 * A node answering eth_call with a result of `bytes` (chunked, or with a Content-Length when
 * `declared`); eth_getLogs with an answer cut off half way (the connection destroyed); anything
 * else with a small result.
 */
async function node(bytes: number, declared = false): Promise<{ url: string; calls: () => number; close(): Promise<void> }> {
  let calls = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const { id, method } = JSON.parse(body) as { id: number; method: string };
      if (method === 'eth_call' || method === 'eth_getLogs') calls++;
      const text = method === 'eth_call' || method === 'eth_getLogs' ? `{"jsonrpc":"2.0","id":${id},"result":"0x${'0'.repeat(bytes)}"}` : `{"jsonrpc":"2.0","id":${id},"result":"0x10"}`;
      if (method === 'eth_getLogs') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(text.slice(0, text.length / 2), () => res.destroy());
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', ...(declared ? { 'content-length': String(Buffer.byteLength(text)) } : {}) });
      res.end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return closeAfter({
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls: () => calls,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}

const afterImmediate = () => new Promise((r) => setImmediate(r));

for (const declared of [false, true]) {
  test(`a large answer (${declared ? 'Content-Length' : 'chunked'}) takes room as it is read and gives it all back once handed on`, async () => {
    const n = await node(4 * 1024 * 1024, declared);
    const room = new CountingRoom();
    const p = pool([n.url], { room });
    const res = await p.forward(call('eth_call', [{}, 'latest']), ['eth_call']);
    assert.ok(res.body.length > 4 * 1024 * 1024);
    assert.ok(room.most >= res.body.length, `held at most ${room.most} bytes for an answer of ${res.body.length}`);
    // Known length: taken once, on the headers; unknown: a step (1 MiB) at a time.
    if (declared) assert.equal(room.takes, 1);
    else assert.ok(room.takes >= 4 && room.takes <= 8, `${room.takes} takes`);
    await afterImmediate();
    assert.equal(room.held, 0);
  });
}

test('small answers never ask for room', async () => {
  const n = await node(ROOM_FROM_BYTES / 4);
  const room = new CountingRoom();
  const p = pool([n.url], { room });
  await p.forward(call('eth_call', [{}, 'latest']), ['eth_call']);
  await p.forward(call('eth_chainId'), ['eth_chainId']);
  assert.equal(room.takes, 0);
});

test('room is given back when the answer is cut over rpc.maxResponseBytes, or the node hangs up half way', async () => {
  const n = await node(2 * 1024 * 1024);
  const room = new CountingRoom();
  const p = pool([n.url], { room, maxResponseBytes: 1024 * 1024 });
  await assert.rejects(p.forward(call('eth_call', [{}, 'latest']), ['eth_call']), /no upstream/);
  assert.equal(room.held, 0);
  const q = pool([n.url], { room });
  await assert.rejects(q.forward(call('eth_getLogs', [{}]), ['eth_getLogs']), /no upstream/);
  assert.ok(room.takes > 0);
  assert.equal(room.held, 0);
});

test('an answer that finds no room: a final failure (no other node asked), -32603 with 503 for the client, the node not marked down, the next call served', async () => {
  const a = await node(512 * 1024);
  const b = await node(512 * 1024);
  const room = new CountingRoom();
  const p = pool([a.url, b.url], { room });
  room.refusing = true;
  const err = await p.forward(call('eth_call', [{}, 'latest']), ['eth_call']).then(
    () => assert.fail('refused'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AnswerRoomError);
  assert.equal(a.calls() + b.calls(), 1, 'no other node asked');
  const rpc = toRpcError(err);
  assert.deepEqual([rpc.code, rpc.httpStatus, rpc.toJSON().data], [-32603, 503, { reason: 'gateway_busy', retryAfter: 1 }]);
  assert.deepEqual(
    p.health().map((h) => h.state === 'down'),
    [false, false],
  );
  // Counted under its own kind in the node's failures (its metrics), never as the node's fault.
  assert.equal(p.callStats().reduce((n, c) => n + (c.errors.get('gateway_busy') ?? 0), 0), 1);
  room.refusing = false;
  const ok = await p.forward(call('eth_call', [{}, 'latest']), ['eth_call']);
  assert.ok(ok.body.length > 512 * 1024);
  await afterImmediate();
  assert.equal(room.held, 0);
});
