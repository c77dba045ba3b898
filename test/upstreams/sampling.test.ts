// C55: answer sampling. With consensus off, a share of the answers is checked in the background
// against other nodes at the same block; a node that disagrees is marked (read last), then out of
// rotation until it agrees again. Scripted nodes lie; anvil shows that a moving chain marks nobody.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { whereOf } from '../../src/upstreams/http/sampling.ts';
import type { SamplingOptions } from '../../src/upstreams/http/types.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { call, closeAfter, fakes, pool } from './helpers.ts';

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

describe('answer sampling on a moving chain (C55)', () => {
  let anvil: BareAnvil;
  before(async () => {
    anvil = await startAnvil();
  });
  after(async () => {
    await anvil?.stop();
  });

  test('balances at latest changing with every block (anvil, one transfer after the other, each mined at once): no node is marked, the checks agree', async () => {
    const target = '0x00000000000000000000000000000000000000aa';
    // Three nodes in front of one chain, answering after different delays: a check that compared
    // the caller's answer at latest with another node's a moment later would see new blocks.
    const nodes = await Promise.all([0, 40, 80].map((delayMs) => startFakeNode({ forwardTo: anvil.url, delayMs })));
    for (const n of nodes) closeAfter(n);
    const p = pool(nodes, { sampling: EVERY, healthIntervalMs: 200 });
    p.start();
    await p.firstRound();
    let sending = true;
    const rpc = async (method: string, params: unknown[]) =>
      (await (await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json()) as { result: unknown };
    const [from] = (await rpc('eth_accounts', [])).result as string[];
    const sender = (async () => {
      while (sending) {
        await rpc('eth_sendTransaction', [{ from, to: target, value: '0x1' }]);
      }
    })();
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 40; i++) {
        const res = await p.forward(call('eth_getBalance', [target, 'latest'], i), ['eth_getBalance']);
        seen.add(JSON.parse(res.body.toString()).result as string);
        await p.samplesSettled();
      }
    } finally {
      sending = false;
      await sender;
    }
    assert.ok(seen.size > 5, `the balance moved while the test ran (${seen.size} values)`);
    const stats = p.samplingStats();
    assert.equal(stats.disagreed, 0);
    assert.ok(stats.agreed >= 30, `checks agreed: ${JSON.stringify(stats)}`);
    assert.ok(p.health().every((h) => h.misbehaving === undefined));
  });
});

describe('answer sampling through the gateway (C55)', () => {
  const NET = 'avalanche-fuji';
  let t: TestApp;
  let nodes: FakeNode[];
  let key: string;

  before(async () => {
    nodes = await Promise.all([startFakeNode(), startFakeNode(), startFakeNode()]);
    nodes[0]!.setScript('eth_getBalance', () => LIE);
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-sampling-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { rate: 1 } }] }));
    t = await startTestApp({
      listen: true,
      env: { GATEWAY_CONFIG: file, UPSTREAM_AVALANCHE_FUJI: nodes.map((n) => n.url).join(',') },
      overrides: { cache: { enabled: false } },
    });
    key = (await createKey(t.app, { networks: [NET] })).key;
  });
  after(async () => {
    await t?.close();
    await Promise.all((nodes ?? []).map((n) => n.close()));
  });

  test('a lying node is shown in /health/ready and counted in /metrics by method; the callers are answered by the others', async () => {
    const post = async (id: number) =>
      (await (await fetch(`${t.url}/v1/${NET}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: call('eth_getBalance', [ADDRESS, 'latest'], id) })).json()) as { result: unknown };
    const ready = async () => (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, { upstreams: Array<{ misbehaving?: { disagreements: number; outOfRotation: boolean } }> }> }>().networks[NET];
    // The first answers may be the liar's, before a check has marked it; none once it is marked.
    const results: unknown[] = [];
    await waitFor(async () => ((await ready())?.upstreams[0]?.misbehaving?.outOfRotation ? true : (results.push((await post(results.length)).result), undefined)), {
      what: 'the liar out of rotation',
      timeoutMs: 15_000,
      intervalMs: 20,
    });
    for (let i = 0; i < 5; i++) results.push((await post(1_000 + i)).result);
    assert.ok(results.slice(-5).every((r) => r !== '0xbad'), JSON.stringify(results));
    assert.ok(results.filter((r) => r === '0xbad').length <= 3, JSON.stringify(results));
    const report = await ready();
    assert.equal(report?.upstreams[0]?.misbehaving?.outOfRotation, true);
    assert.equal(report?.upstreams[1]?.misbehaving, undefined);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, new RegExp(`junction_upstream_misbehaving_total\\{network="${NET}",upstream="${NET}-0",method="eth_getBalance"\\} [3-9]`));
    assert.match(metrics, new RegExp(`junction_upstream_marked\\{network="${NET}",upstream="${NET}-0"\\} 2`));
    assert.match(metrics, new RegExp(`junction_upstream_samples_total\\{network="${NET}",outcome="disagreed"\\} [3-9]`));
    const line = t.logs.find((l) => l.includes('out of rotation until a sampled check'));
    assert.ok(line, 'a warn line names it');
    assert.ok(!line.includes(String(nodes[0]!.port)), 'never the URL');
  });

  test('the config refuses a sampled method that has no block parameter, naming the setting', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-sampling-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { methods: { eth_chainId: 1 } } }] }));
    await assert.rejects(startTestApp({ env: { GATEWAY_CONFIG: file } }), /networks\.avalanche-fuji\.sampling\.methods\.eth_chainId: cannot be sampled/);
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { rate: 2 } }] }));
    await assert.rejects(startTestApp({ env: { GATEWAY_CONFIG: file } }), /networks\.avalanche-fuji\.sampling\.rate .*= 2: must be a number from 0 to 1/);
  });
});
