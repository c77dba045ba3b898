// C34 + C45: the `chainlink` price source (src/prices/prices.ts) against the devnet's feed contract
// on anvil, read through the networks' upstream pools; and the prices the devnet hands a config
// (src/devnet/prices.ts). The modules as the app makes them under --devnet, without the app.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { loadConfig, validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { type Devnet, DEVNET_BLOCK_TIME_MS, startDevnet } from '../../src/devnet/devnet.ts';
import { applyDevnetPrices } from '../../src/devnet/prices.ts';
import { Prices } from '../../src/prices/prices.ts';
import { Upstreams } from '../../src/upstreams/upstreams.ts';

const NETWORKS = ['native-mainnet', 'native-testnet'];
const logger = pino({ level: 'silent' });

describe('prices: the chainlink source on the devnet', () => {
  let devnet: Devnet;
  let config: Config;
  let upstreams: Upstreams;
  let prices: Prices;
  const MAX_AGE = 3600;

  before(async () => {
    // No cache: every ask reads the feed, so each test sees the price it just set.
    const base = loadConfig({ env: {}, overrides: { prices: { cacheSeconds: 0, maxAgeSeconds: MAX_AGE } } });
    devnet = await startDevnet({
      networks: base.networks.filter((n) => NETWORKS.includes(n.slug)).map((n) => ({ slug: n.slug, chainId: n.chainId, native: n.native === true })),
      nativeBlockTimeSeconds: base.devnet.nativeBlockTimeSeconds,
      nativeUsdPrice: base.devnet.nativeUsdPrice,
    });
    // As --devnet does: the devnet's price sources, and its chains as the networks' upstreams.
    const draft = structuredClone<Config>(base);
    applyDevnetPrices(draft, devnet.priceFeeds);
    for (const n of draft.networks) {
      const u = devnet.upstreams[n.slug];
      if (!u) continue;
      n.upstreams = [{ http: u.http, ws: u.ws }];
      n.blockTimeMs = DEVNET_BLOCK_TIME_MS;
    }
    config = validateConfig(draft);
    upstreams = new Upstreams(config, logger);
    prices = new Prices({ settings: config, upstreams, logger });
  });
  after(async () => {
    prices?.close();
    await upstreams?.close();
    await devnet?.stop();
  });

  test('C45: the devnet prices native-mainnet from the feed on its chain, other mainnets at fixed prices, testnets not', () => {
    const feed = devnet.priceFeeds['native-mainnet'];
    assert.match(feed ?? '', /^0x[0-9a-fA-F]{40}$/);
    const price = (slug: string) => config.networks.find((n) => n.slug === slug)?.price;
    assert.deepEqual(price('native-mainnet'), { type: 'chainlink', network: 'native-mainnet', address: feed });
    assert.deepEqual(price('ethereum'), { type: 'fixed', usd: 3000 });
    assert.deepEqual(price('arbitrum'), { type: 'fixed', usd: 3000 });
    assert.deepEqual(price('polygon'), { type: 'fixed', usd: 0.5 });
    assert.deepEqual(price('bsc'), { type: 'fixed', usd: 600 });
    assert.deepEqual(price('avalanche'), { type: 'fixed', usd: 30 });
    assert.equal(price('native-testnet'), undefined, 'testnet coins stay 0 USD (C34)');
    assert.ok(devnet.priceFeeds['native-testnet'], 'the native testnet has a feed too, for configs that want it');
  });

  test('the feed starts at devnet.nativeUsdPrice', async () => {
    assert.equal(await prices.nativeUsd('native-mainnet'), config.devnet.nativeUsdPrice);
    assert.equal(await prices.nativeUsd('native-testnet'), 0);
    assert.equal(await prices.nativeUsd('ethereum'), 3000);
  });

  test('a price set on the feed is read back with its 8 decimals', async () => {
    await devnet.setPrice('native-mainnet', 1234.56789012);
    assert.equal(await prices.nativeUsd('native-mainnet'), 1234.56789012);
    await devnet.setPrice('native-mainnet', 0.07);
    assert.equal(await prices.nativeUsd('native-mainnet'), 0.07);
  });

  test('an answer updated longer ago than maxAgeSeconds gives null; a fresh one gives the price again', async () => {
    const old = Math.floor(Date.now() / 1000) - MAX_AGE - 60;
    await devnet.setPrice('native-mainnet', 0.09, old);
    assert.equal(await prices.nativeUsd('native-mainnet'), null);
    await devnet.setPrice('native-mainnet', 0.09, old + 120); // 60 s inside maxAgeSeconds
    assert.equal(await prices.nativeUsd('native-mainnet'), 0.09);
    await devnet.setPrice('native-mainnet', config.devnet.nativeUsdPrice);
    assert.equal(await prices.nativeUsd('native-mainnet'), config.devnet.nativeUsdPrice);
  });

  test('a zero answer is no price; an earlier good reading younger than maxAgeSeconds is kept meanwhile', async () => {
    const fresh = new Prices({ settings: config, upstreams, logger });
    await devnet.setPrice('native-mainnet', 0);
    try {
      assert.equal(await fresh.nativeUsd('native-mainnet'), null, 'no good reading yet: null');
      await devnet.setPrice('native-mainnet', 0.06);
      assert.equal(await fresh.nativeUsd('native-mainnet'), 0.06);
      await devnet.setPrice('native-mainnet', 0);
      assert.equal(await fresh.nativeUsd('native-mainnet'), 0.06, 'the last real price, seconds old, still stands');
    } finally {
      fresh.close();
      await devnet.setPrice('native-mainnet', config.devnet.nativeUsdPrice);
    }
  });

  test('a testnet priced from its own feed by config reads it; an address without a contract gives null', async () => {
    const draft = structuredClone<Config>(config);
    const testnet = draft.networks.find((n) => n.slug === 'native-testnet');
    const mainnet = draft.networks.find((n) => n.slug === 'native-mainnet');
    assert.ok(testnet && mainnet && devnet);
    testnet.price = { type: 'chainlink', network: 'native-testnet', address: devnet.priceFeeds['native-testnet'] ?? '' };
    mainnet.price = { type: 'chainlink', network: 'native-mainnet', address: '0x000000000000000000000000000000000000dead' };
    const p = new Prices({ settings: validateConfig(draft), upstreams, logger });
    try {
      await devnet.setPrice('native-testnet', 0.011);
      assert.equal(await p.nativeUsd('native-testnet'), 0.011);
      assert.equal(await p.nativeUsd('native-mainnet'), null);
    } finally {
      p.close();
    }
  });
});
