// Faucet settings (C30, C31, C32): keys from env or config, bad settings named at start, devnet keys.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigError } from '../../src/errors/config.ts';
import { faucetWallets, withDevnetFaucetKeys } from '../../src/faucet/wallets.ts';

const TESTNETS = ['native-testnet', 'ethereum-sepolia', 'polygon-amoy', 'bsc-testnet', 'arbitrum-sepolia', 'optimism-sepolia', 'base-sepolia', 'avalanche-fuji'];

describe('faucet settings', () => {
  test('no key configured: no faucet network', () => {
    assert.deepEqual(faucetWallets(loadConfig({ env: {} })), []);
  });

  test('FAUCET_PRIVATE_KEY serves every testnet; FAUCET_PRIVATE_KEY_<SLUG> one; enabled:false switches one off', () => {
    const all = generatePrivateKey();
    const one = generatePrivateKey();
    const c = loadConfig({
      env: { FAUCET_PRIVATE_KEY: all, FAUCET_PRIVATE_KEY_ETHEREUM_SEPOLIA: one },
      overrides: { faucet: { networks: { 'polygon-amoy': { enabled: false }, 'base-sepolia': { maxAmount: '0.5', defaultAmount: '0.1' } } } },
    });
    const wallets = faucetWallets(c);
    assert.deepEqual(wallets.map((w) => w.slug), TESTNETS.filter((s) => s !== 'polygon-amoy'));
    assert.equal(wallets.find((w) => w.slug === 'ethereum-sepolia')?.address, privateKeyToAddress(one));
    assert.equal(wallets.find((w) => w.slug === 'native-testnet')?.address, privateKeyToAddress(all));
    const base = wallets.find((w) => w.slug === 'base-sepolia');
    assert.equal(base?.maxWei, 5n * 10n ** 17n);
    assert.equal(base?.defaultWei, 10n ** 17n);
    assert.equal(wallets.find((w) => w.slug === 'bsc-testnet')?.maxWei, 10n * 10n ** 18n, 'default maximum: 10');
  });

  test('a bad faucet setting stops the start with a message naming it, never the key', () => {
    const key = generatePrivateKey();
    const cases: Array<[Parameters<typeof loadConfig>[0], RegExp]> = [
      [{ env: { FAUCET_PRIVATE_KEY_ATLANTIS: key } }, /FAUCET_PRIVATE_KEY_ATLANTIS/],
      [{ env: { FAUCET_PRIVATE_KEY: 'not-a-key' } }, /faucet\.privateKey/],
      [{ env: {}, overrides: { faucet: { maxAmount: '-1' } } }, /faucet\.maxAmount/],
      [{ env: {}, overrides: { faucet: { cooldownSeconds: -5 } } }, /faucet\.cooldownSeconds/],
      [{ env: {}, overrides: { faucet: { recheckIntervalSeconds: 0 } } }, /faucet\.recheckIntervalSeconds/],
      [{ env: {}, overrides: { faucet: { recheckAfterSeconds: -1 } } }, /faucet\.recheckAfterSeconds/],
      // C32: a network that is not configured, named with its setting.
      [{ env: {}, overrides: { faucet: { networks: { atlantis: { privateKey: key } } } } }, /faucet\.networks\.atlantis = "atlantis": no such network/],
    ];
    for (const [opts, pattern] of cases) {
      assert.throws(() => loadConfig(opts), (err: Error) => err instanceof ConfigError && pattern.test(err.message) && !err.message.includes('not-a-key'));
    }
    const semantic: Array<[Record<string, unknown>, RegExp]> = [
      [{ networks: { ethereum: { privateKey: key } } }, /faucet\.networks\.ethereum: a faucet works on testnets only/],
      [{ privateKey: `0x${'0'.repeat(64)}` }, /faucet\.privateKey: not a valid secp256k1 private key/],
      [{ privateKey: key, defaultAmount: '11' }, /more than its maximum/],
      [{ privateKey: key, maxAmount: '0' }, /faucet\.maxAmount: must be more than 0/],
      [{ privateKey: key, networks: { 'bsc-testnet': { maxAmount: '0.0000000000000000001' } } }, /faucet\.networks\.bsc-testnet\.maxAmount: must have at most 18 decimals/],
    ];
    for (const [faucet, pattern] of semantic) {
      const c = loadConfig({ env: {}, overrides: { faucet } });
      assert.throws(() => faucetWallets(c), (err: Error) => err instanceof ConfigError && pattern.test(err.message) && !err.message.includes(key.slice(2)));
    }
  });

  test('devnet (C31): a key made per run for each testnet without one; configured keys are kept; every faucet address is funded', () => {
    const own = generatePrivateKey();
    const c = loadConfig({ env: { FAUCET_PRIVATE_KEY_NATIVE_TESTNET: own } });
    const a = withDevnetFaucetKeys(c);
    const b = withDevnetFaucetKeys(c);
    assert.deepEqual(faucetWallets(a.config).map((w) => w.slug), TESTNETS);
    assert.equal(a.fund.length, 8);
    assert.ok(a.fund.includes(privateKeyToAddress(own)));
    assert.equal(a.config.faucet.networks['native-testnet']?.privateKey, own);
    assert.notEqual(a.config.faucet.networks['base-sepolia']?.privateKey, b.config.faucet.networks['base-sepolia']?.privateKey, 'random per run');
    assert.equal(c.faucet.networks['base-sepolia'], undefined, 'the given config is not changed');
    const some = withDevnetFaucetKeys(c, ['native-testnet', 'ethereum-sepolia', 'ethereum']);
    assert.deepEqual(faucetWallets(some.config).map((w) => w.slug), ['native-testnet', 'ethereum-sepolia']);
  });
});
