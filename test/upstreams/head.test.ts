// Issue 15, point 2: the best head is the one the nodes agree on; a node far ahead is the outlier.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agreedHead } from '../../src/upstreams/pool.ts';
import { call, fakes, pool } from './helpers.ts';

describe('head from the majority (issue 15)', () => {
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

  test('agreedHead: the highest head two nodes agree on within the window, else the highest', () => {
    assert.equal(agreedHead([], 5), null);
    assert.equal(agreedHead([7], 5), 7);
    assert.equal(agreedHead([100, 10_000, 103], 5), 103);
    assert.equal(agreedHead([100, 200], 5), 200); // two that disagree: nothing tells which lies
    assert.equal(agreedHead([100, 101, 500, 900, 902], 5), 902); // two liars that agree win: documented
    assert.equal(agreedHead([100, 105], 5), 105);
    assert.equal(agreedHead([100, 106, 2_000], 5), 2_000);
  });
});
