// C40: the shipped token list, and the devnet's test token replacing it on each devnet network.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getAddress } from 'viem';
import { loadConfig, validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { applyDevnetTokens, DEVNET_TOKEN } from '../../src/devnet/tokens.ts';

describe('devnet test token config (C40)', () => {
  test('each devnet network lists only its test token; other networks keep the shipped tokens', () => {
    const shipped = loadConfig({ env: {} });
    const draft = structuredClone<Config>(shipped);
    const token = '0x95bD8D42f30351685e96C62EDdc0d0613bf9a87A';
    applyDevnetTokens(draft, { ethereum: token, 'native-mainnet': token });
    const config = validateConfig(draft);
    const tokensOf = (slug: string) => config.networks.find((n) => n.slug === slug)?.tokens;
    const expected = [{ symbol: DEVNET_TOKEN.symbol, address: token, decimals: DEVNET_TOKEN.decimals, price: { type: 'fixed', usd: DEVNET_TOKEN.usd } }];
    assert.deepEqual(tokensOf('ethereum'), expected);
    assert.deepEqual(tokensOf('native-mainnet'), expected);
    assert.deepEqual(tokensOf('arbitrum'), shipped.networks.find((n) => n.slug === 'arbitrum')?.tokens);
    assert.ok((tokensOf('arbitrum')?.length ?? 0) > 0);
  });
});

describe('shipped tokens (C40)', () => {
  test('USDC on every EVM mainnet but the native one, USDT where Tether issues it; EIP-55 addresses, one entry per symbol, 1 USD', () => {
    const config = loadConfig({ env: {} });
    for (const n of config.networks) {
      const tokens = n.tokens ?? [];
      if (n.type === 'testnet' || n.native) {
        assert.deepEqual(tokens, [], `${n.slug}: no shipped tokens`);
        continue;
      }
      const symbols = tokens.map((t) => t.symbol);
      assert.ok(symbols.includes('USDC'), `${n.slug} lists USDC`);
      assert.equal(new Set(symbols).size, symbols.length, `${n.slug}: one entry per symbol`);
      for (const t of tokens) {
        assert.equal(getAddress(t.address.toLowerCase()), t.address, `${n.slug} ${t.symbol}: checksummed`);
        assert.deepEqual(t.price, { type: 'fixed', usd: 1 });
        // BNB Chain's USDC and USDT have 18 decimals; elsewhere they have 6.
        assert.equal(t.decimals, n.slug === 'bsc' ? 18 : 6, `${n.slug} ${t.symbol} decimals`);
      }
      assert.equal(symbols.includes('USDT'), n.slug !== 'base', `${n.slug} USDT`);
    }
  });

  test("each shipped token is the issuer's own contract on that chain (Circle's native USDC, Tether's USDT)", () => {
    // From the issuers' published lists; a wrong address would read some other contract's balances.
    const issued: Record<string, Record<string, string>> = {
      ethereum: { USDC: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', USDT: '0xdAC17F958D2ee523a2206206994597C13D831ec7' },
      polygon: { USDC: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', USDT: '0xc2132D05D31c914a87C6611C10748AEb04B58e8F' },
      bsc: { USDC: '0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d', USDT: '0x55d398326f99059fF775485246999027B3197955' },
      arbitrum: { USDC: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831', USDT: '0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9' },
      optimism: { USDC: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85', USDT: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58' },
      base: { USDC: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
      avalanche: { USDC: '0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E', USDT: '0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7' },
    };
    const shipped = Object.fromEntries(
      loadConfig({ env: {} })
        .networks.filter((n) => (n.tokens ?? []).length > 0)
        .map((n) => [n.slug, Object.fromEntries((n.tokens ?? []).map((t) => [t.symbol, t.address]))]),
    );
    assert.deepEqual(shipped, issued);
  });
});
