import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, beforeEach, describe, test } from 'node:test';
import { InvalidParamsError, MethodNotSupportedError, UpstreamError } from '../../src/errors/rpc.ts';
import {
  callNativeMethod,
  NATIVE_METHOD_DOCS,
  type NodeCall,
  nodeCallFromPool,
  parseJsonKeepingBigIntegers,
} from '../../src/rpc/dispatch/native.ts';
import { NoUpstreamError, UpstreamPool } from '../../src/upstreams/http/pool.ts';
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

/** Asserts a -32000 carrying the node's message, as the client will see it. */
function upstreamErrorWith(message: RegExp): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof UpstreamError, `expected UpstreamError, got ${String(err)}`);
    assert.equal(err.code, -32000);
    assert.match(err.message, message);
    return true;
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

  test('a block answered with a non-empty Error becomes -32000 with the node message in data', async () => {
    node.setBlockError(true);
    await assert.rejects(nat('nat_getBlockByNumber', [999999999]), (err) => {
      upstreamErrorWith(/can not find block from this number/)(err);
      assert.deepEqual((err as UpstreamError).toJSON().data, {
        method: 'XDPoS_getV2BlockByNumber',
        message: 'can not find block from this number',
      });
      return true;
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

  test('an Error set by the node ({} once Go has marshalled it) becomes -32000', async () => {
    node.setMasternodesError(true);
    await assert.rejects(nat('nat_getMasternodes', ['latest']), upstreamErrorWith(/XDPoS_getMasternodesByNumber/));
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

  test('an epoch the node does not know is -32000 with the node message, and no reward is read', async () => {
    await assert.rejects(
      nat('nat_getValidatorReward', [999_999, MN1]),
      upstreamErrorWith(/XDPoS_getBlockInfoByEpochNum.*epoch 999999 is not reached yet/),
    );
    assert.deepEqual(
      node.logWithoutProbes().map((c) => c.method),
      ['XDPoS_getBlockInfoByEpochNum'],
    );
  });

  test('an epoch whose block has no reward record on the node is -32000, not a null reward', async () => {
    await assert.rejects(
      nat('nat_getValidatorReward', [EPOCH_WITHOUT_REWARDS, MN1]),
      upstreamErrorWith(new RegExp(`no reward record for epoch ${EPOCH_WITHOUT_REWARDS}`)),
    );
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

  test('the node method comes from the table, and a node error on it is -32000 with the node code', async () => {
    const table = { ...TABLE, nat_getMasternodes: 'XDPoS_getMasternodesByNumberV9' };
    await assert.rejects(callNativeMethod('nat_getMasternodes', ['latest'], table, call), (err) => {
      upstreamErrorWith(/XDPoS_getMasternodesByNumberV9/)(err);
      assert.equal(((err as UpstreamError).details as { code: number }).code, -32601);
      return true;
    });
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

  test('no node answering rejects with the pool NoUpstreamError, unchanged', async () => {
    const dead = new UpstreamPool({
      network: 'native-testnet',
      upstreams: [{ http: 'http://127.0.0.1:1' }],
      requestTimeoutMs: 500,
      totalTimeoutMs: 1_000,
    });
    try {
      await assert.rejects(
        callNativeMethod('nat_getMasternodes', [], TABLE, (m, p) => dead.request(m, p)),
        NoUpstreamError,
      );
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
