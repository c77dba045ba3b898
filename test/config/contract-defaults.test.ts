// The defaults the contract names, as the shipped config and the devnet give them: a default that
// drifts from its contract id fails here, whatever the tests that set their own values say.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';

const shipped = loadConfig({ env: {} });
const devnet = loadConfig({ env: {}, devnet: true });

describe('defaults the contract names', () => {
  test('C33: events are acted on 3 blocks deep (1 under --devnet); catching up at most 10,000 blocks', () => {
    assert.equal(shipped.events.confirmations, 3);
    assert.equal(devnet.events.confirmations, 1);
    assert.equal(shipped.events.maxCatchUpBlocks, 10_000);
  });

  test('C34: prices cached 60 s, null past an hour', () => {
    assert.equal(shipped.prices.cacheSeconds, 60);
    assert.equal(shipped.prices.maxAgeSeconds, 3_600);
  });

  test('C35: whale alerts of 10,000 native units on the two native networks, kept 90 days', () => {
    assert.equal(shipped.whaleAlerts.recordMinValue, '10000');
    assert.deepEqual(shipped.whaleAlerts.networks, ['native-mainnet', 'native-testnet']);
    assert.equal(shipped.whaleAlerts.retentionDays, 90);
  });

  test('C37, C39: 10 webhook endpoints on max, 100 on enterprise; 10 s per attempt, retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    assert.deepEqual(shipped.webhooks.maxEndpoints, { max: 10, enterprise: 100 });
    assert.equal(shipped.webhooks.timeoutMs, 10_000);
    assert.deepEqual(shipped.webhooks.retryDelaysSeconds, [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600]);
  });

  test('C41: an intent costs 10 bps on top of the fill gas', () => {
    assert.equal(shipped.intents.feeBps, 10);
  });
});
