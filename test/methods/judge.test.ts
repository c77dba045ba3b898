// C50, C53, C54: params judged once, the way nodes read them, and forwarded as judged: the rules of
// src/methods/judge.ts on the module itself (the running gateway's use of them: test/rpc/param-guards.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidParamsError } from '../../src/errors/rpc.ts';
import { methodFacts } from '../../src/methods/catalogue.ts';
import { callText, judgeParams, type JudgedParams, repeatedMember } from '../../src/methods/judge.ts';

const judged = (method: string, params: unknown, text?: string): JudgedParams | InvalidParamsError => {
  const t = text ?? JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  return judgeParams(methodFacts(method), JSON.parse(t).params, t);
};
/** The refusal, or null when the call passes. */
const call = (method: string, params: unknown, text?: string) => {
  const j = judged(method, params, text);
  return j instanceof InvalidParamsError ? j : null;
};
/** The params as forwarded (the call passes). */
const forwarded = (method: string, params: unknown): unknown => {
  const j = judged(method, params);
  assert.ok(!(j instanceof InvalidParamsError), `${method} ${JSON.stringify(params)} passes: ${j instanceof InvalidParamsError ? j.message : ''}`);
  return j.params;
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
      const err = call(JSON.parse(text).method, JSON.parse(text).params, text);
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

describe('64-bit quantities inside overrides and authorizations, in every method that takes them (C50)', () => {
  const MAX = '0xffffffffffffffff';
  const OVER = '0x10000000000000000';
  const ABOVE_64 = '0x' + 'f'.repeat(64);
  /** The refusal's `data.field`, or null when the call passes. */
  const refusedAt = (method: string, params: unknown): string | null => {
    const err = call(method, params);
    if (err === null) return null;
    assert.equal(err.code, -32602);
    return (err.details as { field: string }).field;
  };
  const tx = { to: ALLOWED };
  const sim = (block: Record<string, unknown>) => [{ blockStateCalls: [block] }, 'latest'];

  // [what, method, params with the value at the bounded member, where the refusal names it]
  const bounded: Array<[string, string, (v: string) => unknown[], string]> = [
    ["eth_call's block override number", 'eth_call', (v) => [tx, 'latest', {}, { number: v }], 'params[3].number'],
    ["eth_call's block override time", 'eth_call', (v) => [tx, 'latest', null, { time: v }], 'params[3].time'],
    ["eth_call's block override gasLimit", 'eth_call', (v) => [tx, 'latest', {}, { gasLimit: v }], 'params[3].gasLimit'],
    ["eth_call's block override withdrawal index", 'eth_call', (v) => [tx, 'latest', {}, { withdrawals: [{ index: v }] }], 'params[3].withdrawals[0].index'],
    ["eth_call's block override withdrawal validatorIndex", 'eth_call', (v) => [tx, 'latest', {}, { withdrawals: [{ validatorIndex: v }] }], 'params[3].withdrawals[0].validatorIndex'],
    ["eth_call's block override withdrawal amount", 'eth_call', (v) => [tx, 'latest', {}, { withdrawals: [{ amount: v }] }], 'params[3].withdrawals[0].amount'],
    ["eth_estimateGas' block override number", 'eth_estimateGas', (v) => [tx, 'latest', {}, { number: v }], 'params[3].number'],
    ["eth_estimateGas' block override time", 'eth_estimateGas', (v) => [tx, 'latest', {}, { time: v }], 'params[3].time'],
    ["eth_estimateGas' block override gasLimit", 'eth_estimateGas', (v) => [tx, 'latest', {}, { gasLimit: v }], 'params[3].gasLimit'],
    ["eth_call's state override nonce", 'eth_call', (v) => [tx, 'latest', { [OTHER]: { nonce: v } }], `params[2]["${OTHER}"].nonce`],
    ["eth_estimateGas' state override nonce", 'eth_estimateGas', (v) => [tx, 'latest', { [OTHER]: { nonce: v } }], `params[2]["${OTHER}"].nonce`],
    ["eth_createAccessList's state override nonce", 'eth_createAccessList', (v) => [tx, 'latest', { [OTHER]: { nonce: v } }], `params[2]["${OTHER}"].nonce`],
    ["eth_simulateV1's state override nonce", 'eth_simulateV1', (v) => sim({ stateOverrides: { [OTHER]: { nonce: v } } }), `params[0].blockStateCalls[0].stateOverrides["${OTHER}"].nonce`],
    ["eth_simulateV1's block override withdrawal amount", 'eth_simulateV1', (v) => sim({ blockOverrides: { withdrawals: [{ amount: v }] } }), 'params[0].blockStateCalls[0].blockOverrides.withdrawals[0].amount'],
    ["debug_traceCall's state override nonce", 'debug_traceCall', (v) => [tx, 'latest', { tracer: 'callTracer', stateOverrides: { [OTHER]: { nonce: v } } }], `params[2].stateOverrides["${OTHER}"].nonce`],
    ["debug_traceCall's block override number", 'debug_traceCall', (v) => [tx, 'latest', { blockOverrides: { number: v } }], 'params[2].blockOverrides.number'],
    ["eth_call's authorization nonce", 'eth_call', (v) => [{ to: ALLOWED, authorizationList: [{ chainId: '0x1', address: OTHER, nonce: v }] }, 'latest'], 'params[0].authorizationList[0].nonce'],
    ["eth_estimateGas' authorization nonce", 'eth_estimateGas', (v) => [{ to: ALLOWED, authorizationList: [{ nonce: '0x0' }, { nonce: v }] }], 'params[0].authorizationList[1].nonce'],
    ["eth_simulateV1's call authorization nonce", 'eth_simulateV1', (v) => sim({ calls: [{ to: ALLOWED, authorizationList: [{ nonce: v }] }] }), 'params[0].blockStateCalls[0].calls[0].authorizationList[0].nonce'],
  ];
  for (const [what, method, params, field] of bounded) {
    test(`${what}: 2^64-1 passes unchanged, 2^64 is -32602 naming ${field}`, () => {
      const max = params(MAX);
      const j = judged(method, max);
      assert.ok(!(j instanceof InvalidParamsError), `2^64-1 passes: ${j instanceof InvalidParamsError ? j.message : ''}`);
      assert.equal(j.rewritten, false);
      assert.deepEqual(j.params, max);
      assert.equal(refusedAt(method, params(OVER)), field);
      // As nodes read it: 0X, upper case, leading zeros and long decimals cannot slip past.
      assert.equal(refusedAt(method, params('0X1' + '0'.repeat(16))), field);
      assert.equal(refusedAt(method, params('0x000' + 'F'.repeat(17))), field);
      assert.equal(refusedAt(method, params('0'.repeat(40) + '18446744073709551616')), field);
    });
  }

  test('other spellings of a valid value are forwarded as the same number, canonical', () => {
    assert.deepEqual(forwarded('eth_call', [tx, 'latest', { [OTHER]: { Nonce: '0X01' } }, { TIME: '0x00ff', gasLimit: '21000' }]), [
      tx,
      'latest',
      { [OTHER]: { nonce: '0x1' } },
      { time: '0xff', gasLimit: '0x5208' },
    ]);
    assert.deepEqual(forwarded('eth_estimateGas', [{ to: ALLOWED, authorizationList: [{ Nonce: '0XFFFFFFFFFFFFFFFF' }] }]), [
      { to: ALLOWED, authorizationList: [{ nonce: MAX }] },
    ]);
  });

  test('members nodes read as 256 bits are not bounded to 64', () => {
    const account = { balance: ABOVE_64, state: { ['0x' + '00'.repeat(32)]: '0x' + 'ff'.repeat(32) } };
    for (const [method, params] of [
      ['eth_call', [tx, 'latest', { [OTHER]: account }, { baseFeePerGas: ABOVE_64, blobBaseFee: ABOVE_64, difficulty: ABOVE_64, prevRandao: '0x' + 'ff'.repeat(32) }]],
      ['eth_estimateGas', [tx, 'latest', { [OTHER]: { balance: OVER } }, { baseFeePerGas: OVER }]],
      ['eth_createAccessList', [tx, 'latest', { [OTHER]: { balance: ABOVE_64 } }]],
      ['eth_simulateV1', sim({ stateOverrides: { [OTHER]: { balance: ABOVE_64 } }, blockOverrides: { baseFeePerGas: ABOVE_64 }, calls: [{ to: ALLOWED, value: ABOVE_64, maxFeePerGas: OVER }] })],
      ['debug_traceCall', [tx, 'latest', { stateOverrides: { [OTHER]: { balance: ABOVE_64 } }, blockOverrides: { blobBaseFee: ABOVE_64 } }]],
      ['eth_call', [{ to: ALLOWED, value: OVER, authorizationList: [{ chainId: ABOVE_64, nonce: '0x1', r: ABOVE_64, s: ABOVE_64 }] }, 'latest']],
    ] as const) {
      const j = judged(method, params);
      assert.ok(!(j instanceof InvalidParamsError), `${method} ${JSON.stringify(params)} passes: ${j instanceof InvalidParamsError ? j.message : ''}`);
      assert.equal(j.rewritten, false, `${method} forwarded unchanged`);
    }
  });
});

describe('values read the way nodes read them (C54)', () => {
  test('0X and long zero-padded decimals cannot slip past a bound', () => {
    const f40 = '0X' + 'F'.repeat(40);
    const padded = '0'.repeat(86) + '1025';
    for (const count of [f40, padded, '0X401', '0x0000000000000000000000000000000000000000401']) {
      assert.equal(call('eth_feeHistory', [count, 'latest', []])?.code, -32602, count);
    }
    assert.equal(call('eth_getBlockByNumber', ['0X10000000000000000', false])?.code, -32602);
    assert.equal(call('eth_getBlockByNumber', ['0'.repeat(80) + '18446744073709551616', false])?.code, -32602);
    assert.equal(call('eth_call', [{ to: ALLOWED, gas: '0X' + 'F'.repeat(17) }, 'latest'])?.code, -32602);
  });

  test("eth_simulateV1's call gas and its blocks' number, time and gas limit are bounded at 2^64-1", () => {
    const big = '0x1' + '0'.repeat(16);
    const sim = (block: Record<string, unknown>) => [{ blockStateCalls: [block] }, 'latest'];
    assert.equal(call('eth_simulateV1', sim({ calls: [{ to: ALLOWED, gas: big }] }))?.code, -32602);
    assert.equal(call('eth_simulateV1', sim({ blockOverrides: { number: big } }))?.code, -32602);
    assert.equal(call('eth_simulateV1', sim({ blockOverrides: { Time: '0X' + 'f'.repeat(17) } }))?.code, -32602);
    assert.equal(call('eth_simulateV1', sim({ blockOverrides: { gasLimit: '1' + '0'.repeat(30) } }))?.code, -32602);
    assert.equal(call('eth_simulateV1', sim({ blockOverrides: { number: '0x10' }, calls: [{ to: ALLOWED, gas: '0x5208' }] })), null);
  });

  test('a block is named every way the standard allows: number, tag, hash where allowed, EIP-1898 objects', () => {
    const hash = '0x' + 'ab'.repeat(32);
    for (const block of ['0x1', 'latest', 'pending', 'safe', 'finalized', 'earliest', hash, { blockHash: hash }, { blockHash: hash, requireCanonical: true }, { blockNumber: '0x1' }]) {
      for (const [method, params] of [
        ['eth_getBalance', [ALLOWED, block]],
        ['eth_getProof', [ALLOWED, [], block]],
        ['eth_getBlockReceipts', [block]],
        ['eth_getStorageValues', [{ [ALLOWED]: ['0x0'] }, block]],
        ['eth_call', [{ to: ALLOWED }, block]],
      ] as const) {
        assert.equal(call(method, params), null, `${method} ${JSON.stringify(block)}`);
      }
    }
    // Where the spec allows no hash, a 32-byte value is a number far above 2^64-1.
    assert.equal(call('eth_getBlockByNumber', [hash, false])?.code, -32602);
    assert.equal(call('eth_getBlockByNumber', [{ blockHash: hash }, false])?.code, -32602);
    // Malformed block objects.
    assert.equal(call('eth_getBalance', [ALLOWED, { blockHash: hash, blockNumber: '0x1' }])?.code, -32602);
    assert.equal(call('eth_getBalance', [ALLOWED, { blockHash: '0x12' }])?.code, -32602);
    assert.equal(call('eth_getBalance', [ALLOWED, 'Latest'])?.code, -32602);
  });

  test('a call in canonical form is forwarded as it is, object for object', () => {
    const params = [{ to: ALLOWED, data: '0x12', gas: '0x5208' }, '0x10'];
    const j = judged('eth_call', params);
    assert.ok(!(j instanceof InvalidParamsError));
    assert.equal(j.rewritten, false);
    assert.equal(j.block.kind, 'number');
  });

  test('other spellings are forwarded re-encoded from what was judged: canonical quantities, hashes, addresses and member names', () => {
    const hash = '0x' + 'AB'.repeat(32);
    assert.deepEqual(forwarded('eth_getBalance', [ALLOWED, '0X1F']), [ALLOWED, '0x1f']);
    assert.deepEqual(forwarded('eth_getBalance', [ALLOWED, '0031']), [ALLOWED, '0x1f']);
    assert.deepEqual(forwarded('eth_getBalance', [ALLOWED, 31]), [ALLOWED, '0x1f']);
    assert.deepEqual(forwarded('eth_getBalance', [ALLOWED, hash]), [ALLOWED, hash.toLowerCase()]);
    assert.deepEqual(forwarded('eth_getBalance', [ALLOWED, { BlockHash: hash, REQUIRECANONICAL: true }]), [ALLOWED, { blockHash: hash.toLowerCase(), requireCanonical: true }]);
    assert.deepEqual(forwarded('eth_feeHistory', ['0X00A', 'latest', [25]]), ['0xa', 'latest', [25]]);
    const upper = '0X' + 'AA'.repeat(20);
    assert.deepEqual(forwarded('eth_call', [{ To: upper, GAS: '0X10', Data: '0x' }, 'latest']), [{ to: '0x' + 'aa'.repeat(20), gas: '0x10', data: '0x' }, 'latest']);
    assert.deepEqual(forwarded('eth_getLogs', [{ FromBlock: '0X1', toblock: 'latest', Address: [upper] }]), [{ fromBlock: '0x1', toBlock: 'latest', address: ['0x' + 'aa'.repeat(20)] }]);
  });

  test('a rewritten call keeps the caller id exactly as written; a JSON integer above 2^53 cannot be written back and is refused', () => {
    assert.equal(callText('9007199254740993', 'eth_getBalance', [ALLOWED, '0x1']), `{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_getBalance","params":["${ALLOWED}","0x1"]}`);
    assert.equal(callText(null, 'eth_blockNumber', []), '{"jsonrpc":"2.0","method":"eth_blockNumber","params":[]}');
    assert.ok(callText('1', 'eth_call', [{ to: ALLOWED, value: 2 ** 60 }, '0x1']) instanceof InvalidParamsError);
  });
});
