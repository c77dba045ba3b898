// A network's pace (C26): each shipped network bounds how fast its head may climb by its chain's
// real block time, so a node raising its head faster than the chain can move is set aside even
// when only two nodes answer and they are read often. The pool of the shipped Polygon network, on
// a clock of the test's own: each reading is a probe round after the clock moved on.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { manualClock } from '../support/clock.ts';
import { fakes, pool } from './helpers.ts';

const START = 5_000;
const config = loadConfig({ env: {} });

describe('a network\'s pace (C26)', () => {
  test('the shipped networks carry their chain\'s block time', () => {
    const pace = Object.fromEntries(config.networks.map((n) => [n.slug, n.blockTimeMs]));
    assert.deepEqual(
      { ethereum: pace.ethereum, sepolia: pace['ethereum-sepolia'], polygon: pace.polygon, bsc: pace.bsc, arbitrum: pace.arbitrum, optimism: pace.optimism, base: pace.base, avalanche: pace.avalanche, native: pace['native-mainnet'] },
      { ethereum: 12_000, sepolia: 12_000, polygon: 2_000, bsc: 750, arbitrum: 250, optimism: 2_000, base: 2_000, avalanche: 2_000, native: 2_000 },
    );
  });

  test('two nodes, one raising its head by 15 blocks/s on a chain of 2 s blocks: not believed, the honest one not shown behind, reads go to it', async () => {
    const [liar, honest] = await fakes(2, { head: START });
    const polygon = config.networks.find((n) => n.slug === 'polygon');
    assert.ok(polygon?.blockTimeMs);
    const clock = manualClock();
    // Polygon as shipped (a block about every 2 s), with the gateway's settings for its pools.
    const p = pool([liar!, honest!], {
      network: 'polygon',
      blockTimeMs: polygon.blockTimeMs,
      maxLagBlocks: config.rpc.maxLagBlocks,
      hedge: config.rpc.hedge,
      providerErrors: config.rpc.providerErrors,
      now: clock.now,
    });
    await p.checkHealth();
    assert.equal(p.head(), START, 'the first head');
    // Read every 200 ms: each reading sees the liar only 3 blocks further, well within the 32
    // blocks of slack a single reading is allowed. Four seconds of climbing: the liar is 60 blocks
    // up, the chain has made 2.
    for (let ms = 200; ms <= 4_000; ms += 200) {
      clock.advance(200);
      liar!.setHead(START + Math.floor((15 * ms) / 1000));
      honest!.setHead(START + Math.floor(ms / 2000));
      await p.checkHealth();
    }
    const [l, h] = p.health();
    assert.equal(l?.head, START + 60, 'the liar 60 blocks up');
    assert.equal(l?.outlier, true, `the liar at ${l?.head} is not set aside (network head ${p.head()})`);
    assert.equal(h?.outlier, undefined);
    assert.ok((h?.lag ?? Infinity) <= 2, `the honest node is shown ${h?.lag} blocks behind`);
    assert.ok((p.head() ?? 0) <= START + 4, `the network's head ${p.head()} follows the liar`);
    // Reads go to the honest node (the liar is listed first, so it would take them while in line).
    const before = liar!.callCount('eth_getBalance');
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', 'latest'] });
    for (let i = 0; i < 6; i++) assert.equal((await p.forward(body, ['eth_getBalance'])).upstream, 1);
    assert.equal(liar!.callCount('eth_getBalance'), before);
  });
});
