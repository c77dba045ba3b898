// C49: a consensus read never waits on a node it does not need. A node that has not answered
// within the hedge delay is replaced by the next one; a hung node costs one hedge delay, not the
// attempt timeout; with no agreement possible the answer is no_consensus within a bounded time.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NoConsensusError } from '../../src/errors/rpc.ts';
import type { HedgeOptions } from '../../src/upstreams/http/hedge.ts';
import { waitFor } from '../support/wait.ts';
import { call, fakes, pool } from './helpers.ts';

const HEDGE_MS = 200;
/** Hedging of ordinary reads off: the replacement of a late node in a consensus read uses the delay all the same. */
const HEDGE: HedgeOptions = { enabled: false, delayMs: HEDGE_MS, minDelayMs: 50, maxDelayMs: 1_000 };
const ATTEMPT_MS = 10_000;
/** Liveness bound: far above one hedge delay plus the honest nodes' time, far below the attempt timeout. */
const BOUND_MS = 2_000;
const BALANCE = ['0x0000000000000000000000000000000000000001', 'latest'];

const opts = (nodes = 2) => ({
  hedge: HEDGE,
  requestTimeoutMs: ATTEMPT_MS,
  totalTimeoutMs: 15_000,
  consensus: { methods: ['eth_getBalance'], nodes, penaltySeconds: 60 },
});

/**
 * Probes until every node is up in the same latency class (choice.ts: under 40 ms), so the order is
 * the config's and the hung node first in line; one slow probe on a busy machine would move it back.
 */
async function inConfigOrder(p: ReturnType<typeof pool>): Promise<void> {
  await waitFor(
    async () => {
      await p.checkHealth();
      return p.health().every((h) => h.state === 'up' && (h.latencyMs ?? 100) < 40) ? true : undefined;
    },
    { timeoutMs: 15_000, what: 'every node up, in the order of the config' },
  );
}

/** Milliseconds a promise took, and its outcome. */
async function timed<T>(p: Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
  const t0 = performance.now();
  try {
    const value = await p;
    return { ms: performance.now() - t0, value };
  } catch (error) {
    return { ms: performance.now() - t0, error };
  }
}

describe('consensus reads with a hung node (C49)', () => {
  test('a node that never answers, first in line: 20 reads, each answered by the next two within 2 s (attempt timeout 10 s, hedge 200 ms), the hung node left up', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a, b] = await fakes(2);
    const p = pool([hung!, a!, b!], opts());
    await inConfigOrder(p);
    const reads = [];
    for (let i = 0; i < 20; i++) reads.push(await timed(p.forward(call('eth_getBalance', BALANCE, i), ['eth_getBalance'])));
    for (const r of reads) {
      assert.equal(r.error, undefined);
      assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
      assert.match(r.value?.body.toString() ?? '', /"method":"eth_getBalance"/);
    }
    // The hung node was asked every time (it stays first in line) and replaced every time.
    assert.equal(hung!.callCount('eth_getBalance'), 20);
    assert.equal(a!.callCount('eth_getBalance'), 20);
    assert.equal(b!.callCount('eth_getBalance'), 20);
    // Aborted once the others agreed, it was not counted as failing: late is not down.
    assert.equal(p.health()[0]?.state, 'up');
  });

  test('ten reads at once against a hung node are all answered within 2 s', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a, b] = await fakes(2);
    const p = pool([hung!, a!, b!], opts());
    await inConfigOrder(p);
    const reads = await Promise.all(Array.from({ length: 10 }, (_, i) => timed(p.forward(call('eth_getBalance', BALANCE, i), ['eth_getBalance']))));
    for (const r of reads) {
      assert.equal(r.error, undefined);
      assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    }
  });

  test('three nodes needed, one of four hung: answered once the three others agree', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a, b, c] = await fakes(3);
    const p = pool([hung!, a!, b!, c!], opts(3));
    await inConfigOrder(p);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.equal(r.error, undefined);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    assert.deepEqual([a, b, c].map((f) => f!.callCount('eth_getBalance')), [1, 1, 1]);
  });

  test('two upstreams, one hung: the other one answers after one hedge delay (fewer nodes than configured), not after the attempt timeout', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a] = await fakes(1);
    const p = pool([hung!, a!], opts());
    await inConfigOrder(p);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.equal(r.error, undefined);
    assert.ok(r.ms >= HEDGE_MS - 20, `waited for the hedge delay first (${Math.round(r.ms)} ms)`);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
  });

  test('no agreement possible, one node hung and the two others answering differently: -32000 no_consensus within 2 s', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a, b] = await fakes(2);
    a!.setRaw('eth_getBalance', '{"jsonrpc":"2.0","id":1,"result":"0x1"}');
    b!.setRaw('eth_getBalance', '{"jsonrpc":"2.0","id":1,"result":"0x2"}');
    const p = pool([hung!, a!, b!], opts());
    await inConfigOrder(p);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.ok(r.error instanceof NoConsensusError, `no_consensus, not ${String(r.error)}`);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    // Nobody is blamed without a majority.
    assert.ok(p.health().every((h) => h.misbehaving === undefined));
  });

  test('no agreement possible, every node answering differently: -32000 no_consensus once the three answers are in', async () => {
    const nodes = await fakes(3);
    nodes.forEach((f, i) => f.setRaw('eth_getBalance', `{"jsonrpc":"2.0","id":1,"result":"0x${i + 1}"}`));
    const p = pool(nodes, opts());
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.ok(r.error instanceof NoConsensusError, `no_consensus, not ${String(r.error)}`);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    assert.deepEqual(nodes.map((f) => f.callCount('eth_getBalance')), [1, 1, 1]);
  });

  test('a late node whose answer comes within a second hedge delay settles a disagreement: a liar outvoted by a slow honest node and its replacement', async () => {
    const [liar, slow, c] = await fakes(3);
    liar!.setRaw('eth_getBalance', '{"jsonrpc":"2.0","id":1,"result":"0xbad"}');
    const honest = '{"jsonrpc":"2.0","id":1,"result":"0x1"}';
    slow!.setRaw('eth_getBalance', honest);
    c!.setRaw('eth_getBalance', honest);
    // Only the balance is slow: the probes find all three alike.
    const p = pool([liar!, slow!, c!], opts());
    await inConfigOrder(p);
    slow!.setDelay(HEDGE_MS + 60);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.equal(r.error, undefined);
    assert.match(r.value?.body.toString() ?? '', /"0x1"/);
    assert.equal(p.health()[0]?.misbehaving?.outOfRotation, true, 'the liar is left out');
  });
});
