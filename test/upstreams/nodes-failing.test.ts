// Nodes failing (C26). Three upstreams of which two are dead, two stall (accept
// and never answer) or one flaps: every read is answered with a live node's answer. All dead: once
// known, a call is answered -32000 / HTTP 502 without a connection per call, and served again once
// a node returns, within a probe interval. Speed (p99, the all-dead answer time) is measured by
// `npm run chaos` (bench/scenarios/chaos.ts), not here.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { describe, test } from 'node:test';
import { toRpcError } from '../../src/errors/rpc.ts';
import { NetworkDownError, NoUpstreamError } from '../../src/upstreams/http/pool.ts';
import { waitFor } from '../support/wait.ts';
import { call, closeAfter, fakes, pool } from './helpers.ts';

const READS = 60;

/** A node's answer to a read carries the method it was asked (fake-node.ts). */
function answeredByNode(body: Buffer): boolean {
  const parsed = JSON.parse(body.toString()) as { result?: { method?: string } };
  return parsed.result?.method === 'eth_getBalance';
}

/**
 * A dead node that still takes TCP connections: each is reset at once (a crashed process behind a
 * port that still accepts), so the test can count how often the gateway connects to it.
 */
async function resettingNode(): Promise<{ url: string; connections: number; close(): Promise<void> }> {
  const state = { url: '', connections: 0 };
  const server = net.createServer((s) => {
    state.connections++;
    s.resetAndDestroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return closeAfter(
    Object.assign(state, {
      async close() {
        server.close();
      },
    }),
  );
}

describe('three upstreams, some failing (C26)', () => {
  test('2 of 3 dead (connection refused): every read is answered by the third', async () => {
    const [a, b, live] = await fakes(3);
    await a!.setMode('refuse');
    await b!.setMode('refuse');
    const p = pool([a!, b!, live!], { healthIntervalMs: 60_000 });
    for (let i = 0; i < READS; i++) {
      const r = await p.forward(call('eth_getBalance', ['0x01', 'latest'], i), ['eth_getBalance']);
      assert.equal(r.upstream, 2);
      assert.ok(answeredByNode(r.body));
    }
    assert.equal(live!.callCount('eth_getBalance'), READS);
  });

  test('2 of 3 stalled: every read is answered by the third, and the stalled ones are left aside once they failed', async () => {
    const [a, b, live] = await fakes(3);
    await a!.setMode('stall');
    await b!.setMode('stall');
    // No probes during the test: what leaves the stalled nodes aside is the calls' own timeouts.
    // The first read waits out two 300 ms attempts; the total budget leaves a busy machine room.
    const p = pool([a!, b!, live!], { requestTimeoutMs: 300, totalTimeoutMs: 10_000, healthIntervalMs: 60_000 });
    for (let i = 0; i < READS; i++) {
      const r = await p.forward(call('eth_getBalance', ['0x01', 'latest'], i), ['eth_getBalance']);
      assert.equal(r.upstream, 2);
      assert.ok(answeredByNode(r.body));
    }
    // The first calls found them stalled (one timeout each); later calls did not wait on them.
    assert.ok(a!.callCount('eth_getBalance') <= 2, `stalled node a asked ${a!.callCount('eth_getBalance')} times`);
    assert.ok(b!.callCount('eth_getBalance') <= 2, `stalled node b asked ${b!.callCount('eth_getBalance')} times`);
    const states = p.health().map((h) => h.state);
    assert.deepEqual(states, ['down', 'down', 'up']);
  });

  test('2 of 3 stalled with hedged reads: the read goes on to the third after a hedge delay each, not after an attempt timeout', async () => {
    const [a, b, live] = await fakes(3);
    await a!.setMode('stall');
    await b!.setMode('stall');
    // Attempts time out after 10 s: a read that waited on one of the stalled nodes would show.
    const p = pool([a!, b!, live!], {
      requestTimeoutMs: 10_000,
      totalTimeoutMs: 15_000,
      healthIntervalMs: 60_000,
      hedge: { enabled: true, delayMs: 50, minDelayMs: 50, maxDelayMs: 300 },
    });
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      const r = await p.forward(call('eth_getBalance', ['0x01', 'latest'], i), ['eth_getBalance']);
      assert.equal(r.upstream, 2);
      assert.ok(answeredByNode(r.body));
      // Two hedge delays (100 ms) are expected; 5 s is half an attempt timeout, a margin for a busy machine.
      assert.ok(Date.now() - started < 5_000, `read ${i} took ${Date.now() - started} ms`);
    }
    assert.ok(a!.callCount('eth_getBalance') >= 1 && b!.callCount('eth_getBalance') >= 1, 'both stalled nodes were asked');
  });

  test('1 of 3 flapping (up, then refusing, in turn): every read is answered', async () => {
    const [flap, b, c] = await fakes(3);
    const p = pool([flap!, b!, c!], { requestTimeoutMs: 500, totalTimeoutMs: 3_000, healthIntervalMs: 200 });
    p.start();
    await p.firstRound();
    let stop = false;
    const flapping = (async () => {
      let up = true;
      while (!stop) {
        await new Promise((r) => setTimeout(r, 300));
        up = !up;
        await flap!.setMode(up ? 'ok' : 'refuse');
      }
      await flap!.setMode('ok');
    })();
    const failures: unknown[] = [];
    const answeredBy = new Set<number>();
    const until = Date.now() + 2_000;
    let i = 0;
    try {
      while (Date.now() < until) {
        // Four callers at once, as under load.
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            try {
              const r = await p.forward(call('eth_getBalance', ['0x01', 'latest'], i++), ['eth_getBalance']);
              assert.ok(answeredByNode(r.body));
              answeredBy.add(r.upstream);
            } catch (err) {
              failures.push(err);
            }
          }),
        );
      }
    } finally {
      stop = true;
      await flapping;
    }
    assert.deepEqual(failures, []);
    assert.ok(i > 20, `only ${i} reads sent`);
  });

  test('all dead: once known, answered -32000 / 502 with no connection per call; served again within a probe interval of a node coming back', async () => {
    const dead = await Promise.all([resettingNode(), resettingNode(), resettingNode()]);
    const [back] = await fakes(1);
    await back!.setMode('refuse');
    const intervalMs = 500;
    const p = pool([...dead.map((d) => d.url), back!], { healthIntervalMs: intervalMs, requestTimeoutMs: 300, totalTimeoutMs: 1_000 });
    p.start();
    await p.firstRound();
    await waitFor(() => p.health().every((h) => h.state === 'down'));

    const before = dead.map((d) => d.connections);
    let downErrors = 0;
    for (let i = 0; i < 200; i++) {
      try {
        await p.forward(call('eth_getBalance', ['0x01', 'latest'], i), ['eth_getBalance']);
        assert.fail('a call was answered while every node is dead');
      } catch (err) {
        assert.ok(err instanceof NoUpstreamError);
        if (err instanceof NetworkDownError) downErrors++;
        // C22: no node could answer is -32000, HTTP 502.
        const rpc = toRpcError(err);
        assert.equal(rpc.code, -32000);
        assert.equal((rpc.constructor as { httpStatus?: number }).httpStatus, 502);
      }
    }
    assert.equal(downErrors, 200, 'every call answered at once as known down');
    // Only the probes connect (one per node per round, a round each 500 ms): far fewer than 200 calls.
    const connects = dead.reduce((n, d, k) => n + d.connections - (before[k] as number), 0);
    assert.ok(connects < 30, `${connects} connections to the dead nodes during 200 calls`);

    // A node comes back: served again within a probe interval (plus a margin for a busy machine).
    await back!.setMode('ok');
    const cameBack = Date.now();
    await waitFor(async () => {
      try {
        const r = await p.forward(call('eth_getBalance', ['0x01', 'latest'], 1), ['eth_getBalance']);
        return r.upstream === 3 && answeredByNode(r.body);
      } catch {
        return false;
      }
    });
    const ms = Date.now() - cameBack;
    assert.ok(ms < intervalMs * 2 + 2_000, `served again after ${ms} ms`);
  });
});
