// A network's pace (C26): each shipped network bounds how fast its head may climb by its chain's
// real block time, so a node raising its head faster than the chain can move is set aside even
// when only two nodes answer and they are read often.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';

const START = 5_000;

describe('a network\'s pace (C26)', () => {
  let honest: FakeNode;
  let liar: FakeNode;
  let t: TestApp;
  let climb: NodeJS.Timeout | undefined;

  before(async () => {
    [liar, honest] = await Promise.all([startFakeNode({ head: START }), startFakeNode({ head: START })]);
    // Polygon as shipped (a block about every 2 s), read every 200 ms: each reading sees the liar
    // only 3 blocks further, well within the 32 blocks of slack a single reading is allowed.
    t = await startTestApp({ env: { UPSTREAM_POLYGON: `${liar.url},${honest.url}` }, overrides: { rpc: { healthIntervalMs: 200 } } });
  });
  after(async () => {
    clearInterval(climb);
    await t?.close();
    await Promise.all([liar?.close(), honest?.close()]);
  });

  test('the shipped networks carry their chain\'s block time', () => {
    const pace = Object.fromEntries(t.app.parts.config.networks.map((n) => [n.slug, n.blockTimeMs]));
    assert.deepEqual(
      { ethereum: pace.ethereum, sepolia: pace['ethereum-sepolia'], polygon: pace.polygon, bsc: pace.bsc, arbitrum: pace.arbitrum, optimism: pace.optimism, base: pace.base, avalanche: pace.avalanche, native: pace['native-mainnet'] },
      { ethereum: 12_000, sepolia: 12_000, polygon: 2_000, bsc: 750, arbitrum: 250, optimism: 2_000, base: 2_000, avalanche: 2_000, native: 2_000 },
    );
  });

  test('two nodes, one raising its head by 15 blocks/s on a chain of 2 s blocks: not believed, the honest one not shown behind, reads go to it', async () => {
    const pool = t.app.parts.upstreams.pool('polygon'); // its probes start here
    await waitFor(() => pool.head() === START, { what: 'the first head' });
    const started = Date.now();
    climb = setInterval(() => {
      const s = (Date.now() - started) / 1000;
      liar.setHead(START + Math.floor(15 * s));
      honest.setHead(START + Math.floor(s / 2));
    }, 50);
    // Four seconds of climbing: the liar is 60 blocks up, the chain has made 2.
    await waitFor(() => (pool.health()[0]?.head ?? 0) >= START + 60, { what: 'the liar 60 blocks up', timeoutMs: 15_000 });
    type Ready = { networks: Record<string, { head: number | null; upstreams: Array<{ head: number | null; lag: number | null; outlier?: true }> }> };
    const ready = (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<Ready>();
    const polygon = ready.networks.polygon;
    assert.ok(polygon);
    const [l, h] = polygon.upstreams;
    assert.equal(l?.outlier, true, `the liar at ${l?.head} is not set aside (network head ${polygon.head})`);
    assert.equal(h?.outlier, undefined);
    assert.ok((h?.lag ?? Infinity) <= 2, `the honest node is shown ${h?.lag} blocks behind`);
    assert.ok((polygon.head ?? 0) <= START + 4, `the network's head ${polygon.head} follows the liar`);
    // Reads go to the honest node (the liar is listed first, so it would take them while in line).
    const before = liar.callCount('eth_getBalance');
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', 'latest'] });
    for (let i = 0; i < 6; i++) assert.equal((await pool.forward(body, ['eth_getBalance'])).upstream, 1);
    assert.equal(liar.callCount('eth_getBalance'), before);
  });
});
