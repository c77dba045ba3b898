// Real clients (viem, ethers v6), used as any dapp would use them, through the gateway in front of
// the devnet: the gateway must be indistinguishable from a node (C1, C22, C31).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Contract, ContractFactory, FetchRequest, JsonRpcProvider, Wallet, isError } from 'ethers';
import {
  BaseError,
  type Chain,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  getAbiItem,
  getAddress,
  http,
  parseAbi,
  parseEther,
  type PublicClient,
  type Transport,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { NetworkConfig } from '../../src/config/schema.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { TINY_ABI, TINY_BYTECODE, TINY_INITIAL_VALUE, TINY_REVERTING_CALLDATA, TINY_RUNTIME } from '../support/tiny-contract.ts';

const ADMIN_TOKEN = 'clients-test-admin-token-0123456789';
// Non-native chains mine one block per transaction; the native ones mine every second (C31).
const VIEM_NETWORK = 'ethereum-sepolia';
const ETHERS_NETWORK = 'base-sepolia';
const NATIVE_NETWORK = 'native-mainnet';

let t: TestApp;
let apiKey: string;

before(async () => {
  t = await startTestApp({ devnet: true, listen: true, env: { ADMIN_TOKEN } });
  const user = await registerUser(t.app);
  // Free keys reach the two native networks only (C16); pro reaches all 16.
  await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
  apiKey = (await createKey(t.app, { name: 'real clients' }, user)).key;
});

after(async () => {
  await t?.close();
});

type Form = 'path' | 'header';

function network(slug: string): NetworkConfig {
  const n = t.config.networks.find((x) => x.slug === slug);
  if (!n) throw new Error(`no network ${slug}`);
  return n;
}

/** The gateway address of a network: `/v1/{slug}/{apiKey}`, or `/rpc/main/evm/{chainId}` with X-API-Key. */
function gatewayUrl(n: NetworkConfig, form: Form): string {
  return form === 'path' ? `${t.url}/v1/${n.slug}/${apiKey}` : `${t.url}/rpc/main/evm/${n.chainId}`;
}

function viemTransport(n: NetworkConfig, form: Form): Transport {
  return form === 'path'
    ? http(gatewayUrl(n, form))
    : http(gatewayUrl(n, form), { fetchOptions: { headers: { 'X-API-Key': apiKey } } });
}

function viemChain(n: NetworkConfig, form: Form): Chain {
  return defineChain({
    id: n.chainId,
    name: n.name,
    nativeCurrency: n.currency,
    rpcUrls: { default: { http: [gatewayUrl(n, form)] } },
  });
}

/**
 * ethers pointed at the gateway; `chainId` fixes the network ethers expects (it still checks it).
 * `cacheTimeout: -1` turns off ethers' own 250 ms reuse of identical calls, which would hand two
 * transactions sent within 250 ms the same `pending` nonce, whatever the node says.
 */
function ethersProvider(n: NetworkConfig, form: Form, chainId?: number): JsonRpcProvider {
  const req = new FetchRequest(gatewayUrl(n, form));
  if (form === 'header') req.setHeader('X-API-Key', apiKey);
  return chainId === undefined ? new JsonRpcProvider(req) : new JsonRpcProvider(req, chainId, { cacheTimeout: -1 });
}

/** A viem client straight to the network's anvil, to compare the gateway's answers with. */
function direct(slug: string): PublicClient {
  const u = t.devnet?.upstreams[slug];
  if (!u) throw new Error(`no devnet chain for ${slug}`);
  return createPublicClient({ transport: http(u.http) });
}

function devAccount(index: number): { address: `0x${string}`; privateKey: `0x${string}` } {
  const a = t.devnet?.accounts[index];
  if (!a) throw new Error(`no dev account ${index}`);
  return a;
}

describe('devnet dev accounts', () => {
  test(
    'every account in devnet.accounts is one anvil funded, so tests can sign with any of them',
    async () => {
      const node = direct(VIEM_NETWORK);
      const funded: string[] = await node.request({ method: 'eth_accounts' as never });
      for (const [i, a] of (t.devnet?.accounts ?? []).entries()) {
        assert.equal(a.address.toLowerCase(), funded[i]?.toLowerCase(), `account ${i}`);
        assert.ok((await node.getBalance({ address: a.address })) > 0n, `account ${i} ${a.address} has no balance`);
      }
    },
  );
});

describe('eth_chainId through real clients', () => {
  test('viem and ethers get the right chain id on all 16 networks, at both addresses', async () => {
    assert.equal(t.config.networks.length, 16);
    await Promise.all(
      t.config.networks.flatMap((n) =>
        (['path', 'header'] as const).map(async (form) => {
          const viemClient = createPublicClient({ transport: viemTransport(n, form) });
          assert.equal(await viemClient.getChainId(), n.chainId, `viem ${n.slug} ${form}`);
          // No network given: ethers detects it with eth_chainId through the gateway.
          const provider = ethersProvider(n, form);
          try {
            assert.equal((await provider.getNetwork()).chainId, BigInt(n.chainId), `ethers ${n.slug} ${form}`);
            assert.equal(await provider.send('eth_chainId', []), `0x${n.chainId.toString(16)}`);
          } finally {
            provider.destroy();
          }
        }),
      ),
    );
  });
});

describe(`viem on ${VIEM_NETWORK} through /v1/{network}/{apiKey}`, () => {
  const state: { contract?: `0x${string}`; storeBlock?: bigint } = {};
  const clients = () => {
    const n = network(VIEM_NETWORK);
    const chain = viemChain(n, 'path');
    const account = privateKeyToAccount(devAccount(1).privateKey);
    return {
      n,
      account,
      pub: createPublicClient({ chain, transport: viemTransport(n, 'path') }),
      wallet: createWalletClient({ account, chain, transport: viemTransport(n, 'path') }),
      node: direct(VIEM_NETWORK),
    };
  };

  test('reads chain id, head, blocks by number and by hash, balance, nonce and gas price as the node has them', async () => {
    const { n, account, pub, node } = clients();
    assert.equal(await pub.getChainId(), n.chainId);
    const head = await pub.getBlockNumber({ cacheTime: 0 });
    assert.equal(head, await node.getBlockNumber({ cacheTime: 0 }));
    const byNumber = await pub.getBlock({ blockNumber: head });
    assert.equal(byNumber.number, head);
    assert.equal(byNumber.hash, (await node.getBlock({ blockNumber: head })).hash);
    const byHash = await pub.getBlock({ blockHash: byNumber.hash });
    assert.deepEqual(byHash, byNumber);
    const balance = await pub.getBalance({ address: account.address, blockNumber: head });
    assert.ok(balance > parseEther('1000'));
    assert.equal(balance, await node.getBalance({ address: account.address, blockNumber: head }));
    assert.equal(
      await pub.getTransactionCount({ address: account.address }),
      await node.getTransactionCount({ address: account.address }),
    );
    const gasPrice = await pub.getGasPrice();
    assert.ok(gasPrice > 0n);
    assert.equal(gasPrice, await node.getGasPrice());
  });

  test('deploys a contract with a locally signed transaction and reads its code back', async () => {
    const { account, pub, wallet } = clients();
    const nonceBefore = await pub.getTransactionCount({ address: account.address });
    const hash = await wallet.deployContract({ abi: TINY_ABI, bytecode: TINY_BYTECODE });
    const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.equal(receipt.status, 'success');
    assert.ok(receipt.contractAddress);
    state.contract = receipt.contractAddress;
    assert.equal(await pub.getCode({ address: receipt.contractAddress }), TINY_RUNTIME);
    const tx = await pub.getTransaction({ hash });
    assert.equal(getAddress(tx.from), account.address);
    assert.equal(await pub.getTransactionCount({ address: account.address }), nonceBefore + 1);
  });

  test('eth_call and eth_estimateGas against the contract', async () => {
    const { account, pub } = clients();
    assert.ok(state.contract, 'the contract was deployed');
    assert.equal(await pub.readContract({ address: state.contract, abi: TINY_ABI, functionName: 'value' }), TINY_INITIAL_VALUE);
    const gas = await pub.estimateContractGas({
      address: state.contract,
      abi: TINY_ABI,
      functionName: 'store',
      args: [7n],
      account: account.address,
    });
    assert.ok(gas > 21_000n && gas < 100_000n, `estimated ${gas}`);
  });

  test('a transaction signed here and sent with eth_sendRawTransaction lands, and its event is found with eth_getLogs', async () => {
    const { account, pub, wallet } = clients();
    assert.ok(state.contract, 'the contract was deployed');
    const request = await wallet.prepareTransactionRequest({
      to: state.contract,
      data: encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [7n] }),
    });
    const serializedTransaction = await wallet.signTransaction(request);
    const hash = await pub.sendRawTransaction({ serializedTransaction });
    const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.equal(receipt.status, 'success');
    assert.equal(receipt.logs.length, 1);
    state.storeBlock = receipt.blockNumber;

    assert.equal(await pub.readContract({ address: state.contract, abi: TINY_ABI, functionName: 'value' }), 7n);
    const logs = await pub.getContractEvents({
      address: state.contract,
      abi: TINY_ABI,
      eventName: 'Stored',
      fromBlock: receipt.blockNumber,
      toBlock: receipt.blockNumber,
    });
    assert.equal(logs.length, 1);
    assert.deepEqual(logs[0]?.args, { by: account.address, value: 7n });
    assert.equal(logs[0]?.transactionHash, hash);
    // Filtered by the indexed sender too, with a plain eth_getLogs.
    const filtered = await pub.getLogs({
      address: state.contract,
      event: getAbiItem({ abi: TINY_ABI, name: 'Stored' }),
      args: { by: account.address },
      fromBlock: 0n,
    });
    assert.equal(filtered.length, 1);
  });

  test('a contract revert reaches viem as the contract error', async () => {
    const { pub } = clients();
    assert.ok(state.contract, 'the contract was deployed');
    const err = await pub
      .readContract({ address: state.contract, abi: parseAbi(['function missing()', 'error Nope()']), functionName: 'missing' })
      .then(
        () => assert.fail('the call should revert'),
        (e: unknown) => e,
      );
    assert.ok(err instanceof BaseError);
    const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
    assert.ok(reverted instanceof ContractFunctionRevertedError, String(err));
    assert.equal(reverted.data?.errorName, 'Nope');
  });
});

describe(`viem on ${NATIVE_NETWORK} through /rpc/main/evm/50 with X-API-Key`, () => {
  test('a value transfer signed here lands and its receipt reads back', async () => {
    const n = network(NATIVE_NETWORK);
    const chain = viemChain(n, 'header');
    const account = privateKeyToAccount(devAccount(2).privateKey);
    const pub = createPublicClient({ chain, transport: viemTransport(n, 'header') });
    const wallet = createWalletClient({ account, chain, transport: viemTransport(n, 'header') });
    const to = devAccount(7).address;
    const before = await pub.getBalance({ address: to });
    const hash = await wallet.sendTransaction({ to, value: parseEther('1.5') });
    const receipt = await pub.waitForTransactionReceipt({ hash, pollingInterval: 200, timeout: 15_000 });
    assert.equal(receipt.status, 'success');
    assert.equal(getAddress(receipt.from), account.address);
    assert.equal(await pub.getBalance({ address: to, blockNumber: receipt.blockNumber }), before + parseEther('1.5'));
    assert.equal((await direct(NATIVE_NETWORK).getTransactionReceipt({ hash })).blockHash, receipt.blockHash);
  });
});

describe(`ethers v6 on ${ETHERS_NETWORK} through /rpc/main/evm/{chainId} with X-API-Key`, () => {
  let provider: JsonRpcProvider;
  let wallet: Wallet;
  let contract: Contract | undefined;

  before(() => {
    const n = network(ETHERS_NETWORK);
    provider = ethersProvider(n, 'header', n.chainId);
    wallet = new Wallet(devAccount(3).privateKey, provider);
  });
  after(() => provider?.destroy());

  test('reads head, blocks by number and by hash, balance, nonce and fee data as the node has them', async () => {
    const node = direct(ETHERS_NETWORK);
    const head = await provider.getBlockNumber();
    assert.equal(BigInt(head), await node.getBlockNumber({ cacheTime: 0 }));
    const byNumber = await provider.getBlock(head);
    assert.ok(byNumber?.hash);
    assert.equal(byNumber.hash, (await node.getBlock({ blockNumber: BigInt(head) })).hash);
    const byHash = await provider.getBlock(byNumber.hash);
    assert.equal(byHash?.number, head);
    assert.equal(
      await provider.getBalance(wallet.address, head),
      await node.getBalance({ address: wallet.address as `0x${string}`, blockNumber: BigInt(head) }),
    );
    assert.equal(await provider.getTransactionCount(wallet.address), await node.getTransactionCount({ address: wallet.address as `0x${string}` }));
    const fees = await provider.getFeeData();
    assert.ok(fees.gasPrice !== null && fees.gasPrice > 0n);
  });

  test('deploys the contract, calls it, estimates and sends a transaction, and finds its event', async () => {
    const factory = new ContractFactory(TINY_ABI, TINY_BYTECODE, wallet);
    const deployed = await factory.deploy();
    await deployed.waitForDeployment();
    const address = await deployed.getAddress();
    contract = new Contract(address, TINY_ABI, wallet);
    assert.equal(await provider.getCode(address), TINY_RUNTIME);
    assert.equal(await contract.getFunction('value')(), TINY_INITIAL_VALUE);

    const gas = await contract.getFunction('store').estimateGas(9n);
    assert.ok(gas > 21_000n && gas < 100_000n, `estimated ${gas}`);
    const tx = await contract.getFunction('store')(9n);
    const receipt = await tx.wait();
    assert.equal(receipt?.status, 1);
    assert.equal(await contract.getFunction('value')(), 9n);

    const events = await contract.queryFilter('Stored', receipt?.blockNumber, receipt?.blockNumber);
    assert.equal(events.length, 1);
    const event = events[0];
    assert.ok(event && 'args' in event);
    assert.equal(event.args[0], wallet.address);
    assert.equal(event.args[1], 9n);
  });

  test('wallet.sendTransaction goes out as eth_sendRawTransaction and tx.wait() reads a successful receipt', async () => {
    const to = devAccount(8).address;
    const before = await provider.getBalance(to);
    const pending = await provider.send('eth_getTransactionCount', [wallet.address, 'pending']);
    assert.equal(pending, (await direct(ETHERS_NETWORK).request({ method: 'eth_getTransactionCount', params: [wallet.address as `0x${string}`, 'pending'] })));
    const tx = await wallet.sendTransaction({ to, value: parseEther('0.25') });
    const receipt = await tx.wait();
    assert.equal(receipt?.status, 1);
    assert.equal(receipt?.hash, tx.hash);
    assert.equal(await provider.getBalance(to), before + parseEther('0.25'));
    const onNode = await direct(ETHERS_NETWORK).getTransaction({ hash: tx.hash as `0x${string}` });
    assert.equal(getAddress(onNode.from), wallet.address);
  });

  test('a contract revert reaches ethers as CALL_EXCEPTION with the revert data', async () => {
    assert.ok(contract, 'the contract was deployed');
    const err = await provider.call({ to: await contract.getAddress(), data: TINY_REVERTING_CALLDATA }).then(
      () => assert.fail('the call should revert'),
      (e: unknown) => e,
    );
    assert.ok(isError(err, 'CALL_EXCEPTION'), String(err));
    assert.equal(err.data, contract.interface.getError('Nope')?.selector);
  });
});

describe('node errors pass through unchanged (C22)', () => {
  /** Posts the same bytes to the gateway at both addresses and straight to the node. */
  async function compare(slug: string, body: unknown): Promise<{ status: number; text: string }> {
    const n = network(slug);
    const raw = JSON.stringify(body);
    const post = (url: string, headers: Record<string, string> = {}) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw });
    const nodeRes = await post(t.devnet?.upstreams[slug]?.http ?? '');
    const nodeText = await nodeRes.text();
    for (const [form, res] of [
      ['path', await post(gatewayUrl(n, 'path'))],
      ['header', await post(gatewayUrl(n, 'header'), { 'x-api-key': apiKey })],
    ] as const) {
      assert.equal(res.status, 200, `${form}: HTTP ${res.status}`);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(await res.text(), nodeText, `${form}: the gateway changed the node's answer`);
    }
    return { status: nodeRes.status, text: nodeText };
  }

  test('an eth_call that reverts answers the node error object with HTTP 200, byte for byte', async () => {
    const node = direct(ETHERS_NETWORK);
    // A fresh contract on this chain so the test stands alone.
    const wallet = createWalletClient({
      account: privateKeyToAccount(devAccount(5).privateKey),
      chain: viemChain(network(ETHERS_NETWORK), 'path'),
      transport: viemTransport(network(ETHERS_NETWORK), 'path'),
    });
    const hash = await wallet.deployContract({ abi: TINY_ABI, bytecode: TINY_BYTECODE });
    const { contractAddress } = await node.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.ok(contractAddress);
    const { text } = await compare(ETHERS_NETWORK, {
      jsonrpc: '2.0',
      id: 'revert-1',
      method: 'eth_call',
      params: [{ to: contractAddress, data: TINY_REVERTING_CALLDATA }, 'latest'],
    });
    const parsed = JSON.parse(text) as { id: unknown; error?: { code: number; data?: string }; result?: unknown };
    assert.equal(parsed.id, 'revert-1');
    assert.equal(parsed.result, undefined);
    assert.equal(parsed.error?.data, '0x2de7f6df'); // Nope()
  });

  test('eth_getBalance with a malformed address answers the node error object with HTTP 200, byte for byte', async () => {
    const { text } = await compare(VIEM_NETWORK, { jsonrpc: '2.0', id: 99, method: 'eth_getBalance', params: ['0x1234', 'latest'] });
    const parsed = JSON.parse(text) as { id: unknown; error?: { code: number; message: string } };
    assert.equal(parsed.id, 99);
    assert.equal(typeof parsed.error?.code, 'number');
  });

  test('an unknown block hash answers the node null result unchanged', async () => {
    const { text } = await compare(NATIVE_NETWORK, {
      jsonrpc: '2.0',
      id: 5,
      method: 'eth_getBlockByHash',
      params: [`0x${'ab'.repeat(32)}`, false],
    });
    assert.equal(JSON.parse(text).result, null);
  });
});

describe('public endpoint', () => {
  test('POST /public/main answers eth_chainId 0x32 with no key', async () => {
    const res = await fetch(`${t.url}/public/main`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { jsonrpc: '2.0', id: 1, result: '0x32' });
    const viemClient = createPublicClient({ transport: http(`${t.url}/public/main`) });
    assert.equal(await viemClient.getChainId(), 50);
  });
});
