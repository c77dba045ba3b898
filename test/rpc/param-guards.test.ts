// C50: parameters a node cannot bound itself are refused before any node sees them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { paramsProblem, repeatedMember } from '../../src/rpc/param-guards.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { connect, wsAddress } from '../ws/helpers.ts';

const call = (method: string, params: unknown, text?: string) => {
  const t = text ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  return paramsProblem(method, JSON.parse(t).params, t);
};
const ALLOWED = '0x' + '11'.repeat(20);
const OTHER = '0x' + '22'.repeat(20);

describe('members inside params that a Go node reads as one (C50)', () => {
  const cases: Array<[string, string]> = [
    ['the same name twice', `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ALLOWED}","to":"${OTHER}"},"latest"]}`],
    ['names that differ only by case', `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ALLOWED}","To":"${OTHER}","data":"0x"},"latest"]}`],
    ['a name written with an escape', `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"${ALLOWED}","\\u0074o":"${OTHER}"},"latest"]}`],
    ['address and ADDRESS in a log filter', `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"address":"${ALLOWED}","ADDRESS":"${OTHER}"}]}`],
    ['a long s folding to s', `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"input":"0x","ſtate":{},"state":{}},"latest"]}`],
    ['a repeat three objects deep', `{"jsonrpc":"2.0","id":1,"method":"eth_simulateV1","params":[{"blockStateCalls":[{"calls":[{"to":"${ALLOWED}","TO":"${OTHER}"}]}]},"latest"]}`],
  ];
  for (const [what, text] of cases) {
    test(`${what} is -32602`, () => {
      const err = call(JSON.parse(text).method, undefined, text);
      assert.ok(err, 'refused');
      assert.equal(err.code, -32602);
    });
  }

  test('distinct names, and the same name in two different objects, pass', () => {
    assert.equal(call('eth_call', [{ to: ALLOWED, data: '0x', from: OTHER }, 'latest']), null);
    assert.equal(call('eth_getLogs', [{ address: [ALLOWED], topics: [null], fromBlock: '0x1', toBlock: '0x2' }]), null);
    assert.equal(call('eth_call', [{ to: ALLOWED }, { blockHash: '0x' + '00'.repeat(32) }, { [ALLOWED]: { balance: '0x1' }, [OTHER]: { balance: '0x2' } }]), null);
  });

  test('a name inside a string value is not a member', () => {
    assert.equal(repeatedMember('["{\\"to\\":1,\\"to\\":2}"]', 0, 24), null);
  });
});

describe('numbers a node cannot bound (C50)', () => {
  test('eth_feeHistory with a block count above 1024 is -32602, in every spelling', () => {
    for (const count of ['0xffffffffffffffffffffffffffffffffffffffff', '0x401', 1025, '1025', 1e300]) {
      const err = call('eth_feeHistory', [count, 'latest', []]);
      assert.equal(err?.code, -32602, JSON.stringify(count));
    }
    for (const count of ['0x400', 1024, '0x1', 5]) assert.equal(call('eth_feeHistory', [count, 'latest', []]), null, JSON.stringify(count));
  });

  test('block numbers above 2^64-1 are -32602 wherever a block is named', () => {
    const big = '0x10000000000000000';
    assert.equal(call('eth_getBlockByNumber', [big, false])?.code, -32602);
    assert.equal(call('eth_getBalance', [ALLOWED, big])?.code, -32602);
    assert.equal(call('eth_getBalance', [ALLOWED, { blockNumber: big }])?.code, -32602);
    assert.equal(call('eth_getStorageAt', [ALLOWED, '0x0', big])?.code, -32602);
    assert.equal(call('eth_call', [{ to: ALLOWED }, big])?.code, -32602);
    assert.equal(call('eth_feeHistory', ['0x1', big, []])?.code, -32602);
    assert.equal(call('eth_getLogs', [{ fromBlock: '0x0', toBlock: big }])?.code, -32602);
    assert.equal(call('eth_getTransactionByBlockNumberAndIndex', ['0x1', big])?.code, -32602);
  });

  test('2^64-1 itself, tags and hashes pass', () => {
    const max = '0xffffffffffffffff';
    assert.equal(call('eth_getBlockByNumber', [max, false]), null);
    assert.equal(call('eth_getBalance', [ALLOWED, 'latest']), null);
    assert.equal(call('eth_getBalance', [ALLOWED, { blockHash: '0x' + 'ff'.repeat(32) }]), null);
    assert.equal(call('eth_getLogs', [{ fromBlock: 'earliest', toBlock: 'finalized' }]), null);
  });

  test("a transaction's gas and nonce above 2^64-1 are -32602; its value may be 256 bits", () => {
    const big = '0x1' + '0'.repeat(16);
    assert.equal(call('eth_call', [{ to: ALLOWED, gas: big }, 'latest'])?.code, -32602);
    assert.equal(call('eth_estimateGas', [{ to: ALLOWED, nonce: big }])?.code, -32602);
    assert.equal(call('eth_call', [{ to: ALLOWED, value: '0x' + 'f'.repeat(64) }, 'latest']), null);
  });
});

describe('param guards on the running gateway, before any node sees the call (C50)', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], listen: true });
    key = (await createKey(t.app)).key;
  });
  after(() => t?.close());

  const post = async (path: string, body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    return { status: res.status, json: (await res.json()) as { error?: { code: number }; result?: string } | Array<{ error?: { code: number }; result?: string }> };
  };

  test('a keyless eth_feeHistory with a 160-bit block count is -32602, and the chain still answers afterwards', async () => {
    const killer = '{"jsonrpc":"2.0","id":1,"method":"eth_feeHistory","params":["0xffffffffffffffffffffffffffffffffffffffff","latest"]}';
    for (let i = 0; i < 3; i++) {
      const res = await post('/public/main', killer);
      assert.equal(res.status, 200);
      assert.equal((res.json as { error?: { code: number } }).error?.code, -32602);
    }
    const alive = await post('/public/main', '{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}');
    assert.equal(alive.status, 200);
    assert.match(String((alive.json as { result?: string }).result), /^0x[0-9a-f]+$/);
  });

  test('repeated members inside params are -32602 over HTTP, item by item in a batch, and over WebSocket', async () => {
    const dup = `{"jsonrpc":"2.0","id":7,"method":"eth_call","params":[{"to":"${ALLOWED}","To":"${OTHER}","data":"0x"},"latest"]}`;
    const single = await post('/rpc/main/evm/50', dup, { 'x-api-key': key });
    assert.equal((single.json as { error?: { code: number } }).error?.code, -32602);
    const batch = await post('/rpc/main/evm/50', `[${dup},{"jsonrpc":"2.0","id":8,"method":"eth_chainId","params":[]}]`, { 'x-api-key': key });
    const items = batch.json as Array<{ id: number; error?: { code: number }; result?: string }>;
    assert.equal(items.find((i) => i.id === 7)?.error?.code, -32602);
    assert.equal(items.find((i) => i.id === 8)?.result, '0x32');
    const ws = await connect(wsAddress(t, `/ws?apiKey=${key}`));
    try {
      const answer = await ws.send(dup);
      assert.equal(answer.error?.code, -32602);
    } finally {
      await ws.close();
    }
  });
});
