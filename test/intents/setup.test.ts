// C41, C42: the intents config as src/intents/setup.ts reads it: the default routes, and the
// settings that stop the start (a route across mainnet and testnet, a solver key shared with the
// faucet, a bad key).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generatePrivateKey } from 'viem/accounts';
import { loadConfig } from '../../src/config/load.ts';
import { defaultRoutes, readIntentsConfig } from '../../src/intents/setup.ts';

describe('intents config (C41, C42)', () => {
  test('the default routes join the ETH mainnets among themselves and the Sepolia testnets among themselves, never across', () => {
    const routes = defaultRoutes(loadConfig({ env: {} }).networks).map((r) => `${r.from}>${r.to}`);
    const mainnets = ['ethereum', 'arbitrum', 'optimism', 'base'];
    const testnets = ['ethereum-sepolia', 'arbitrum-sepolia', 'optimism-sepolia', 'base-sepolia'];
    const expected = [mainnets, testnets].flatMap((group) => group.flatMap((a) => group.filter((b) => b !== a).map((b) => `${a}>${b}`)));
    assert.deepEqual([...routes].sort(), [...expected].sort());
  });

  test('a configured route between a mainnet and a testnet, a solver key shared with the faucet and a bad key stop the start', () => {
    assert.throws(() => readIntentsConfig(loadConfig({ env: {}, overrides: { intents: { routes: [{ from: 'ethereum', to: 'ethereum-sepolia' }] } } })), /never mainnet to testnet/);
    const key = generatePrivateKey();
    assert.throws(() => readIntentsConfig(loadConfig({ env: { FAUCET_PRIVATE_KEY: key, SOLVER_PRIVATE_KEY: key } })), /faucet/);
    assert.throws(
      () => loadConfig({ env: { SOLVER_PRIVATE_KEY_ARBITRUM: '0x1234' } }),
      (err: Error) => err.message.includes('SOLVER_PRIVATE_KEY_ARBITRUM') && !err.message.includes('0x1234'),
    );
    const setup = readIntentsConfig(loadConfig({ env: { SOLVER_PRIVATE_KEY_ARBITRUM: key } }));
    assert.deepEqual([...setup.solvers.keys()], ['arbitrum']);
  });
});
