// C49: a consensus read never waits on a node it does not need. A node that has not answered
// within the hedge delay is replaced by the next one; a hung node costs one hedge delay (two when
// the votes in hand do not decide), not the attempt timeout; with no agreement possible the answer
// is no_consensus within a bounded time. And one node never answers alone: when fewer nodes than
// consensus.nodes agree because the others failed, were late or none was left, the answer is
// -32000 (HTTP 502) too_few_nodes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NoConsensusError, TooFewNodesError } from '../../src/errors/rpc.ts';
import type { HedgeOptions } from '../../src/upstreams/http/hedge.ts';
import type { PoolLogger } from '../../src/upstreams/http/types.ts';
import { waitFor } from '../support/wait.ts';
import { call, fakes, pool, rpcError } from './helpers.ts';

const HEDGE_MS = 200;
/** Hedging of ordinary reads off: the replacement of a late node in a consensus read uses the delay all the same. */
const HEDGE: HedgeOptions = { enabled: false, delayMs: HEDGE_MS, minDelayMs: 50, maxDelayMs: 1_000 };
const ATTEMPT_MS = 10_000;
/** Liveness bound: far above one hedge delay plus the honest nodes' time, far below the attempt timeout. */
const BOUND_MS = 2_000;
const BALANCE = ['0x0000000000000000000000000000000000000001', 'latest'];

const opts = (nodes = 2, logger?: PoolLogger) => ({
  hedge: HEDGE,
  requestTimeoutMs: ATTEMPT_MS,
  totalTimeoutMs: 15_000,
  consensus: { methods: ['eth_getBalance'], nodes, penaltySeconds: 60 },
  ...(logger === undefined ? {} : { logger }),
});

/** A pool logger keeping its lines. */
function lines(): PoolLogger & { seen: Array<{ level: string; obj: Record<string, unknown>; msg: string }> } {
  const seen: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: object, msg: string) => void seen.push({ level, obj: obj as Record<string, unknown>, msg });
  return { seen, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** The refusal a client gets: -32000, HTTP 502, data.reason too_few_nodes with what was needed and what answered. */
function assertTooFew(error: unknown, needed: number, answered: number): void {
  assert.ok(error instanceof TooFewNodesError, `too_few_nodes, not ${String(error)}`);
  assert.equal(error.code, -32000);
  assert.equal(error.httpStatus, 502);
  assert.deepEqual(error.toJSON().data, { reason: 'too_few_nodes', network: 'testnet', method: 'eth_getBalance', needed, answered });
}

/** A body that is not JSON-RPC: the node fails the attempt (no vote). */
const GARBAGE = '<html><body>502 Bad Gateway</body></html>';

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

  test('two upstreams, one hung, no third candidate: never the lone answer; -32000/502 too_few_nodes after two hedge delays, not after the attempt timeout', async () => {
    const [hung] = await fakes(1, {}, 'stallCalls');
    const [a] = await fakes(1);
    const log = lines();
    const p = pool([hung!, a!], opts(2, log));
    await inConfigOrder(p);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assertTooFew(r.error, 2, 1);
    // The late node had a second hedge delay to complete the votes.
    assert.ok(r.ms >= 2 * HEDGE_MS - 20, `waited two hedge delays first (${Math.round(r.ms)} ms)`);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    assert.equal(a!.callCount('eth_getBalance'), 1);
    // Late is not down: the hung node was aborted, not counted as failing.
    assert.equal(p.health()[0]?.state, 'up');
    assert.equal(p.consensusStats().get('eth_getBalance')?.get('too_few_nodes'), 1);
    const warn = log.seen.filter((l) => l.level === 'warn');
    assert.equal(warn.length, 1);
    assert.match(warn[0]?.msg ?? '', /consensus reads refused/);
    assert.deepEqual([warn[0]?.obj.network, warn[0]?.obj.method, warn[0]?.obj.needed, warn[0]?.obj.answered], ['testnet', 'eth_getBalance', 2, 1]);
  });

  test('two upstreams, one slow past one hedge delay but within two: its vote completes the read, answered', async () => {
    const [slow, a] = await fakes(2);
    const p = pool([slow!, a!], opts());
    await inConfigOrder(p);
    // Only the balance is slow: the probes keep the config's order.
    slow!.setDelay(HEDGE_MS + 60);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.equal(r.error, undefined, String(r.error));
    assert.match(r.value?.body.toString() ?? '', /"result"/);
    // Answered once the slow node's vote came, not with the other's vote alone at the first hedge delay.
    assert.ok(r.ms >= HEDGE_MS + 40, `waited for the slow node's vote (${Math.round(r.ms)} ms)`);
    assert.equal(p.consensusStats().get('eth_getBalance')?.get('agreed'), 1);
  });

  test('two upstreams, one failing (a body that is not JSON-RPC), no third candidate: a failed node is no vote, -32000/502 too_few_nodes at once; said at warn once however often', async () => {
    const [bad, a] = await fakes(2);
    const log = lines();
    const p = pool([bad!, a!], opts(2, log));
    await inConfigOrder(p);
    bad!.setRaw('eth_getBalance', GARBAGE);
    for (let i = 0; i < 3; i++) {
      const r = await timed(p.forward(call('eth_getBalance', BALANCE, i), ['eth_getBalance']));
      assertTooFew(r.error, 2, 1);
      assert.ok(r.ms < BOUND_MS, `refused in ${Math.round(r.ms)} ms`);
    }
    assert.equal(p.consensusStats().get('eth_getBalance')?.get('too_few_nodes'), 3);
    assert.equal(log.seen.filter((l) => l.level === 'warn' && /consensus reads refused/.test(l.msg)).length, 1, 'one warn line a minute per network');
    assert.equal(log.seen.filter((l) => l.level === 'debug' && /consensus read refused/.test(l.msg)).length, 2, 'the others at debug');
  });

  test('two upstreams, one throttled (a provider error of the table): no vote, -32000/502 too_few_nodes, not the lone answer nor the throttle error', async () => {
    const [busy, a] = await fakes(2);
    const p = pool([busy!, a!], opts());
    await inConfigOrder(p);
    busy!.setRaw('eth_getBalance', rpcError(-32005, 'rate limit exceeded'));
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assertTooFew(r.error, 2, 1);
  });

  test('three upstreams, the first failing: the third candidate is asked in its place and the two that agree are answered', async () => {
    const [bad, a, b] = await fakes(3);
    const p = pool([bad!, a!, b!], opts());
    await inConfigOrder(p);
    bad!.setRaw('eth_getBalance', GARBAGE);
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.equal(r.error, undefined, String(r.error));
    assert.match(r.value?.body.toString() ?? '', /"result"/);
    assert.ok(r.ms < BOUND_MS, `answered in ${Math.round(r.ms)} ms`);
    assert.deepEqual([bad, a, b].map((f) => f!.callCount('eth_getBalance')), [1, 1, 1]);
    assert.equal(p.consensusStats().get('eth_getBalance')?.get('agreed'), 1);
  });

  test('three nodes needed, three upstreams, one disagreeing and no fourth: 2 of 3 is not the majority of 4, -32000 no_consensus, nobody marked', async () => {
    const nodes = await fakes(3);
    nodes[2]!.setRaw('eth_getBalance', '{"jsonrpc":"2.0","id":1,"result":"0xbad"}');
    const p = pool(nodes, opts(3));
    const r = await timed(p.forward(call('eth_getBalance', BALANCE), ['eth_getBalance']));
    assert.ok(r.error instanceof NoConsensusError, `no_consensus, not ${String(r.error)}`);
    assert.ok(p.health().every((h) => h.misbehaving === undefined));
    assert.equal(p.consensusStats().get('eth_getBalance')?.get('no_consensus'), 1);
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
