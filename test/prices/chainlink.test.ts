// C34 + C45: the `chainlink` price source against the devnet's feed contract on anvil, read through
// the app's upstream pool; and the prices the devnet hands the app.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { Prices } from '../../src/prices/prices.ts';
import { type TestApp, startTestApp } from '../support/app.ts';

describe('prices: the chainlink source on the devnet', () => {
  let t: TestApp;
  let prices: Prices;
  const MAX_AGE = 3600;

  before(async () => {
    // No cache: every ask reads the feed, so each test sees the price it just set.
    t = await startTestApp({
      devnet: true,
      devnetNetworks: ['native-mainnet', 'native-testnet'],
      overrides: { prices: { cacheSeconds: 0, maxAgeSeconds: MAX_AGE } },
    });
    prices = t.app.parts.prices;
  });
  after(() => t?.close());

  test('C45: the devnet prices native-mainnet from the feed on its chain, other mainnets at fixed prices, testnets not', () => {
    const feed = t.devnet?.priceFeeds['native-mainnet'];
    assert.match(feed ?? '', /^0x[0-9a-fA-F]{40}$/);
    const price = (slug: string) => t.config.networks.find((n) => n.slug === slug)?.price;
    assert.deepEqual(price('native-mainnet'), { type: 'chainlink', network: 'native-mainnet', address: feed });
    assert.deepEqual(price('ethereum'), { type: 'fixed', usd: 3000 });
    assert.deepEqual(price('arbitrum'), { type: 'fixed', usd: 3000 });
    assert.deepEqual(price('polygon'), { type: 'fixed', usd: 0.5 });
    assert.deepEqual(price('bsc'), { type: 'fixed', usd: 600 });
    assert.deepEqual(price('avalanche'), { type: 'fixed', usd: 30 });
    assert.equal(price('native-testnet'), undefined, 'testnet coins stay 0 USD (C34)');
    assert.ok(t.devnet?.priceFeeds['native-testnet'], 'the native testnet has a feed too, for configs that want it');
  });

  test('the feed starts at devnet.nativeUsdPrice', async () => {
    assert.equal(await prices.nativeUsd('native-mainnet'), t.config.devnet.nativeUsdPrice);
    assert.equal(await prices.nativeUsd('native-testnet'), 0);
    assert.equal(await prices.nativeUsd('ethereum'), 3000);
  });

  test('a price set on the feed is read back with its 8 decimals', async () => {
    await t.devnet?.setPrice('native-mainnet', 1234.56789012);
    assert.equal(await prices.nativeUsd('native-mainnet'), 1234.56789012);
    await t.devnet?.setPrice('native-mainnet', 0.07);
    assert.equal(await prices.nativeUsd('native-mainnet'), 0.07);
  });

  test('an answer updated longer ago than maxAgeSeconds gives null; a fresh one gives the price again', async () => {
    const old = Math.floor(Date.now() / 1000) - MAX_AGE - 60;
    await t.devnet?.setPrice('native-mainnet', 0.09, old);
    assert.equal(await prices.nativeUsd('native-mainnet'), null);
    await t.devnet?.setPrice('native-mainnet', 0.09, old + 120); // 60 s inside maxAgeSeconds
    assert.equal(await prices.nativeUsd('native-mainnet'), 0.09);
    await t.devnet?.setPrice('native-mainnet', t.config.devnet.nativeUsdPrice);
    assert.equal(await prices.nativeUsd('native-mainnet'), t.config.devnet.nativeUsdPrice);
  });

  test('a zero answer is no price; an earlier good reading younger than maxAgeSeconds is kept meanwhile', async () => {
    const fresh = new Prices({ settings: t.config, upstreams: t.app.parts.upstreams, logger: pino({ level: 'silent' }) });
    await t.devnet?.setPrice('native-mainnet', 0);
    try {
      assert.equal(await fresh.nativeUsd('native-mainnet'), null, 'no good reading yet: null');
      await t.devnet?.setPrice('native-mainnet', 0.06);
      assert.equal(await fresh.nativeUsd('native-mainnet'), 0.06);
      await t.devnet?.setPrice('native-mainnet', 0);
      assert.equal(await fresh.nativeUsd('native-mainnet'), 0.06, 'the last real price, seconds old, still stands');
    } finally {
      fresh.close();
      await t.devnet?.setPrice('native-mainnet', t.config.devnet.nativeUsdPrice);
    }
  });

  test('a testnet priced from its own feed by config reads it; an address without a contract gives null', async () => {
    const draft = structuredClone<Config>(t.config);
    const testnet = draft.networks.find((n) => n.slug === 'native-testnet');
    const mainnet = draft.networks.find((n) => n.slug === 'native-mainnet');
    assert.ok(testnet && mainnet && t.devnet);
    testnet.price = { type: 'chainlink', network: 'native-testnet', address: t.devnet.priceFeeds['native-testnet'] ?? '' };
    mainnet.price = { type: 'chainlink', network: 'native-mainnet', address: '0x000000000000000000000000000000000000dead' };
    const p = new Prices({ settings: validateConfig(draft), upstreams: t.app.parts.upstreams, logger: pino({ level: 'silent' }) });
    try {
      await t.devnet.setPrice('native-testnet', 0.011);
      assert.equal(await p.nativeUsd('native-testnet'), 0.011);
      assert.equal(await p.nativeUsd('native-mainnet'), null);
    } finally {
      p.close();
    }
  });
});
