// C50: a key with a contract allowlist runs code at its listed contracts only. Every call of
// eth_simulateV1 is judged, state and block overrides (which replace the code at a listed
// address) are refused, a signed transaction is judged by its `to`, and a method whose targets
// the gateway cannot judge is refused: -32003 with data.reason "contract", before any node sees
// it. A real anvil chain behind a counting node; over HTTP, in a batch and on a WebSocket. (How a
// signed transaction's `to` is read, and the docs table of the rules: test/keys/allowlist-checks.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPublicClient, createWalletClient, encodeFunctionData, type Hex, http, parseGwei } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { TINY_ABI, TINY_BYTECODE, TINY_INITIAL_VALUE } from '../support/tiny-contract.ts';
import { connect, wsAddress } from '../support/ws.ts';

// anvil's first dev account (its well-known key, funded on every anvil chain).
const DEV = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const VALUE = encodeFunctionData({ abi: TINY_ABI, functionName: 'value' });
// Runtime code that returns 0x...07 for any call: what an override would put at the listed address.
const RETURNS_SEVEN: Hex = '0x600760005260206000f3';

interface Answer {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { reason?: string } };
}

describe('a key with a contract allowlist (C50)', () => {
  let anvil: BareAnvil;
  let node: FakeNode;
  let t: TestApp;
  let A: Hex;
  let B: Hex;
  let limited: string;
  let open: string;

  before(async () => {
    anvil = await startAnvil();
    node = await startFakeNode({ forwardTo: anvil.url });
    t = await startTestApp({
      listen: true,
      env: { UPSTREAM_NATIVE_MAINNET: node.url, UPSTREAM_NATIVE_TESTNET: node.url },
      // Two node methods a plan opened: one the table names as refused, one it does not name.
      overrides: { methods: { planExtras: { free: ['debug_traceCall', 'debug_getRawHeader'] } } },
    });
    const wallet = createWalletClient({ account: DEV, transport: http(anvil.url) });
    const pub = createPublicClient({ transport: http(anvil.url) });
    const deploy = async () => {
      const hash = await wallet.deployContract({ abi: TINY_ABI, bytecode: TINY_BYTECODE, chain: null });
      return (await pub.waitForTransactionReceipt({ hash, pollingInterval: 50 })).contractAddress as Hex;
    };
    A = await deploy();
    B = await deploy();
    const k = await createKey(t.app);
    const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: k.user.auth, payload: { allowedContracts: [A] } });
    assert.equal(res.statusCode, 200, res.body);
    limited = k.key;
    open = (await createKey(t.app)).key;
  });
  after(async () => {
    await t?.close();
    await node?.close();
    await anvil?.stop();
  });

  const body = (method: string, params: unknown[], id: unknown = 1) => ({ jsonrpc: '2.0', id, method, params });
  async function rpc(key: string, payload: unknown): Promise<{ status: number; json: Answer & Answer[] }> {
    const res = await fetch(`${t.url}/v1/native-mainnet/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    return { status: res.status, json: (await res.json()) as Answer & Answer[] };
  }
  function refused(answer: { error?: { code: number; data?: unknown } }, what: string): void {
    assert.equal(answer.error?.code, -32003, `${what}: ${JSON.stringify(answer)}`);
    assert.equal((answer.error?.data as { reason?: string } | undefined)?.reason, 'contract', what);
  }
  /** Sends one call with the limited key; asserts a 403 -32003 that no node saw. */
  async function refusedOverHttp(method: string, params: unknown[], what: string): Promise<void> {
    const before = node.callCount(method);
    const res = await rpc(limited, body(method, params));
    assert.equal(res.status, 403, `${what}: ${JSON.stringify(res.json)}`);
    refused(res.json, what);
    assert.equal(node.callCount(method), before, `${what}: reached the node`);
  }
  const simulate = (calls: unknown[], extra: Record<string, unknown> = {}) => [{ blockStateCalls: [{ calls, ...extra }] }, 'latest'];
  const word = (n: bigint) => `0x${n.toString(16).padStart(64, '0')}`;

  test('eth_simulateV1: a call to another contract is refused; calls to the listed one run on the node', async () => {
    // Without a list the other contract's data comes back: what the check keeps from the limited key.
    const openAnswer = await rpc(open, body('eth_simulateV1', simulate([{ to: B, data: VALUE }])));
    assert.equal((openAnswer.json.result as Array<{ calls: Array<{ returnData: string }> }>)[0]?.calls[0]?.returnData, word(TINY_INITIAL_VALUE));

    await refusedOverHttp('eth_simulateV1', simulate([{ to: A, data: VALUE }, { to: B, data: VALUE }]), 'the second call elsewhere');
    await refusedOverHttp('eth_simulateV1', [{ blockStateCalls: [{ calls: [{ to: A, data: VALUE }] }, { calls: [{ to: B, data: VALUE }] }] }, 'latest'], 'a later block elsewhere');
    await refusedOverHttp('eth_simulateV1', simulate([{ data: TINY_BYTECODE }]), 'a deployment (no to)');
    await refusedOverHttp('eth_simulateV1', simulate([]), 'no call at all');
    await refusedOverHttp('eth_simulateV1', simulate([{ to: A, data: VALUE }], { stateOverrides: { [A]: { code: RETURNS_SEVEN } } }), 'code replaced at the listed address');
    await refusedOverHttp('eth_simulateV1', simulate([{ to: A, data: VALUE }], { blockOverrides: { number: '0x1000' } }), 'block overrides');
    // A Go node reads member names in any case: a variant the gateway does not know is refused, not skipped.
    await refusedOverHttp('eth_simulateV1', simulate([{ to: A, data: VALUE }], { StateOverrides: { [A]: { code: RETURNS_SEVEN } } }), 'an override spelled otherwise');
    await refusedOverHttp('eth_simulateV1', [{ blockStateCalls: [{ Calls: [{ to: B, data: VALUE }] }] }, 'latest'], 'calls spelled otherwise');

    const served = await rpc(limited, body('eth_simulateV1', [{ blockStateCalls: [{ calls: [{ to: A, data: VALUE }] }, { calls: [{ to: A, data: VALUE }], stateOverrides: {} }] }, 'latest']));
    assert.equal(served.status, 200, JSON.stringify(served.json));
    const blocks = served.json.result as Array<{ calls: Array<{ returnData: string; status: string }> }>;
    assert.equal(blocks.length, 2);
    assert.deepEqual(blocks.map((b) => b.calls[0]?.returnData), [word(TINY_INITIAL_VALUE), word(TINY_INITIAL_VALUE)]);
  });

  test('eth_call and eth_estimateGas: a state override, block override or authorization list is refused, even at the listed address', async () => {
    // Without a list the override runs: the node answers the replaced code's 7.
    const replaced = await rpc(open, body('eth_call', [{ to: A, data: VALUE }, 'latest', { [A]: { code: RETURNS_SEVEN } }]));
    assert.equal(replaced.json.result, word(7n));

    await refusedOverHttp('eth_call', [{ to: A, data: VALUE }, 'latest', { [A]: { code: RETURNS_SEVEN } }], 'eth_call state override');
    await refusedOverHttp('eth_call', [{ to: A, data: VALUE }, 'latest', null, { number: '0x1000' }], 'eth_call block override');
    await refusedOverHttp('eth_estimateGas', [{ to: A, data: VALUE }, 'latest', { [B]: { balance: '0x1' } }], 'eth_estimateGas state override');
    await refusedOverHttp('eth_call', [{ to: A, data: VALUE, authorizationList: [{ address: B, chainId: '0x7a69', nonce: '0x0', r: '0x1', s: '0x1', yParity: '0x0' }] }, 'latest'], 'an authorization list');
    await refusedOverHttp('eth_call', [{ To: B, data: VALUE }, 'latest'], 'the target spelled otherwise (a Go node reads it as to)');
    await refusedOverHttp('eth_call', [{ data: TINY_BYTECODE }, 'latest'], 'a deployment');

    const plain = await rpc(limited, body('eth_call', [{ to: A, data: VALUE }, 'latest', {}]));
    assert.equal(plain.json.result, word(TINY_INITIAL_VALUE), 'an empty override changes nothing and is served');
  });

  test('code and storage are read at listed contracts only; balances and nonces of any account are served', async () => {
    await refusedOverHttp('eth_getCode', [B, 'latest'], 'eth_getCode elsewhere');
    await refusedOverHttp('eth_getStorageAt', [B, '0x0', 'latest'], 'eth_getStorageAt elsewhere');
    await refusedOverHttp('eth_getProof', [B, [], 'latest'], 'eth_getProof elsewhere');
    assert.equal((await rpc(limited, body('eth_getStorageAt', [A, '0x0', 'latest']))).json.result, word(TINY_INITIAL_VALUE));
    assert.match(String((await rpc(limited, body('eth_getCode', [A, 'latest']))).json.result), /^0x[0-9a-f]{10,}$/);
    assert.match(String((await rpc(limited, body('eth_getBalance', [B, 'latest']))).json.result), /^0x/);
    assert.match(String((await rpc(limited, body('eth_getTransactionCount', [DEV.address, 'latest']))).json.result), /^0x/);
  });

  test('a method the gateway cannot judge is refused, though the plan allows it; a key without lists calls it', async () => {
    const call = { to: A, data: VALUE };
    await refusedOverHttp('debug_traceCall', [call, 'latest', {}], 'debug_traceCall (named as refused)');
    await refusedOverHttp('debug_getRawHeader', ['latest'], 'a method not in the table');
    const openAnswer = await rpc(open, body('debug_traceCall', [call, 'latest', {}]));
    assert.notEqual(openAnswer.json.error?.code, -32003, 'the node answers a key without lists');
  });

  test('eth_sendRawTransaction is judged by the signed transaction\'s to: elsewhere, a deployment and a set-code transaction are refused', async () => {
    const pub = createPublicClient({ transport: http(anvil.url) });
    let nonce = await pub.getTransactionCount({ address: DEV.address });
    const sign = (tx: Record<string, unknown>) =>
      DEV.signTransaction({ chainId: 31337, gas: 100_000n, maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: 1n, nonce, ...tx });
    const store = encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [5n] });
    await refusedOverHttp('eth_sendRawTransaction', [await sign({ to: B, data: store })], 'a transaction to another contract');
    await refusedOverHttp('eth_sendRawTransaction', [await sign({ data: TINY_BYTECODE, gas: 300_000n })], 'a deployment');
    const authorization = await DEV.signAuthorization({ address: B, chainId: 31337, nonce: nonce + 1 });
    await refusedOverHttp('eth_sendRawTransaction', [await sign({ to: A, data: store, authorizationList: [authorization], type: 'eip7702' })], 'a set-code transaction');
    await refusedOverHttp('eth_sendRawTransaction', ['0x02c0ffee'], 'bytes that are no transaction');

    const sent = await rpc(limited, body('eth_sendRawTransaction', [await sign({ to: A, data: store })]));
    assert.match(String(sent.json.result), /^0x[0-9a-f]{64}$/, JSON.stringify(sent.json));
    nonce++;
    const legacy = await DEV.signTransaction({ chainId: 31337, gas: 100_000n, gasPrice: parseGwei('20'), nonce, to: A, data: store });
    assert.match(String((await rpc(limited, body('eth_sendRawTransaction', [legacy]))).json.result), /^0x[0-9a-f]{64}$/, 'a legacy transaction to the listed contract');
  });

  test('in a batch each item is judged on its own; on a WebSocket the same', async () => {
    const batch = await rpc(limited, [
      body('eth_simulateV1', simulate([{ to: B, data: VALUE }]), 'b'),
      body('eth_simulateV1', simulate([{ to: A, data: VALUE }]), 'a'),
      body('eth_call', [{ to: A, data: VALUE }, 'latest', { [A]: { code: RETURNS_SEVEN } }], 'override'),
      body('debug_getRawHeader', ['latest'], 'unjudged'),
      body('eth_blockNumber', [], 'free'),
    ]);
    assert.equal(batch.status, 200);
    const byId = new Map(batch.json.map((a) => [a.id, a]));
    for (const id of ['b', 'override', 'unjudged']) refused(byId.get(id) as Answer, `batch item ${id}`);
    assert.ok(Array.isArray(byId.get('a')?.result), JSON.stringify(byId.get('a')));
    assert.match(String(byId.get('free')?.result), /^0x/);

    const ws = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${limited}`));
    try {
      refused(await ws.call('eth_simulateV1', simulate([{ to: B, data: VALUE }])), 'ws: simulate elsewhere');
      refused(await ws.call('eth_call', [{ to: A, data: VALUE }, 'latest', { [A]: { code: RETURNS_SEVEN } }]), 'ws: state override');
      refused(await ws.call('debug_getRawHeader', ['latest']), 'ws: a method not judged');
      refused(await ws.call('eth_subscribe', ['logs', { address: B }]), 'ws: logs elsewhere');
      refused(await ws.call('eth_subscribe', ['someNodeExtension', {}]), 'ws: a subscription kind not judged');
      const ok = await ws.call('eth_simulateV1', simulate([{ to: A, data: VALUE }]));
      assert.ok(Array.isArray(ok.result), JSON.stringify(ok));
    } finally {
      await ws.close();
    }
  });
});
