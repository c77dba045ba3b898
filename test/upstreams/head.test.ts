// C26: the best head is the one the nodes agree on; a node far ahead is the outlier.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agreedHead } from '../../src/upstreams/http/pool.ts';
import { call, fakes, pool } from './helpers.ts';

describe('head from the majority (C26)', () => {
  test('a lying node far ahead neither sets the head nor makes the honest nodes lag', async () => {
    const [liar, honest1, honest2] = await fakes(3);
    liar?.setHead(50_000_000);
    honest1?.setHead(1_000);
    honest2?.setHead(1_002);
    const heads: number[] = [];
    // The liar is listed first: before this rule it set the head and the honest nodes were skipped as lagging.
    const p = pool([liar!, honest1!, honest2!], { maxLagBlocks: 5, onHead: (h) => heads.push(h) });
    await p.checkHealth();
    assert.equal(p.head(), 1_002);
    assert.deepEqual(heads, [1_002]);
    const [l, h1, h2] = p.health();
    assert.deepEqual([h1?.lag, h2?.lag], [2, 0]);
    assert.equal(l?.outlier, true);
    assert.equal(h1?.outlier, undefined);
    // Calls go to the honest nodes (either, by probe latency); the liar is tried only after them.
    for (let i = 0; i < 5; i++) assert.notEqual((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    assert.equal(liar?.callCount('eth_chainId'), 0);
    await honest2?.setMode('refuse');
    await honest1?.setMode('refuse');
    // Both honest nodes gone: the liar is the last resort.
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('a node really behind is still the laggard when the others agree', async () => {
    const [behind, a, b] = await fakes(3);
    behind?.setHead(900);
    a?.setHead(1_000);
    b?.setHead(1_001);
    const p = pool([behind!, a!, b!], { maxLagBlocks: 5 });
    await p.checkHealth();
    assert.equal(p.head(), 1_001);
    assert.equal(p.health()[0]?.lag, 101);
    assert.notEqual((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('agreedHead: the highest head that at least half of the nodes reach within the window', () => {
    assert.equal(agreedHead([], 5), null);
    assert.equal(agreedHead([7], 5), 7);
    assert.equal(agreedHead([100, 10_000, 103], 5), 103);
    assert.equal(agreedHead([100, 200], 5), 200); // two that disagree: half is one, the higher (the jump rule guards it)
    assert.equal(agreedHead([100, 101, 500, 900, 902], 5), 500); // two that agree are not half of five
    assert.equal(agreedHead([100, 105], 5), 105);
    assert.equal(agreedHead([100, 106, 2_000], 5), 106); // no two agree, the one far above is not the head
    assert.equal(agreedHead([1_000_000_000, 5_011, 5_000], 5), 5_011);
    assert.equal(agreedHead([5_000, 5_002, 5_011, 5_013], 5), 5_013); // an even split: the higher half
  });
});

// C26: the head comes from agreement, and no reading makes it jump further than the
// chain could have moved (C26).
describe('head from the majority, with a lying node (C26)', () => {
  test('three nodes, a liar and two honest ones 11 blocks apart: the head is the upper honest one, reads go to the honest nodes', async () => {
    const [liar, low, high] = await fakes(3);
    liar?.setHead(1_000_000_000);
    low?.setHead(5_000);
    high?.setHead(5_011);
    const heads: number[] = [];
    const lines: Array<{ level: string; obj: object; msg: string }> = [];
    const logger = {
      debug: () => undefined,
      info: (obj: object, msg: string) => lines.push({ level: 'info', obj, msg }),
      warn: (obj: object, msg: string) => lines.push({ level: 'warn', obj, msg }),
      error: (obj: object, msg: string) => lines.push({ level: 'error', obj, msg }),
    };
    // The liar is listed first: before this rule no two heads agreed within 5 blocks and the highest, the liar's, was taken.
    const p = pool([liar!, low!, high!], { maxLagBlocks: 5, onHead: (h) => heads.push(h), logger });
    await p.checkHealth();
    assert.equal(p.head(), 5_011);
    assert.deepEqual(heads, [5_011], 'the head feed never saw the liar’s number');
    const [l, lo, hi] = p.health();
    assert.equal(l?.outlier, true);
    assert.deepEqual([lo?.outlier, hi?.outlier], [undefined, undefined]);
    assert.deepEqual([lo?.lag, hi?.lag, l?.lag], [11, 0, 0]);
    for (let i = 0; i < 6; i++) assert.notEqual((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    assert.equal(liar?.callCount('eth_chainId'), 0);
    // Said once at warn, naming the upstream, not again at the next round.
    await p.checkHealth();
    const warned = lines.filter((x) => x.level === 'warn' && /far above/.test(x.msg));
    assert.equal(warned.length, 1);
    assert.equal((warned[0]?.obj as { upstream?: string }).upstream, 'testnet-0');
    // The honest node that lags is still read before the liar.
    await high?.setMode('refuse');
    await p.checkHealth();
    assert.equal(p.head(), 5_000);
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
  });

  test('two nodes, one jumps from 5000 to 10^9 in one reading: not believed, reads stay on the honest one', async () => {
    const [honest, jumper] = await fakes(2);
    honest?.setHead(5_000);
    jumper?.setHead(5_000);
    const heads: number[] = [];
    // The jumper is listed first: it would take the calls while both are in line.
    const p = pool([jumper!, honest!], { maxLagBlocks: 5, onHead: (h) => heads.push(h) });
    await p.checkHealth();
    assert.equal(p.head(), 5_000);
    jumper?.setHead(1_000_000_000);
    honest?.setHead(5_001);
    await p.checkHealth();
    assert.equal(p.head(), 5_001);
    assert.deepEqual(heads, [5_000, 5_001]);
    assert.equal(p.health()[0]?.outlier, true);
    for (let i = 0; i < 4; i++) assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
    assert.equal(jumper?.callCount('eth_chainId'), 0);
    // The next readings do not make it believable either.
    await p.checkHealth();
    assert.equal(p.head(), 5_001);
    // Back in line, it is used again.
    jumper?.setHead(5_001);
    await p.checkHealth();
    assert.equal(p.health()[0]?.outlier, undefined);
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('two nodes: while the honest one is down, the jumper is still not believed', async () => {
    const [honest, jumper] = await fakes(2);
    honest?.setHead(5_000);
    jumper?.setHead(5_000);
    const p = pool([jumper!, honest!], { maxLagBlocks: 5 });
    await p.checkHealth();
    await honest?.setMode('refuse');
    jumper?.setHead(1_000_000_000);
    await p.checkHealth();
    assert.equal(p.head(), 5_000);
    // The only node answering is used all the same.
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('a network moving ahead within what the chain can do is followed, and one node alone is its own head', async () => {
    const [a, b] = await fakes(2);
    a?.setHead(5_000);
    b?.setHead(5_000);
    const p = pool([a!, b!], { maxLagBlocks: 5 });
    await p.checkHealth();
    a?.setHead(5_020);
    b?.setHead(5_020);
    await p.checkHealth();
    assert.equal(p.head(), 5_020);
    const [only] = await fakes(1);
    only?.setHead(5_000);
    const single = pool([only!], { maxLagBlocks: 5 });
    await single.checkHealth();
    only?.setHead(1_000_000_000);
    await single.checkHealth();
    assert.equal(single.head(), 1_000_000_000, 'nothing to compare it with');
  });

  test('two answering upstreams that jumped together are followed, whatever one that fails last said', async () => {
    const [a, b, c] = await fakes(3);
    for (const f of [a, b, c]) f?.setHead(5_000);
    const p = pool([a!, b!, c!], { maxLagBlocks: 5 });
    await p.checkHealth();
    await c?.setMode('refuse');
    a?.setHead(9_000);
    b?.setHead(9_001);
    await p.checkHealth();
    assert.equal(p.head(), 9_001);
    assert.deepEqual(p.health().map((h) => h.outlier), [undefined, undefined, undefined]);
  });
});
