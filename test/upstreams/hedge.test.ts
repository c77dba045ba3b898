// C26: a read not answered within the hedge delay also goes to the next node; the
// first good answer wins and the slower attempt is cancelled. Never for transactions or filters.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, test } from 'node:test';
import { DEFAULT_HEDGE, type HedgeOptions, hedgeDelay, LatencyWindow } from '../../src/upstreams/http/hedge.ts';
import { call, closeAfter, fakes, pool } from './helpers.ts';
import { waitFor } from '../support/wait.ts';

const HEDGE: HedgeOptions = { enabled: true, delayMs: null, minDelayMs: 50, maxDelayMs: 300 };
const STALL_MS = 3_000;

/**
 * A node that answers its health probe (eth_blockNumber) at once and every other call after
 * `delayMs` (never when Infinity), counting the requests the client gave up on (socket closed).
 */
async function slowNode(delayMs: number): Promise<{ url: string; received: number; cancelled: number; close(): Promise<void> }> {
  const state = { url: '', received: 0, cancelled: 0 };
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":1,"result":"0x64"}');
      };
      if (text.includes('"eth_blockNumber"')) return answer();
      state.received++;
      let done = false;
      res.once('finish', () => (done = true));
      req.socket.once('close', () => {
        if (!done) state.cancelled++;
      });
      if (Number.isFinite(delayMs)) setTimeout(answer, delayMs);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(state, {
    async close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  });
}

/**
 * Probes until the first upstream is first in line. The order follows the probes' latency classes,
 * and on a busy machine one probe of the first node can be slow by chance: probe again until a
 * call both answer at once (eth_blockNumber) goes to the first node.
 */
async function firstInLine(p: ReturnType<typeof pool>): Promise<void> {
  await waitFor(
    async () => {
      await p.checkHealth();
      return (await p.forward(call('eth_blockNumber'), ['eth_blockNumber'])).upstream === 0 ? true : undefined;
    },
    { timeoutMs: 15_000, what: 'the first upstream to be first in line' },
  );
}

describe('hedged reads (C26)', () => {
  test('20 reads against a node that stalls 3 s are each answered well under 3 s by the next node', async () => {
    const slow = closeAfter(await slowNode(STALL_MS));
    const [fast] = await fakes(1);
    const p = pool([slow.url, fast!], { hedge: HEDGE, requestTimeoutMs: 10_000, totalTimeoutMs: 15_000 });
    // Both answer their probe alike: the slow node stays first in line, as a node that turns slow does.
    await firstInLine(p);
    const took: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      const res = await p.forward(call('eth_getBalance', ['0x0', 'latest'], i), ['eth_getBalance']);
      took.push(performance.now() - t0);
      assert.equal(res.upstream, 1);
    }
    const worst = Math.max(...took);
    // Loose on purpose (a busy machine): about the 300 ms hedge delay, far from the 3 s stall.
    assert.ok(worst < STALL_MS - 500, `slowest read took ${Math.round(worst)} ms`);
    assert.equal(slow.received, 20, 'every read went to the slow node first');
    assert.equal(fast?.callCount('eth_getBalance'), 20);
    // The slow node was never marked failed for losing a race.
    assert.notEqual(p.health()[0]?.state, 'down');
  });

  test('the slower attempt is cancelled once the other node answered', async () => {
    const hole = closeAfter(await slowNode(Number.POSITIVE_INFINITY));
    const [fast] = await fakes(1);
    const p = pool([hole.url, fast!], { hedge: HEDGE });
    await firstInLine(p);
    for (let i = 0; i < 3; i++) assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
    assert.equal(hole.received, 3);
    await waitFor(() => hole.cancelled === 3, { what: 'the three stalled requests to be aborted' });
  });

  test('a read is not hedged to a lagging node: the node in line answers, slow as it is; caught up, the other is hedged to again', async () => {
    const slow = closeAfter(await slowNode(400));
    const [other] = await fakes(1);
    other?.setHead(1);
    const p = pool([slow.url, other!], { hedge: { ...HEDGE, delayMs: 50 } });
    await p.checkHealth();
    assert.equal(p.health()[1]?.head, 1);
    // A quick stale answer must not win the race against the node at the head: no hedge to it.
    for (let i = 0; i < 3; i++) assert.equal((await p.forward(call('eth_getBalance', ['0x0', 'latest'], i), ['eth_getBalance'])).upstream, 0);
    assert.equal(other?.callCount('eth_getBalance'), 0);
    assert.equal(slow.received, 3);
    // Caught up, it is as good as the first, and a slow read goes to it too (and it wins).
    other?.setHead(100);
    await firstInLine(p);
    assert.equal((await p.forward(call('eth_getBalance', ['0x0', 'latest'], 9), ['eth_getBalance'])).upstream, 1);
    assert.equal(other?.callCount('eth_getBalance'), 1);
  });

  test('a fast first node answers alone: nothing is hedged', async () => {
    const [a, b] = await fakes(2);
    const p = pool([a!, b!], { hedge: HEDGE });
    for (let i = 0; i < 10; i++) assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    assert.equal(b?.totalCalls(), 0);
  });

  for (const method of ['eth_sendRawTransaction', 'eth_newFilter', 'eth_getFilterChanges', 'eth_uninstallFilter']) {
    test(`${method} is never hedged`, async () => {
      const [slow, other] = await fakes(2);
      slow?.setDelay(1_000);
      const p = pool([slow!, other!], { hedge: { ...HEDGE, delayMs: 50 } });
      const res = await p.forward(call(method, ['0x01']), [method]);
      assert.equal(res.upstream, 0);
      assert.equal(other?.callCount(method), 0);
    });
  }

  test('a batch holding a filter method is not hedged', async () => {
    const [slow, other] = await fakes(2);
    slow?.setDelay(1_000);
    const batch = JSON.stringify([call('eth_chainId'), call('eth_getFilterChanges', ['0x1'], 2)].map((c) => JSON.parse(c) as unknown));
    const res = await pool([slow!, other!], { hedge: { ...HEDGE, delayMs: 50 } }).forward(batch, ['eth_chainId', 'eth_getFilterChanges']);
    assert.equal(res.upstream, 0);
    assert.equal(other?.totalCalls(), 0);
  });

  test('the delay is the p90 of the node recent calls, within the bounds', () => {
    const w = new LatencyWindow();
    const opts = { ...DEFAULT_HEDGE, minDelayMs: 50, maxDelayMs: 1_000 };
    assert.equal(hedgeDelay(opts, w), 1_000, 'too few samples: the longest delay');
    for (let i = 1; i <= 100; i++) w.add(i * 2); // the window keeps the last 64: 74..200
    assert.equal(hedgeDelay(opts, w), 188);
    const fast = new LatencyWindow();
    for (let i = 0; i < 20; i++) fast.add(1);
    assert.equal(hedgeDelay(opts, fast), 50);
    assert.equal(hedgeDelay({ ...opts, delayMs: 7 }, fast), 7);
  });
});
