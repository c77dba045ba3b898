// C55: answer sampling. With consensus off, a share of the answers is checked in the background
// against other nodes at the same block; a node that disagrees is marked (read last), then out of
// rotation until it agrees again. Scripted nodes lie, in front of pools of their own; and the
// settings the config refuses. On a moving anvil chain: test/upstreams/sampling-chain.test.ts;
// through the gateway: test/upstreams/sampling-gateway.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { whereOf } from '../../src/upstreams/http/sampling.ts';
import type { SamplingOptions } from '../../src/upstreams/http/types.ts';
import { waitFor } from '../support/wait.ts';
import { call, fakes, pool } from './helpers.ts';

const ADDRESS = '0x0000000000000000000000000000000000000001';
const EVERY: SamplingOptions = { rate: 1 };
const LIE = '"0xbad"';

type Pool = ReturnType<typeof pool>;

/** Probes until every node is up in the same latency class, so the order is the config's (the first node first in line). */
async function inConfigOrder(p: Pool): Promise<void> {
  await waitFor(
    async () => {
      await p.checkHealth();
      return p.health().every((h) => h.state === 'up' && (h.latencyMs ?? 100) < 40) ? true : undefined;
    },
    { timeoutMs: 15_000, what: 'every node up, in the order of the config' },
  );
}

/** One eth_getBalance through the pool, its checks over: which upstream answered. */
async function balance(p: Pool, block: string, id = 1): Promise<{ upstream: number; body: string }> {
  const res = await p.forward(call('eth_getBalance', [ADDRESS, block], id), ['eth_getBalance']);
  await p.samplesSettled();
  return { upstream: res.upstream, body: res.body.toString() };
}

describe('answer sampling (C55)', () => {
  test('a node answering wrong balances on every call is marked at the first check and out of rotation by the third; the callers get the honest answer from the second call on', async () => {
    const [liar, a, b] = await fakes(3);
    liar!.setScript('eth_getBalance', () => LIE);
    const p = pool([liar!, a!, b!], { sampling: EVERY });
    await inConfigOrder(p);
    const answeredBy: number[] = [];
    let outAt = -1;
    for (let i = 0; i < 10 && outAt < 0; i++) {
      answeredBy.push((await balance(p, 'latest', i)).upstream);
      if (p.health()[0]?.misbehaving?.outOfRotation) outAt = i + 1;
    }
    assert.equal(outAt, 3, 'out of rotation after its third disagreement');
    assert.deepEqual(answeredBy, [0, 1, 1], 'marked after the first check: read last');
    assert.equal(p.callStats()[0]?.misbehaving.get('eth_getBalance'), 3);
    assert.equal(p.callStats()[1]?.misbehaving.size, 0);
    assert.deepEqual(p.health()[0]?.misbehaving, { disagreements: 3, outOfRotation: true });
    assert.equal(p.health()[1]?.misbehaving, undefined);
    assert.equal(p.samplingStats().disagreed, 3);

    // Out of rotation: no caller's call reaches it.
    const callerCalls = () => liar!.logWithoutProbes().filter((c) => JSON.stringify(c.params).includes('"latest"')).length;
    const before = callerCalls();
    for (let i = 0; i < 5; i++) assert.notEqual((await balance(p, 'latest', 100 + i)).upstream, 0);
    assert.equal(callerCalls(), before);

    // It agrees again: back in rotation at the next check, still marked (read last).
    liar!.setScript('eth_getBalance', null);
    const whileOut = p.callStats()[0]?.misbehaving.get('eth_getBalance') ?? 0;
    assert.ok(whileOut > 3, 'judged again in every check while out, and found lying');
    await balance(p, 'latest', 200);
    assert.deepEqual(p.health()[0]?.misbehaving, { disagreements: whileOut, outOfRotation: false });
    assert.notEqual((await balance(p, 'latest', 201)).upstream, 0, 'read last while marked');
  });

  test('a node wrong on 5% of its answers is marked', async () => {
    const [liar, a, b] = await fakes(3);
    // Every 20th answer is wrong.
    liar!.setScript('eth_getBalance', (_params, before) => (before % 20 === 19 ? LIE : null));
    const p = pool([liar!, a!, b!], { sampling: EVERY });
    await inConfigOrder(p);
    for (let i = 0; i < 40 && p.health()[0]?.misbehaving === undefined; i++) await balance(p, '0x64', i);
    assert.ok(p.health()[0]?.misbehaving, 'marked');
    assert.equal(p.callStats()[0]?.misbehaving.get('eth_getBalance'), 1);
    assert.equal(p.health()[0]?.misbehaving?.outOfRotation, false, 'one disagreement marks, three take it out');
    assert.ok(p.health().slice(1).every((h) => h.misbehaving === undefined));
  });

  test('a block named by number: the other node is sent the same call and its answer compared with the caller\'s; at latest, both nodes are asked again at a block both have', async () => {
    const [first, second] = await fakes(2);
    const p = pool([first!, second!], { sampling: EVERY });
    await inConfigOrder(p);
    await balance(p, '0x5', 7);
    assert.equal(first!.bodies.filter((t) => t.includes('eth_getBalance')).length, 1, 'the caller\'s answer is the first node\'s vote');
    assert.deepEqual(second!.bodies.filter((t) => t.includes('eth_getBalance')), [call('eth_getBalance', [ADDRESS, '0x5'], 7)]);

    await balance(p, 'latest', 8);
    // Heads of 100 (0x64): the caller's call, then the check's call at 0x64, to each node.
    const pinned = call('eth_getBalance', [ADDRESS, '0x64'], 8);
    assert.deepEqual(first!.bodies.filter((t) => t.includes('"id":8')), [call('eth_getBalance', [ADDRESS, 'latest'], 8), pinned]);
    assert.deepEqual(second!.bodies.filter((t) => t.includes('"id":8')), [pinned]);
    assert.equal(p.samplingStats().agreed, 2);

    await balance(p, 'pending', 9);
    assert.equal(second!.bodies.filter((t) => t.includes('"id":9')).length, 0, 'pending is never checked');
  });

  test('the check never delays the answer: a read is answered while its check still waits on a hung node', async () => {
    const [a] = await fakes(1);
    const [hung] = await fakes(1, {}, 'stallCalls');
    const p = pool([a!, hung!], { sampling: EVERY });
    await inConfigOrder(p);
    const res = await p.forward(call('eth_getBalance', [ADDRESS, '0x1']), ['eth_getBalance']);
    assert.equal(res.upstream, 0);
    // Answered; the check starts after it and waits on the node that never answers.
    await waitFor(() => (hung!.callCount('eth_getBalance') === 1 ? true : undefined), { what: 'the check to reach the hung node' });
    assert.deepEqual(p.samplingStats(), { agreed: 0, disagreed: 0, inconclusive: 0, skipped: 0 });
  });

  test('at most maxInFlight checks run at once: the answers picked beyond it are skipped', async () => {
    const [a] = await fakes(1);
    const [hung] = await fakes(1, {}, 'stallCalls');
    const p = pool([a!, hung!], { sampling: { rate: 1, maxInFlight: 2 } });
    await inConfigOrder(p);
    for (let i = 0; i < 10; i++) await p.forward(call('eth_getBalance', [ADDRESS, '0x1'], i), ['eth_getBalance']);
    await waitFor(() => (hung!.callCount('eth_getBalance') === 2 ? true : undefined), { what: 'two checks at the hung node' });
    assert.equal(p.samplingStats().skipped, 8);
    assert.equal(hung!.callCount('eth_getBalance'), 2);
  });

  test('a network of one upstream is never sampled; methods not sampled by default and notifications neither', async () => {
    const [only] = await fakes(1);
    const p = pool([only!], { sampling: EVERY });
    for (let i = 0; i < 5; i++) await balance(p, 'latest', i);
    assert.equal(only!.callCount('eth_getBalance'), 5);

    const [a, b] = await fakes(2);
    const q = pool([a!, b!], { sampling: EVERY });
    await inConfigOrder(q);
    await q.forward(call('eth_getBlockByNumber', ['0x1', false]), ['eth_getBlockByNumber']);
    await q.forward(call('eth_chainId'), ['eth_chainId']);
    await q.forward(JSON.stringify({ jsonrpc: '2.0', method: 'eth_getBalance', params: [ADDRESS, '0x1'] }), ['eth_getBalance'], { expectAnswer: false });
    await q.samplesSettled();
    assert.equal(b!.totalCalls(), 0);

    // Listed with a rate of its own, eth_getBlockByNumber is sampled.
    const r = pool([a!, b!], { sampling: { rate: 0, methods: { eth_getBlockByNumber: 1 } } });
    await inConfigOrder(r);
    await r.forward(call('eth_getBlockByNumber', ['0x1', false]), ['eth_getBlockByNumber']);
    await r.samplesSettled();
    assert.equal(r.samplingStats().agreed, 1);
  });

  test('where a call reads: its block parameter as nodes read it, pinned in place', () => {
    const at = (params: unknown[], hash = true) => whereOf(call('eth_getBalance', params), 1, hash);
    for (const fixed of ['0x10', 'earliest', `0x${'ab'.repeat(32)}`, { blockHash: `0x${'ab'.repeat(32)}` }, { blockNumber: '0x10' }]) {
      assert.deepEqual(at([ADDRESS, fixed]), { fixed: true }, JSON.stringify(fixed));
    }
    assert.equal(at([ADDRESS, 'pending']), null);
    assert.equal(at([ADDRESS, 'nonsense']), null);
    const pinned = (params: unknown[]) => {
      const w = at(params);
      assert.ok(w && !w.fixed);
      return JSON.parse(w.pin(0x2a)) as { params: unknown[] };
    };
    assert.deepEqual(pinned([ADDRESS, 'latest']).params, [ADDRESS, '0x2a']);
    assert.deepEqual(pinned([ADDRESS, 'finalized']).params, [ADDRESS, '0x2a']);
    assert.deepEqual(pinned([ADDRESS, { blockNumber: 'latest' }]).params, [ADDRESS, '0x2a']);
    assert.deepEqual(pinned([ADDRESS]).params, [ADDRESS, '0x2a'], 'left out: appended');
    assert.deepEqual(JSON.parse((whereOf(call('eth_getBlockByNumber', []), 0, false) as { pin(n: number): string }).pin(1)).params, ['0x1']);
    assert.equal(whereOf(call('eth_getStorageAt', [ADDRESS]), 2, true), null, 'a parameter missing before the block');
  });
});

describe('sampling config (C55)', () => {
  const NET = 'avalanche-fuji';
  test('the config refuses a sampled method that has no block parameter, naming the setting', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-sampling-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { methods: { eth_chainId: 1 } } }] }));
    assert.throws(() => loadConfig({ env: { GATEWAY_CONFIG: file } }), /networks\.avalanche-fuji\.sampling\.methods\.eth_chainId: cannot be sampled/);
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { rate: 2 } }] }));
    assert.throws(() => loadConfig({ env: { GATEWAY_CONFIG: file } }), /networks\.avalanche-fuji\.sampling\.rate .*= 2: must be a number from 0 to 1/);
  });
});
