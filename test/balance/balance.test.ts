// C40: the unified balance on real local chains: real transfers of coins and of a real ERC-20,
// checked against eth_getBalance and balanceOf at the answered block. Fake nodes only where a
// real one cannot misbehave on demand (a stalled network) or be counted (the 5 s cache).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  formatUnits,
  getAddress,
  getContractAddress,
  http,
  parseEther,
  parseUnits,
  type PublicClient,
} from 'viem';
import { generatePrivateKey, mnemonicToAccount, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { loadConfig } from '../../src/config/load.ts';
import type { NetworkConfig } from '../../src/config/schema.ts';
import { loadArtifact } from '../../src/onchain/artifacts.ts';
import { DEVNET_TOKEN, deployTestTokens, testTokenConfig } from '../../src/devnet/tokens.ts';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, type FakeNodeOptions, startFakeNode } from '../support/fake-node.ts';

const DEVNET = ['native-mainnet', 'ethereum', 'arbitrum', 'ethereum-sepolia'];
/** Mirrors the ethereum-sepolia chain through a counting fake node (the cache test). */
const MIRROR = 'arbitrum-sepolia';
/** Its only upstream stalls. */
const STALLED = 'base-sepolia';
/** A token configured on MIRROR at an address without a contract. */
const GONE = { symbol: 'GONE', address: '0x000000000000000000000000000000000000dEaD' as Address, decimals: 18 };

// The token this suite deploys when the devnet did not already: from dev account 8's first
// transaction on each chain, so its address is known before the app (and its config) exists.
const DEPLOYER = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 8 }).address;
const PREDICTED_TOKEN = getContractAddress({ from: DEPLOYER, nonce: 0n });

const TOKEN_ABI = loadArtifact('TestToken').abi;

type Json = Record<string, unknown>;
interface ChainEntry {
  network: string;
  chainId: number;
  balance: string;
  balanceRaw: string;
  usd: number | null;
  blockNumber: number;
}
interface Asset {
  symbol: string;
  testnet: boolean;
  balance: string;
  usd: number | null;
  chains: ChainEntry[];
}
interface Answer {
  address: string;
  totalUsd: number;
  updatedAt: string;
  assets: Asset[];
  errors: Array<{ network: string; code: string; message: string }>;
}

const freshAddress = (): Address => privateKeyToAddress(generatePrivateKey());

describe('GET /chain-abstraction/balance/:address on the devnet (C40)', () => {
  let t: TestApp;
  let auth: { authorization: string };
  let stalled: FakeNode;
  let mirror: FakeNode;
  const mirrorOptions: FakeNodeOptions = {};
  const clients = new Map<string, { chain: Chain; public: PublicClient; url: string }>();
  let token: Address;

  before(async () => {
    stalled = await startFakeNode({ mode: 'stall' });
    mirror = await startFakeNode(mirrorOptions);
    const defaults = loadConfig({ env: {} }).networks;
    const pick = (slug: string): NetworkConfig => structuredClone(defaults.find((n) => n.slug === slug) as NetworkConfig);
    const networks = [
      ...DEVNET.map((slug) => ({ ...pick(slug), tokens: [testTokenConfig(PREDICTED_TOKEN)] })),
      { ...pick(MIRROR), upstreams: [{ http: mirror.url }], tokens: [GONE] },
      { ...pick(STALLED), upstreams: [{ http: stalled.url }], tokens: [] },
    ];
    t = await startTestApp({ devnet: true, devnetNetworks: DEVNET, listen: true, overrides: { networks } });
    auth = (await registerUser(t.app)).auth;
    const sepolia = t.devnet?.upstreams['ethereum-sepolia']?.http as string;
    // The mirror answers as the sepolia chain does, each call counted on its way.
    mirrorOptions.forwardTo = sepolia;

    for (const slug of DEVNET) {
      const net = t.config.networks.find((n) => n.slug === slug) as NetworkConfig;
      const url = t.devnet?.upstreams[slug]?.http as string;
      const chain = defineChain({ id: net.chainId, name: slug, nativeCurrency: net.currency, rpcUrls: { default: { http: [url] } } });
      clients.set(slug, { chain, url, public: createPublicClient({ chain, transport: http(url) }) });
    }
    // The devnet may deploy its own test token and configure it; else this suite's is deployed here.
    const configured = t.config.networks.find((n) => n.slug === 'ethereum')?.tokens?.find((x) => x.symbol === DEVNET_TOKEN.symbol);
    token = configured?.address as Address;
    const code = await clients.get('ethereum')?.public.getCode({ address: token });
    if (!code || code === '0x') {
      const urls = Object.fromEntries(DEVNET.map((slug) => [slug, t.devnet?.upstreams[slug]?.http as string]));
      const deployed = await deployTestTokens({ urls, from: DEPLOYER, recipients: [t.devnet?.accounts[0]?.address as Address] });
      for (const slug of DEVNET) assert.equal(deployed[slug], PREDICTED_TOKEN, `token address on ${slug}`);
    }
    for (const slug of DEVNET) {
      const entry = t.config.networks.find((n) => n.slug === slug)?.tokens?.find((x) => x.symbol === DEVNET_TOKEN.symbol);
      assert.equal(entry?.address, token, `${slug} reads the deployed token`);
    }
  });
  after(async () => {
    await t?.close();
    await stalled?.close();
    await mirror?.close();
  });

  const get = (path: string, headers: Json = auth) => t.app.inject({ method: 'GET', url: `/api/v1/chain-abstraction/balance/${path}`, headers: headers as Record<string, string> });
  const answer = async (path: string): Promise<Answer> => {
    const res = await get(path);
    assert.equal(res.statusCode, 200, res.body);
    return res.json().data as Answer;
  };

  const sender = () => privateKeyToAccount(t.devnet?.accounts[0]?.privateKey as `0x${string}`);
  /** Sends coins (or the test token) from dev account 0 and waits for the block; returns its number. */
  async function send(slug: string, to: Address, amount: string, what: 'coin' | 'token' = 'coin'): Promise<bigint> {
    const c = clients.get(slug);
    assert.ok(c);
    const wallet = createWalletClient({ account: sender(), chain: c.chain, transport: http(c.url) });
    const hash =
      what === 'coin'
        ? await wallet.sendTransaction({ to, value: parseEther(amount) })
        : await wallet.writeContract({ address: token, abi: TOKEN_ABI, functionName: 'transfer', args: [to, parseUnits(amount, DEVNET_TOKEN.decimals)] });
    const receipt = await c.public.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 20_000 });
    assert.equal(receipt.status, 'success');
    return receipt.blockNumber;
  }
  const priceOf = (slug: string): number => {
    const p = t.config.networks.find((n) => n.slug === slug)?.price;
    if (p?.type === 'fixed') return p.usd;
    if (p?.type === 'chainlink') return t.config.devnet.nativeUsdPrice; // the devnet's feed answers it
    throw new Error(`no devnet price for ${slug}`);
  };
  const dollars = (amount: string, usd: number) => Math.round(Number(amount) * usd * 100) / 100;

  test('a Bearer token is required', async () => {
    const address = freshAddress();
    assert.equal((await get(address, {})).statusCode, 401);
    const res = await get(address, { authorization: 'Bearer nope' });
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'UNAUTHORIZED');
  });

  test('every mainnet: exact coins and tokens at the answered block, grouped by symbol, in USD', async () => {
    const owner = freshAddress();
    const sent: Record<string, bigint> = {};
    sent.ethereum = await send('ethereum', owner, '1.5');
    sent.arbitrum = await send('arbitrum', owner, '0.25');
    sent['native-mainnet'] = await send('native-mainnet', owner, '123.456789');
    sent.ethereum = await send('ethereum', owner, '10.5', 'token');
    sent.arbitrum = await send('arbitrum', owner, '2.000001', 'token');
    await send('ethereum-sepolia', owner, '7'); // a testnet: not in the default answer

    const data = await answer(owner.toLowerCase());
    assert.equal(data.address, getAddress(owner));
    assert.deepEqual(data.errors, []);
    assert.ok(Math.abs(Date.parse(data.updatedAt) - Date.now()) < 60_000);

    const bySymbol = new Map(data.assets.map((a) => [a.symbol, a]));
    assert.deepEqual([...bySymbol.keys()].sort(), ['ETH', 'JUSD', 'NAT']);
    const eth = bySymbol.get('ETH') as Asset;
    assert.equal(eth.testnet, false);
    assert.deepEqual(eth.chains.map((c) => c.network), ['ethereum', 'arbitrum'], 'mainnets only, in config order');
    assert.equal(eth.balance, '1.75');
    assert.deepEqual(eth.chains.map((c) => c.balanceRaw), [parseEther('1.5').toString(), parseEther('0.25').toString()]);
    assert.deepEqual(eth.chains.map((c) => c.balance), ['1.5', '0.25']);
    assert.equal(eth.usd, dollars('1.75', priceOf('ethereum')));

    const nat = bySymbol.get('NAT') as Asset;
    assert.deepEqual(nat.chains.map((c) => [c.network, c.balance]), [['native-mainnet', '123.456789']]);
    assert.equal(nat.usd, dollars('123.456789', priceOf('native-mainnet')));

    const jusd = bySymbol.get('JUSD') as Asset;
    // Held on ethereum and arbitrum; none on native-mainnet, which is therefore not listed.
    assert.deepEqual(jusd.chains.map((c) => [c.network, c.balance, c.balanceRaw]), [
      ['ethereum', '10.5', '10500000'],
      ['arbitrum', '2.000001', '2000001'],
    ]);
    assert.equal(jusd.balance, '12.500001');
    assert.equal(jusd.usd, dollars('12.500001', DEVNET_TOKEN.usd));
    assert.equal(data.totalUsd, Math.round(((eth.usd) + (nat.usd) + (jusd.usd)) * 100) / 100);
    // Largest value first.
    const values = data.assets.map((a) => a.usd as number);
    assert.deepEqual(values, [...values].sort((a, b) => b - a));

    // Every amount is what the chain itself says at the answered block, which holds the transfers.
    for (const asset of data.assets) {
      for (const c of asset.chains) {
        const client = clients.get(c.network)?.public as PublicClient;
        assert.equal(c.chainId, t.config.networks.find((n) => n.slug === c.network)?.chainId);
        assert.ok(BigInt(c.blockNumber) >= (sent[c.network] as bigint), `${c.network}: block ${c.blockNumber} holds the transfers`);
        // cacheTime 0: viem reuses a block number for 4 s by default, older than the answer on a chain that mines each second.
        assert.ok(BigInt(c.blockNumber) <= (await client.getBlockNumber({ cacheTime: 0 })), `${c.network}: block ${c.blockNumber} exists`);
        const onChain =
          asset.symbol === DEVNET_TOKEN.symbol
            ? ((await client.readContract({ address: token, abi: TOKEN_ABI, functionName: 'balanceOf', args: [owner], blockNumber: BigInt(c.blockNumber) })) as bigint)
            : await client.getBalance({ address: owner, blockNumber: BigInt(c.blockNumber) });
        assert.equal(c.balanceRaw, onChain.toString(), `${asset.symbol} on ${c.network}`);
        assert.equal(c.balance, formatUnits(onChain, asset.symbol === DEVNET_TOKEN.symbol ? DEVNET_TOKEN.decimals : 18));
      }
    }
    // One network's amounts share one block.
    const ethereumBlocks = new Set(data.assets.flatMap((a) => a.chains.filter((c) => c.network === 'ethereum').map((c) => c.blockNumber)));
    assert.equal(ethereumBlocks.size, 1);
  });

  test('an address holding nothing: each native coin listed at zero, no token', async () => {
    const data = await answer(freshAddress());
    assert.deepEqual(data.errors, []);
    assert.deepEqual(
      data.assets.map((a) => [a.symbol, a.balance, a.usd, a.chains.map((c) => [c.network, c.balanceRaw, c.usd])]),
      [
        ['ETH', '0', 0, [['ethereum', '0', 0], ['arbitrum', '0', 0]]],
        ['NAT', '0', 0, [['native-mainnet', '0', 0]]],
      ],
    );
    assert.equal(data.totalUsd, 0);
  });

  test('an xdc address is read as its 0x form and answered in EIP-55', async () => {
    const owner = freshAddress();
    await send('native-mainnet', owner, '42');
    await send('ethereum', owner, '0.000000000000000001');
    const data = await answer(`xdc${owner.slice(2).toLowerCase()}`);
    assert.equal(data.address, getAddress(owner));
    const byNetwork = new Map(data.assets.flatMap((a) => a.chains.map((c) => [c.network, c.balanceRaw])));
    assert.equal(byNetwork.get('native-mainnet'), parseEther('42').toString());
    assert.equal(byNetwork.get('ethereum'), '1');
  });

  test('?networks= reads those networks only, mainnets and testnets apart, in config order', async () => {
    const owner = freshAddress();
    await send('arbitrum', owner, '3');
    await send('ethereum-sepolia', owner, '5');
    const data = await answer(`${owner}?networks=ethereum-sepolia,arbitrum,native-mainnet,arbitrum`);
    assert.deepEqual(data.errors, []);
    const shape = data.assets.map((a) => [a.symbol, a.testnet, a.balance, a.chains.map((c) => c.network)]);
    assert.deepEqual(shape, [
      ['ETH', false, '3', ['arbitrum']],
      // NAT is worth 0 here (0 coins) and sorts before the testnet coin of the same value.
      ['NAT', false, '0', ['native-mainnet']],
      ['ETH', true, '5', ['ethereum-sepolia']],
    ]);
    // C34: testnet coins are worth 0 USD unless configured.
    assert.equal(data.assets[2]?.usd, 0);
    assert.equal(data.totalUsd, dollars('3', priceOf('arbitrum')));
  });

  test('bad input is 400 and reads nothing: address, unknown network, both filters', async () => {
    const before = mirror.callCount('eth_getBalance');
    const owner = freshAddress();
    // EIP-55's own example with one letter's case changed: mixed case that is not the checksum.
    const badChecksum = '0x52908400098527886e0F7030069857D2E4169EE7';
    assert.notEqual(getAddress(badChecksum.toLowerCase()), badChecksum);
    const cases: Array<[string, string]> = [
      ['0x1234', 'params.address'],
      [badChecksum, 'params.address'],
      [`0x${'g'.repeat(40)}`, 'params.address'],
      [`abc${owner.slice(2)}`, 'params.address'],
      [`${owner}?networks=ethereum,atlantis`, 'querystring.networks'],
      [`${owner}?networks=${MIRROR}&testnets=true`, 'querystring.testnets'],
      [`${owner}?networks=,`, 'querystring.networks'],
      [`${owner}?testnets=maybe`, 'querystring.testnets'],
    ];
    for (const [path, field] of cases) {
      const res = await get(path);
      assert.equal(res.statusCode, 400, path);
      assert.equal(res.json().error.code, 'VALIDATION_ERROR', path);
      assert.ok(JSON.stringify(res.json().error.details ?? res.json().error.message).includes(field.split('.')[1] as string), `${path}: ${res.body}`);
    }
    assert.equal(mirror.callCount('eth_getBalance'), before, 'nothing read');
  });

  test('?testnets=true, read in parallel: a stalled network is listed in errors after the 3 s budget, the others answer 200', async (ctx) => {
    const owner = freshAddress();
    await send('ethereum-sepolia', owner, '0.5');
    // The mirror answers after 2 s: read one after another, the networks would take 5 s and more.
    mirror.setDelay(2_000);
    const started = Date.now();
    const data = await answer(`${owner}?testnets=true`).finally(() => mirror.setDelay(0));
    const elapsed = Date.now() - started;
    ctx.diagnostic(`answered in ${elapsed} ms with a stalled network`);
    assert.ok(elapsed >= 2_900, `waited for the stalled network (${elapsed} ms)`);
    // Well before the pool's own timeouts (10 s per attempt, 15 s in all): the budget cut it short.
    assert.ok(elapsed < 12_000, `the budget, not the pool, ended it (${elapsed} ms)`);
    assert.ok(elapsed < 4_500, `the networks were read in parallel (${elapsed} ms)`);
    const stall = data.errors.find((e) => e.network === STALLED);
    assert.deepEqual(stall && { network: stall.network, code: stall.code }, { network: STALLED, code: 'TIMEOUT' });
    assert.ok(stalled.log.some((c) => c.method === 'eth_getBalance'), 'the stalled node was asked');
    // A token without a contract is reported; its network answers all the same.
    const gone = data.errors.find((e) => e.network === MIRROR);
    assert.equal(gone?.code, 'TOKEN_ERROR');
    assert.match(gone?.message ?? '', /GONE/);
    assert.equal(data.errors.length, 2);
    // ethereum-sepolia, and the mirror of the same chain: one testnet asset of both.
    const eth = data.assets.find((a) => a.symbol === 'ETH');
    assert.deepEqual(eth?.chains.map((c) => [c.network, c.balance, c.usd]), [
      ['ethereum-sepolia', '0.5', 0],
      [MIRROR, '0.5', 0],
    ]);
    assert.equal(eth?.testnet, true);
    assert.equal(eth?.balance, '1');
    assert.ok(!data.assets.some((a) => a.chains.some((c) => DEVNET.slice(0, 3).includes(c.network))), 'no mainnet');
  });

  test('when every network fails the answer is 502 in the error envelope, naming each', async () => {
    const res = await get(`${freshAddress()}?networks=${STALLED}`);
    assert.equal(res.statusCode, 502);
    const body = res.json();
    assert.equal(body.success, false);
    assert.equal(body.error.code, 'UPSTREAM_ERROR');
    assert.deepEqual(
      body.error.details.errors.map((e: Json) => e.network),
      [STALLED],
    );
    assert.ok(!res.body.includes(stalled.url) && !res.body.includes('127.0.0.1'), 'no upstream address');
  });

  test('a read is reused for 5 s per (address, network): no second upstream call, then a fresh one', async () => {
    const owner = freshAddress();
    await send('ethereum-sepolia', owner, '1');
    const calls = () => mirror.callCount('eth_getBalance');
    const start = calls();
    const first = await answer(`${owner}?networks=${MIRROR}`);
    assert.equal(calls(), start + 1, 'one read');
    // One batch: both block numbers, the balance and the token's balanceOf.
    const batch = JSON.parse(mirror.bodies.at(-1) as string) as Array<{ method: string }>;
    assert.deepEqual(batch.map((b) => b.method), ['eth_blockNumber', 'eth_getBalance', 'eth_call', 'eth_blockNumber']);

    await send('ethereum-sepolia', owner, '2'); // the chain changes; the cached read does not
    const second = await answer(`${owner}?networks=${MIRROR}`);
    assert.equal(calls(), start + 1, 'served from the cache');
    assert.deepEqual(second.assets, first.assets);
    assert.equal(second.updatedAt, first.updatedAt);

    // Another address is another read.
    await answer(`${freshAddress()}?networks=${MIRROR}`);
    assert.equal(calls(), start + 2);

    // Past 5 s the next request reads again and sees the new balance.
    const fresh = await (async () => {
      for (;;) {
        const d = await answer(`${owner}?networks=${MIRROR}`);
        if (calls() > start + 2) return d;
        assert.ok(Date.now() - Date.parse(first.updatedAt) < 15_000, 'the cache expires');
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    assert.ok(Date.parse(fresh.updatedAt) - Date.parse(first.updatedAt) >= 5_000);
    assert.equal(fresh.assets[0]?.balance, '3');
  });

  test('the route is in the OpenAPI document with its operationId, tag and bearer security', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const op = doc.paths['/api/v1/chain-abstraction/balance/{address}']?.get;
    assert.equal(op?.operationId, 'getUnifiedBalance');
    assert.deepEqual(op?.tags, ['chain-abstraction']);
    assert.deepEqual(op?.security, [{ bearerAuth: [] }]);
  });
});
