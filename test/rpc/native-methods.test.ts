import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, beforeEach, describe, test } from 'node:test';
import { InvalidParamsError, MethodNotSupportedError, NodeAnsweredError, toRpcError, UpstreamError } from '../../src/errors/rpc.ts';
import {
  callNativeMethod,
  EPOCH_INFO_METHOD,
  NATIVE_METHOD_DOCS,
  type NodeCall,
  nodeCallFromPool,
  parseJsonKeepingBigIntegers,
} from '../../src/rpc/dispatch/native.ts';
import { NoUpstreamError, UpstreamPool, UpstreamRpcError } from '../../src/upstreams/http/pool.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { EPOCH_WITHOUT_REWARDS, type FakeNode, REWARD_EPOCH, startFakeNode } from '../support/fake-node.ts';

// The shipped table: what runs in production is what is tested.
const config = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as {
  methods: { native: Record<string, string> };
};
const TABLE = config.methods.native;

const MN1 = '0x6ccd5f2bd3e1a9f2c5ec7a06aa1c8b2bb5a5e8c1';
const MN2 = '0x1f4b7d2e9a0c3f6b8d1e4a7c0f3b6d9e2a5c8f13';
const SLASHED = '0x3b8c4a8e1b9dd0f6f2e0d2a9b0a5b1f9c57de0f4';
const PROPOSED = '0x9d7e2f0a1c4b6e8d3f5a7c9e1b3d5f7a9c2e4f60';
const VOTER = '0xa5e0c7b2d4f6a8c1e3b5d7f9a2c4e6b8d0f1a3c5';
const FOUNDATION = '0x0000000000000000000000000000000000000068';
const EPOCH_HASH = '0x4e2a6c8e0a2c4e6f8a0b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e0f';

const xdc = (address: string): string => `xdc${address.slice(2)}`;

let node: FakeNode;
let pool: UpstreamPool;
let call: NodeCall;
let lossless: NodeCall;

before(async () => {
  node = await startFakeNode({ native: true });
  pool = new UpstreamPool({
    network: 'native-testnet',
    upstreams: [{ http: node.url }],
    requestTimeoutMs: 2_000,
    totalTimeoutMs: 3_000,
  });
  call = <T = unknown>(m: string, p: readonly unknown[]) => pool.request<T>(m, p);
  lossless = nodeCallFromPool(pool);
});

after(async () => {
  await pool.close();
  await node.close();
});

beforeEach(() => {
  node.log.length = 0;
  node.setBlockError(false);
  node.setMasternodesError(false);
});

const nat = (method: string, params: unknown, via: NodeCall = call): Promise<unknown> =>
  callNativeMethod(method, params, TABLE, via);

/**
 * Asserts the error object the client gets and its HTTP status, as the dispatcher makes them
 * (`toRpcError`, C22).
 */
function clientSees(status: number, json: { code: number; message: string | RegExp; data?: unknown }): (err: unknown) => boolean {
  return (err) => {
    const e = toRpcError(err);
    assert.equal(e.httpStatus, status, `HTTP status of ${String(err)}`);
    const { message, ...rest } = json;
    const { message: got, ...gotRest } = e.toJSON();
    if (typeof message === 'string') assert.equal(got, message);
    else assert.match(got, message);
    if ('data' in json) assert.deepEqual(gotRest, rest);
    else assert.equal(gotRest.code, json.code);
    return true;
  };
}

/** A node that answers each method with a set result (null is a result), or a -32601 error. */
function scriptedNode(results: Record<string, unknown>): NodeCall {
  return async <T = unknown>(method: string) => {
    if (!Object.hasOwn(results, method)) throw new UpstreamRpcError(-32601, `the method ${method} does not exist/is not available`, undefined, 0);
    return results[method] as T;
  };
}

describe('nat_getBlockByNumber', () => {
  test('answers camelCase keys and the miner unpadded from 32 to 20 bytes', async () => {
    const block = await nat('nat_getBlockByNumber', ['latest']);
    assert.deepEqual(block, {
      hash: '0x8a3c1f0e5b7d9a2c4e6f8b0d1a3c5e7f9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f01',
      round: 9012345,
      number: 80371234,
      parentHash: '0x1b2d3f4a5c6e7f80912a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80',
      committed: true,
      miner: MN1,
      timestamp: 1718000000,
      encodedRLP: '+QJYoBstP0pcbn+AkSo7TF1uf4CRorPE1eb3CBkqO0xdbn+AoB3MTepdrCpBC+3LhvtVgrC3ZXg/hQ==',
    });
    assert.deepEqual(node.logWithoutProbes(), [{ method: 'XDPoS_getV2BlockByNumber', params: ['latest'] }]);
  });

  test('sends a tag as given and a number as a canonical hex quantity', async () => {
    await nat('nat_getBlockByNumber', ['finalized']);
    await nat('nat_getBlockByNumber', [80371234]);
    await nat('nat_getBlockByNumber', ['0x04CA5E22']);
    await nat('nat_getBlockByNumber', []);
    await nat('nat_getBlockByNumber', undefined);
    assert.deepEqual(
      node.logWithoutProbes().map((c) => c.params),
      [['finalized'], ['0x4ca5e22'], ['0x4ca5e22'], ['latest'], ['latest']],
    );
  });

  test('a block answered with a non-empty Error is -32000 with the node message, HTTP 200 (the node answered)', async () => {
    node.setBlockError(true);
    await assert.rejects(nat('nat_getBlockByNumber', [999999999]), (err) => {
      assert.ok(err instanceof NodeAnsweredError, String(err));
      return clientSees(200, {
        code: -32000,
        message: 'can not find block from this number',
        data: { method: 'XDPoS_getV2BlockByNumber' },
      })(err);
    });
  });
});

describe('nat_getCandidates', () => {
  test('turns xdc-prefixed checksummed keys into lower-case 0x addresses, keeping status and stake', async () => {
    const res = await nat('nat_getCandidates', ['latest'], lossless);
    assert.deepEqual(res, {
      epoch: 89300,
      success: true,
      candidates: {
        [MN1]: { status: 'MASTERNODE', capacity: '10000000000000000000000000' },
        [MN2]: { status: 'MASTERNODE', capacity: '-1' },
        [SLASHED]: { status: 'SLASHED', capacity: '10000000000000000000000000' },
        [PROPOSED]: { status: 'PROPOSED', capacity: '12345678901234567890123456' },
      },
    });
  });

  test('passes "latest" through and sends an epoch number as a hex quantity', async () => {
    await nat('nat_getCandidates', ['latest']);
    await nat('nat_getCandidates', [89300]);
    await nat('nat_getCandidates', ['89300']);
    await nat('nat_getCandidates', []);
    assert.deepEqual(
      node.logWithoutProbes().map((c) => [c.method, c.params]),
      [
        ['eth_getCandidates', ['latest']],
        ['eth_getCandidates', ['0x15cd4']],
        ['eth_getCandidates', ['0x15cd4']],
        ['eth_getCandidates', ['latest']],
      ],
    );
  });
});

describe('nat_getMasternodes', () => {
  test('answers the PascalCase node keys in camelCase with 0x addresses', async () => {
    const res = await nat('nat_getMasternodes', [80371234]);
    assert.deepEqual(res, {
      epoch: 89300,
      number: 80371234,
      round: 9012345,
      masternodesLen: 2,
      masternodes: [MN1, MN2],
      penaltyLen: 1,
      penalty: [SLASHED],
      standbynodesLen: 1,
      standbynodes: [PROPOSED],
    });
    assert.deepEqual(node.logWithoutProbes(), [{ method: 'XDPoS_getMasternodesByNumber', params: ['0x4ca5e22'] }]);
  });

  test('an Error set by the node ({} once Go has marshalled it) is -32000 with HTTP 200', async () => {
    node.setMasternodesError(true);
    await assert.rejects(nat('nat_getMasternodes', ['latest']), clientSees(200, { code: -32000, message: /XDPoS_getMasternodesByNumber.*without a message/ }));
  });
});

describe('nat_getValidatorReward', () => {
  test('resolves the epoch to its block hash, then reads the reward record of that hash', async () => {
    const reward = await nat('nat_getValidatorReward', [REWARD_EPOCH, MN1], lossless);
    assert.deepEqual(reward, { sign: 225, reward: '3281250000000000000123' });
    assert.deepEqual(node.logWithoutProbes(), [
      { method: 'XDPoS_getBlockInfoByEpochNum', params: [REWARD_EPOCH] },
      { method: 'eth_getRewardByHash', params: [EPOCH_HASH] },
    ]);
  });

  test('matches the address whatever its prefix and case', async () => {
    for (const address of [MN2, MN2.toUpperCase().replace('0X', '0x'), xdc(MN2), xdc(MN2).toUpperCase()]) {
      assert.deepEqual(await nat('nat_getValidatorReward', [REWARD_EPOCH, address], lossless), {
        sign: 200,
        reward: '2916666666666666666666',
      });
    }
  });

  test('sends the epoch as a JSON number whether it came as a number, hex or decimal string', async () => {
    for (const epoch of [REWARD_EPOCH, `0x${REWARD_EPOCH.toString(16)}`, String(REWARD_EPOCH)]) {
      await nat('nat_getValidatorReward', [epoch, MN1]);
    }
    const lookups = node.logWithoutProbes().filter((c) => c.method === 'XDPoS_getBlockInfoByEpochNum');
    assert.deepEqual(
      lookups.map((c) => c.params),
      [[REWARD_EPOCH], [REWARD_EPOCH], [REWARD_EPOCH]],
    );
  });

  test('is null for an address that signed nothing in the epoch', async () => {
    assert.equal(await nat('nat_getValidatorReward', [REWARD_EPOCH, VOTER]), null);
  });

  test('an epoch the node refuses is the node error unchanged, HTTP 200, and no reward is read', async () => {
    for (const via of [call, lossless]) {
      await assert.rejects(nat('nat_getValidatorReward', [999_999, MN1], via), (err) => {
        assert.ok(err instanceof UpstreamRpcError, String(err));
        return clientSees(200, { code: -32000, message: 'epoch 999999 is not reached yet' })(err);
      });
    }
    assert.deepEqual(
      node.logWithoutProbes().map((c) => c.method),
      ['XDPoS_getBlockInfoByEpochNum', 'XDPoS_getBlockInfoByEpochNum'],
    );
  });

  test('an epoch whose block has no reward record on the node is -32000 with HTTP 200, not a null reward', async () => {
    await assert.rejects(nat('nat_getValidatorReward', [EPOCH_WITHOUT_REWARDS, MN1], lossless), (err) => {
      assert.ok(err instanceof NodeAnsweredError, String(err));
      assert.equal(err.httpStatus, 200);
      assert.equal(err.code, -32000);
      assert.match(err.message, new RegExp(`^no reward record for epoch ${EPOCH_WITHOUT_REWARDS}: .*--store-reward`));
      const data = err.toJSON().data as { method: string; epoch: number; blockHash: string };
      assert.equal(data.method, 'eth_getRewardByHash');
      assert.equal(data.epoch, EPOCH_WITHOUT_REWARDS);
      assert.match(data.blockHash, /^0x[0-9a-f]{64}$/);
      return true;
    });
  });

  test('an epoch the node answers without a block (no hash, a zero hash, null) is -32000 "no block found", HTTP 200', async () => {
    const zero = `0x${'0'.repeat(64)}`;
    for (const info of [null, {}, { hash: zero, round: 0, firstBlock: 0, lastBlock: 0 }]) {
      const via = scriptedNode({ [EPOCH_INFO_METHOD]: info, eth_getRewardByHash: {} });
      for (const [method, params] of [
        ['nat_getValidatorReward', [7, MN1]],
        ['nat_getVoterReward', [7, MN1, VOTER]],
      ] as const) {
        await assert.rejects(
          nat(method, params, via),
          clientSees(200, { code: -32000, message: 'no block found for epoch 7', data: { method: EPOCH_INFO_METHOD, epoch: 7 } }),
          `${method} with ${JSON.stringify(info)}`,
        );
      }
    }
  });

  test('a reward record answered as null reads as no record: -32000, HTTP 200', async () => {
    const via = scriptedNode({ [EPOCH_INFO_METHOD]: { hash: EPOCH_HASH }, eth_getRewardByHash: null });
    await assert.rejects(nat('nat_getVoterReward', [7, MN1, VOTER], via), clientSees(200, { code: -32000, message: /^no reward record for epoch 7: / }));
  });

  test('an answer that is not an object where one is needed is -32000 with HTTP 502: the call could not be answered', async () => {
    const cases: Array<[string, unknown[], NodeCall]> = [
      ['nat_getValidatorReward', [7, MN1], scriptedNode({ [EPOCH_INFO_METHOD]: 'epoch 7' })],
      ['nat_getVoterReward', [7, MN1, VOTER], scriptedNode({ [EPOCH_INFO_METHOD]: { hash: EPOCH_HASH }, eth_getRewardByHash: [1, 2] })],
      ['nat_getBlockByNumber', ['latest'], scriptedNode({ XDPoS_getV2BlockByNumber: null })],
      ['nat_getMasternodes', ['latest'], scriptedNode({ XDPoS_getMasternodesByNumber: 42 })],
    ];
    for (const [method, params, via] of cases) {
      await assert.rejects(nat(method, params, via), (err) => {
        assert.ok(err instanceof UpstreamError, `${method}: ${String(err)}`);
        return clientSees(502, { code: -32000, message: /unexpected answer/ })(err);
      });
    }
  });
});

describe('nat_getVoterReward', () => {
  test('answers rewards[masternode][voter], addresses in any prefix and case', async () => {
    const amount = await nat('nat_getVoterReward', [REWARD_EPOCH, xdc(MN1).toUpperCase(), VOTER.toUpperCase().replace('0X', '0x')], lossless);
    assert.equal(amount, '1968750000000000000123');
    assert.deepEqual(node.logWithoutProbes(), [
      { method: 'XDPoS_getBlockInfoByEpochNum', params: [REWARD_EPOCH] },
      { method: 'eth_getRewardByHash', params: [EPOCH_HASH] },
    ]);
    assert.equal(await nat('nat_getVoterReward', [REWARD_EPOCH, MN1, FOUNDATION], lossless), '328125000000000000000');
    assert.equal(await nat('nat_getVoterReward', [REWARD_EPOCH, MN2, xdc(VOTER)], lossless), '1750000000000000000000');
  });

  test('is null for a voter without reward through that masternode, or an unknown masternode', async () => {
    assert.equal(await nat('nat_getVoterReward', [REWARD_EPOCH, MN2, FOUNDATION]), null);
    assert.equal(await nat('nat_getVoterReward', [REWARD_EPOCH, PROPOSED, VOTER]), null);
  });
});

describe('wei amounts', () => {
  test('keep every digit through nodeCallFromPool, where pool.request rounds them', async () => {
    const exact = await nat('nat_getVoterReward', [REWARD_EPOCH, MN1, VOTER], lossless);
    const rounded = await nat('nat_getVoterReward', [REWARD_EPOCH, MN1, VOTER], call);
    assert.equal(exact, '1968750000000000000123');
    assert.notEqual(rounded, exact); // why the gateway should not use pool.request for these
  });

  test('parseJsonKeepingBigIntegers leaves safe numbers, strings and other literals alone', () => {
    const text = '{"a":-12345678901234567890,"b":[1.5e300,2,-3,"99999999999999999999"],"c\\"9007199254740993":9007199254740993,"d":true,"e":null}';
    assert.deepEqual(parseJsonKeepingBigIntegers(text), {
      a: '-12345678901234567890',
      b: [1.5e300, 2, -3, '99999999999999999999'],
      'c"9007199254740993': '9007199254740993',
      d: true,
      e: null,
    });
    assert.throws(() => parseJsonKeepingBigIntegers('{"a":123456789012345678901'), SyntaxError);
  });
});

describe('params and table', () => {
  const invalid: Array<[string, unknown]> = [
    ['nat_getBlockByNumber', { block: 'latest' }],
    ['nat_getBlockByNumber', ['latest', true]],
    ['nat_getBlockByNumber', ['newest']],
    ['nat_getBlockByNumber', [-1]],
    ['nat_getBlockByNumber', [1.5]],
    ['nat_getBlockByNumber', ['0x']],
    ['nat_getBlockByNumber', ['12']],
    ['nat_getCandidates', ['pending']],
    ['nat_getCandidates', [-3]],
    ['nat_getMasternodes', [null]],
    ['nat_getValidatorReward', [REWARD_EPOCH]],
    ['nat_getValidatorReward', ['latest', MN1]],
    ['nat_getValidatorReward', [REWARD_EPOCH, '0x1234']],
    ['nat_getValidatorReward', [REWARD_EPOCH, MN1.slice(2)]],
    ['nat_getValidatorReward', [REWARD_EPOCH, `${MN1}00`]],
    ['nat_getValidatorReward', [REWARD_EPOCH, MN1, VOTER]],
    ['nat_getVoterReward', [REWARD_EPOCH, MN1]],
    ['nat_getVoterReward', [REWARD_EPOCH, MN1, 42]],
    ['nat_getVoterReward', [{}, MN1, VOTER]],
  ];
  for (const [method, params] of invalid) {
    test(`${method} with params ${JSON.stringify(params)} is -32602 and reaches no node`, async () => {
      await assert.rejects(nat(method, params), (err) => {
        assert.ok(err instanceof InvalidParamsError, String(err));
        assert.equal(err.code, -32602);
        assert.match(err.message, new RegExp(method));
        return true;
      });
      assert.deepEqual(node.logWithoutProbes(), []);
    });
  }

  test('a method missing from the table is -32601 and reaches no node', async () => {
    await assert.rejects(nat('nat_getSomethingElse', []), MethodNotSupportedError);
    await assert.rejects(callNativeMethod('nat_getCandidates', ['latest'], {}, call), MethodNotSupportedError);
    await assert.rejects(nat('toString', []), MethodNotSupportedError);
    assert.deepEqual(node.logWithoutProbes(), []);
  });

  test('the node method comes from the table, and a node error on it reaches the client unchanged with HTTP 200', async () => {
    const table = { ...TABLE, nat_getMasternodes: 'XDPoS_getMasternodesByNumberV9' };
    await assert.rejects(
      callNativeMethod('nat_getMasternodes', ['latest'], table, lossless),
      clientSees(200, { code: -32601, message: 'the method XDPoS_getMasternodesByNumberV9 does not exist/is not available' }),
    );
    assert.deepEqual(
      node.logWithoutProbes().map((c) => c.method),
      ['XDPoS_getMasternodesByNumberV9'],
    );
  });

  test('an operator-added nat_* mapping is passed through unchanged', async () => {
    const table = { ...TABLE, nat_getRawCandidates: 'eth_getCandidates' };
    const raw = (await callNativeMethod('nat_getRawCandidates', ['latest'], table, call)) as {
      candidates: Record<string, unknown>;
    };
    assert.ok(Object.keys(raw.candidates).every((k) => k.startsWith('xdc')));
    assert.deepEqual(node.logWithoutProbes(), [{ method: 'eth_getCandidates', params: ['latest'] }]);
  });

  test('a node error keeps its code, message and data as the node wrote them', async () => {
    const error = { code: 3, message: 'execution reverted: epoch locked', data: { reason: ['locked', 12], at: '0x1' } };
    node.setRaw('XDPoS_getMasternodesByNumber', JSON.stringify({ jsonrpc: '2.0', id: 1, error }));
    try {
      await assert.rejects(nat('nat_getMasternodes', ['latest'], lossless), clientSees(200, error));
    } finally {
      node.setRaw('XDPoS_getMasternodesByNumber', null);
    }
  });

  test('an answer with neither result nor error is -32000 with HTTP 502', async () => {
    node.setRaw('XDPoS_getMasternodesByNumber', '{"jsonrpc":"2.0","id":1}');
    try {
      await assert.rejects(nat('nat_getMasternodes', ['latest'], lossless), clientSees(502, { code: -32000, message: 'native node sent an invalid answer' }));
    } finally {
      node.setRaw('XDPoS_getMasternodesByNumber', null);
    }
  });

  test('no node answering rejects with the pool NoUpstreamError, unchanged: -32000 with HTTP 502', async () => {
    const dead = new UpstreamPool({
      network: 'native-testnet',
      upstreams: [{ http: 'http://127.0.0.1:1' }],
      requestTimeoutMs: 500,
      totalTimeoutMs: 1_000,
    });
    try {
      const vias: NodeCall[] = [(m, p) => dead.request(m, p), nodeCallFromPool(dead)];
      for (const via of vias) {
        await assert.rejects(callNativeMethod('nat_getMasternodes', [], TABLE, via), (err) => {
          assert.ok(err instanceof NoUpstreamError, String(err));
          return clientSees(502, { code: -32000, message: 'Upstream RPC error: no node could answer' })(err);
        });
      }
    } finally {
      await dead.close();
    }
  });

  test('every method of the shipped table is documented', () => {
    for (const method of Object.keys(TABLE)) {
      const doc = NATIVE_METHOD_DOCS[method];
      assert.ok(doc, `${method} has no entry in NATIVE_METHOD_DOCS`);
      assert.ok(doc.params && doc.result && doc.description);
    }
  });
});

describe('through the gateway: HTTP status of each answer (C22, C25)', () => {
  interface Reply {
    id: unknown;
    result?: unknown;
    error?: { code: number; message: string; data?: unknown };
  }
  let app: TestApp;
  let gwNode: FakeNode;
  let gwKey: string;

  before(async () => {
    gwNode = await startFakeNode({ native: true });
    app = await startTestApp({
      // native-testnet: a reachable native node; native-mainnet: nothing listening.
      env: { UPSTREAM_NATIVE_TESTNET: gwNode.url, UPSTREAM_NATIVE_MAINNET: 'http://127.0.0.1:1' },
    });
    gwKey = (await createKey(app.app, { networks: ['native-testnet', 'native-mainnet'] })).key;
  });

  after(async () => {
    await app?.close();
    await gwNode?.close();
  });

  const rpc = (id: unknown, method: string, params: unknown[]) => ({ jsonrpc: '2.0', id, method, params });
  async function post<J>(network: string, body: unknown): Promise<{ status: number; json: J }> {
    const res = await app.app.inject({ method: 'POST', url: `/v1/${network}/${gwKey}`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    return { status: res.statusCode, json: res.json<J>() };
  }

  test("a node error on a nat_* call is answered 200 with the node's own code and message", async () => {
    const res = await post<Reply>('native-testnet', rpc(1, 'nat_getValidatorReward', [999_999, MN1]));
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.error, { code: -32000, message: 'epoch 999999 is not reached yet' });
    const error = { code: -32602, message: 'invalid argument 0: hex number with leading zero digits', data: 'node data' };
    gwNode.setRaw('XDPoS_getMasternodesByNumber', JSON.stringify({ jsonrpc: '2.0', id: 1, error }));
    try {
      const own = await post<Reply>('native-testnet', rpc('m', 'nat_getMasternodes', ['latest']));
      assert.equal(own.status, 200);
      assert.deepEqual(own.json, { jsonrpc: '2.0', id: 'm', error });
    } finally {
      gwNode.setRaw('XDPoS_getMasternodesByNumber', null);
    }
  });

  test('the same node error in a batch is the same error object, the batch 200', async () => {
    const res = await post<Reply[]>('native-testnet', [
      rpc('a', 'nat_getValidatorReward', [999_999, MN1]),
      rpc('b', 'nat_getVoterReward', [REWARD_EPOCH, MN1, VOTER]),
      rpc('c', 'nat_getValidatorReward', [EPOCH_WITHOUT_REWARDS, MN1]),
    ]);
    assert.equal(res.status, 200);
    const [a, b, c] = res.json;
    assert.deepEqual(a, { jsonrpc: '2.0', id: 'a', error: { code: -32000, message: 'epoch 999999 is not reached yet' } });
    assert.equal(b?.result, '1968750000000000000123');
    assert.equal(c?.error?.code, -32000);
    assert.match(c?.error?.message ?? '', new RegExp(`^no reward record for epoch ${EPOCH_WITHOUT_REWARDS}`));
  });

  test('an epoch without a reward record, and a block the node cannot find, are -32000 with HTTP 200', async () => {
    const rewards = await post<Reply>('native-testnet', rpc(1, 'nat_getValidatorReward', [EPOCH_WITHOUT_REWARDS, MN1]));
    assert.equal(rewards.status, 200);
    assert.equal(rewards.json.error?.code, -32000);
    assert.match(rewards.json.error?.message ?? '', /^no reward record for epoch \d+: .*--store-reward/);
    gwNode.setBlockError(true);
    try {
      const block = await post<Reply>('native-testnet', rpc(1, 'nat_getBlockByNumber', [999999999]));
      assert.equal(block.status, 200);
      assert.deepEqual(block.json.error, { code: -32000, message: 'can not find block from this number', data: { method: 'XDPoS_getV2BlockByNumber' } });
    } finally {
      gwNode.setBlockError(false);
    }
  });

  test('a node that cannot be reached is still -32000 with HTTP 502', async () => {
    const res = await post<Reply>('native-mainnet', rpc(1, 'nat_getMasternodes', ['latest']));
    assert.equal(res.status, 502);
    assert.equal(res.json.error?.code, -32000);
    assert.match(res.json.error?.message ?? '', /no node could answer/);
    const batch = await post<Reply[]>('native-mainnet', [rpc('x', 'nat_getMasternodes', ['latest'])]);
    assert.equal(batch.json[0]?.error?.code, -32000);
  });
});
