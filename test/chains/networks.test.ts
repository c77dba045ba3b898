import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';

const shipped = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8'));

// The spec's network table (section 8): chain ids and types.
const SPEC_CHAINS: Array<[number, 'mainnet' | 'testnet']> = [
  [50, 'mainnet'], [51, 'testnet'], [1, 'mainnet'], [11155111, 'testnet'], [137, 'mainnet'], [80002, 'testnet'],
  [56, 'mainnet'], [97, 'testnet'], [42161, 'mainnet'], [421614, 'testnet'], [10, 'mainnet'], [11155420, 'testnet'],
  [8453, 'mainnet'], [84532, 'testnet'], [43114, 'mainnet'], [43113, 'testnet'],
];

describe('networks (spec 2 Network, 4.2; C2, C6)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { PUBLIC_URL: 'https://rpc.example.test/' } });
  });
  after(() => t.close());

  test('GET /networks lists all 16 networks of the spec, public, without explorerUrl and supportedMethods', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/networks' });
    assert.equal(res.statusCode, 200);
    const nets = res.json().data as Array<Record<string, unknown>>;
    assert.equal(nets.length, 16);
    assert.deepEqual(
      nets.map((n) => [n.chainId, n.type]).sort((a, b) => Number(a[0]) - Number(b[0])),
      [...SPEC_CHAINS].sort((a, b) => a[0] - b[0]),
    );
    for (const n of nets) {
      assert.deepEqual(Object.keys(n).sort(), ['chainId', 'currency', 'id', 'name', 'rpcUrl', 'slug', 'type', 'wsUrl']);
      assert.match(String(n.slug), /^[a-z0-9-]+$/);
      assert.equal(n.rpcUrl, `https://rpc.example.test/v1/${String(n.slug)}`, 'C2: {PUBLIC_URL}/v1/{slug}');
      assert.equal(n.wsUrl, `wss://rpc.example.test/ws/${String(n.slug)}`, 'C1: the WebSocket address on the same host, wss for https');
      const c = n.currency as Record<string, unknown>;
      assert.equal(typeof c.name, 'string');
      assert.equal(typeof c.symbol, 'string');
      assert.equal(c.decimals, 18);
    }
    assert.ok(nets.some((n) => n.slug === 'native-mainnet' && n.chainId === 50));
    assert.ok(nets.some((n) => n.slug === 'native-testnet' && n.chainId === 51));
  });

  test('GET /networks/:slug adds explorerUrl and supportedMethods; nat_* only on the native networks', async () => {
    for (const n of shipped.networks) {
      const res = await t.app.inject({ method: 'GET', url: `/api/v1/networks/${n.slug}` });
      assert.equal(res.statusCode, 200, n.slug);
      const d = res.json().data;
      assert.equal(d.explorerUrl, n.explorerUrl);
      assert.ok(d.supportedMethods.includes('eth_blockNumber'));
      assert.ok(d.supportedMethods.includes('eth_sendRawTransaction'));
      const nat = d.supportedMethods.filter((m: string) => m.startsWith('nat_'));
      if (n.slug.startsWith('native-')) {
        assert.deepEqual(nat.sort(), [
          'nat_getBlockByNumber',
          'nat_getCandidates',
          'nat_getMasternodes',
          'nat_getValidatorReward',
          'nat_getVoterReward',
        ]);
      } else assert.deepEqual(nat, [], n.slug);
      for (const m of d.supportedMethods) assert.doesNotMatch(m, /^(eth_sign|eth_accounts|personal_|admin_|anvil_|debug_)/);
    }
  });

  test('an unknown slug is 404 NOT_FOUND', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/networks/atlantis' });
    assert.equal(res.statusCode, 404);
    assert.equal(res.json().error.code, 'NOT_FOUND');
  });

  test('without PUBLIC_URL, rpcUrl uses http://localhost:$PORT', async () => {
    const d = await startTestApp({ env: { PORT: '9911' } });
    try {
      const res = await d.app.inject({ method: 'GET', url: '/api/v1/networks/ethereum' });
      assert.equal(res.json().data.rpcUrl, 'http://localhost:9911/v1/ethereum');
    } finally {
      await d.close();
    }
  });
});
