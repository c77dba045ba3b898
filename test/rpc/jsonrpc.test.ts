import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, REWARD_EPOCH, rawId, startFakeNode, topLevel } from '../support/fake-node.ts';

// JSON-RPC handling of the gateway itself (C22–C25), against fake nodes: no anvil needed.
const ADMIN = 'admin-token-jsonrpc-tests-0123456789';
const ADDRESS = '0x00000000000000000000000000000000000000aa';
const MN1 = '0x6ccd5f2bd3e1a9f2c5ec7a06aa1c8b2bb5a5e8c1';
const VOTER = '0xa5e0c7b2d4f6a8c1e3b5d7f9a2c4e6b8d0f1a3c5';

/** A JSON-RPC error object (C22). */
interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}
/** What the fake nodes answer as result: the call they received. */
interface Echo {
  method: string;
  params: unknown[];
}
/**
 * A JSON-RPC answer with the members these tests read, its result read as `R`: whether it
 * carries a result or an error is what each test asserts.
 */
interface RpcAnswer<R = Echo> {
  jsonrpc: string;
  id: unknown;
  result: R;
  error: RpcError;
}
interface Answer<J> {
  status: number;
  headers: Headers;
  text: string;
  bytes: Buffer;
  /** The body parsed (undefined when it is not JSON), read as `J`. */
  json: J;
}

let t: TestApp;
/** native-mainnet: counts calls, answers set bytes. */
let fake: FakeNode;
/** ethereum: echoes ids as raw bytes, answers batches reversed. */
let echo: FakeNode;
/** polygon: two nodes that, like geth and anvil, answer a notification with no body. */
let silentA: FakeNode;
let silentB: FakeNode;
/** native-testnet: the fake XDPoS node. */
let native: FakeNode;
let key: string;
let proKey: string;
let freeKey: string;

before(async () => {
  fake = await startFakeNode();
  echo = await startFakeNode({ batchOrder: 'reversed' });
  silentA = await startFakeNode({ silentNotifications: 204 });
  silentB = await startFakeNode({ silentNotifications: 204 });
  native = await startFakeNode({ native: true });
  t = await startTestApp({
    listen: true,
    env: {
      ADMIN_TOKEN: ADMIN,
      UPSTREAM_NATIVE_MAINNET: fake.url,
      UPSTREAM_NATIVE_TESTNET: native.url,
      UPSTREAM_ETHEREUM: echo.url,
      UPSTREAM_POLYGON: `${silentA.url},${silentB.url}`,
    },
    overrides: { methods: { planExtras: { pro: ['debug_traceTransaction'] } } },
  });
  // Enterprise: no rate limit gets in the way of the many calls below (C9).
  const main = await createKey(t.app, { networks: ['native-mainnet', 'native-testnet', 'ethereum', 'polygon'] });
  await setTier(t.app, main.user.id, 'enterprise', ADMIN);
  key = main.key;
  const pro = await createKey(t.app, { networks: ['native-mainnet'] });
  await setTier(t.app, pro.user.id, 'pro', ADMIN);
  proKey = pro.key;
  freeKey = (await createKey(t.app, { networks: ['native-mainnet'] })).key;
});

after(async () => {
  await t?.close();
  await Promise.all([fake, echo, silentA, silentB, native].map((f) => f?.close()));
});

const at = (network: string, k = key) => `/v1/${network}/${k}`;

/** POSTs a body (objects are serialised) with real fetch; the answer as bytes, text and JSON. */
async function post<J = RpcAnswer>(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer<J>> {
  const res = await fetch(t.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, bytes, json: json as J };
}

const call = (method: string, id: unknown = 1, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const notification = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', method, params });

describe('single calls (C22, C23)', () => {
  test("the node's answer comes back byte for byte with HTTP 200", async () => {
    const raw = '{ "result" :"0xde0b6b3a7640000",\n  "id":1 ,"jsonrpc": "2.0"   , "extra" : [ 1,2 ] }';
    fake.setRaw('eth_getBalance', raw);
    try {
      const res = await post(at('native-mainnet'), call('eth_getBalance', 1, [ADDRESS, 'latest']));
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      assert.ok(res.bytes.equals(Buffer.from(raw)), `got ${res.text}`);
    } finally {
      fake.setRaw('eth_getBalance', null);
    }
  });

  test("a node's own error (a revert) passes through unchanged with HTTP 200", async () => {
    const raw = '{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}';
    fake.setRaw('eth_call', raw);
    try {
      const res = await post(at('native-mainnet'), call('eth_call', 1, [{ to: ADDRESS, data: '0x' }, 'latest']));
      assert.equal(res.status, 200);
      assert.equal(res.text, raw);
    } finally {
      fake.setRaw('eth_call', null);
    }
  });

  // Raw id texts: the node echoes them as bytes, so any change is the gateway's.
  const ids = ['0', '-7', '42', '1.5', '9007199254740993', '12345678901234567890', '"abc"', '""', '"héllo ✓ 🚀"', '"\\u00e9t\\u00e9"', 'null'];

  test('the id comes back exactly as sent: numbers, large numbers, strings (unicode too), null', async () => {
    for (const id of ids) {
      const res = await post(at('ethereum'), `{"jsonrpc":"2.0","id":${id},"method":"eth_chainId","params":[]}`);
      assert.equal(res.status, 200, id);
      assert.equal(rawId(res.text), id, `id ${id}: ${res.text}`);
      assert.deepEqual(res.json.result, { method: 'eth_chainId', params: [] });
    }
  });

  test('an error the gateway answers itself carries the request id (number, string, unicode, null)', async () => {
    for (const id of [0, -7, 42, 1.5, 'abc', '', 'héllo ✓ 🚀', null]) {
      const res = await post(at('ethereum'), call('eth_accounts', id));
      assert.equal(res.status, 200);
      assert.equal(res.json.error.code, -32601);
      assert.ok(Object.hasOwn(res.json, 'id'));
      assert.equal(res.json.id, id);
    }
  });

  test(
    'an error the gateway answers itself keeps an id beyond 2^53 digit for digit',
    async () => {
      const res = await post(at('ethereum'), '{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_accounts","params":[]}');
      assert.equal(res.json.error.code, -32601);
      assert.equal(rawId(res.text), '12345678901234567890');
    },
  );
});

describe('notifications (C23)', () => {
  test('a single notification gets 204 with an empty body, and still reaches the node', async () => {
    const before = fake.callCount('eth_gasPrice');
    const res = await post(at('native-mainnet'), notification('eth_gasPrice'));
    assert.equal(res.status, 204);
    assert.equal(res.bytes.length, 0);
    assert.equal(fake.callCount('eth_gasPrice'), before + 1);
  });

  test('notifications in a batch are left out of the answer array and still reach the node', async () => {
    const before = fake.callCount('eth_maxPriorityFeePerGas');
    const res = await post<RpcAnswer[]>(at('native-mainnet'), [
      call('eth_chainId', 1),
      notification('eth_maxPriorityFeePerGas'),
      call('net_version', 2),
      notification('eth_maxPriorityFeePerGas'),
    ]);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.json.map((a) => [a.id, a.result.method]),
      [
        [1, 'eth_chainId'],
        [2, 'net_version'],
      ],
    );
    assert.equal(fake.callCount('eth_maxPriorityFeePerGas'), before + 2);
  });

  test('a batch of notifications only gets 204 with an empty body', async () => {
    const before = fake.callCount('eth_syncing');
    const res = await post(at('native-mainnet'), [notification('eth_syncing'), notification('eth_syncing')]);
    assert.equal(res.status, 204);
    assert.equal(res.bytes.length, 0);
    assert.equal(fake.callCount('eth_syncing'), before + 2);
  });

  test('a refused notification gets no answer and does not reach the node', async () => {
    const res = await post(at('native-mainnet'), notification('eth_sendTransaction', [{}]));
    assert.equal(res.status, 204);
    assert.equal(res.bytes.length, 0);
    assert.equal(fake.callCount('eth_sendTransaction'), 0);
  });

  test(
    'a notification the node answers with no body (as geth and anvil do) goes to one node only and leaves it healthy',
    async () => {
      const res = await post(at('polygon'), notification('eth_getBlockByNumber', ['latest', false]));
      assert.equal(res.status, 204);
      const sent = silentA.callCount('eth_getBlockByNumber') + silentB.callCount('eth_getBlockByNumber');
      assert.equal(sent, 1, 'sent to exactly one node');
      assert.ok(
        t.app.parts.upstreams.pool('polygon').health().every((u) => u.healthy),
        JSON.stringify(t.app.parts.upstreams.pool('polygon').health()),
      );
    },
  );
});

describe('batches (C23)', () => {
  test('answered as an array in request order with the ids as sent, though the node answers in reverse', async () => {
    const batchIds: unknown[] = [1, 'two', 3, 'héllo', 0, null];
    const res = await post<RpcAnswer[]>(
      at('ethereum'),
      batchIds.map((id, i) => call('eth_getBalance', id, [ADDRESS, `0x${i}`])),
    );
    assert.equal(res.status, 200);
    assert.ok(Array.isArray(res.json));
    assert.deepEqual(
      res.json.map((a) => a.id),
      batchIds,
    );
    assert.deepEqual(
      res.json.map((a) => a.result.params[1]),
      batchIds.map((_, i) => `0x${i}`),
    );
    // One batch reached the node, which answers batches in reverse order.
    const last = echo.bodies.at(-1) ?? '';
    assert.equal(topLevel(last).kind, 'array');
    assert.equal(topLevel(last).parts.length, batchIds.length);
  });

  test(
    'two calls with the same id each get their own answer when the node reorders',
    async () => {
      const res = await post<RpcAnswer[]>(at('ethereum'), [call('eth_getBalance', 7, [ADDRESS, '0xa']), call('eth_getBalance', 7, [ADDRESS, '0xb'])]);
      assert.deepEqual(
        res.json.map((a) => a.result.params[1]),
        ['0xa', '0xb'],
      );
    },
  );

  test(
    'ids beyond 2^53 in a batch come back digit for digit',
    async () => {
      const res = await post(at('ethereum'), '[{"jsonrpc":"2.0","id":12345678901234567890,"method":"eth_chainId","params":[]}]');
      const [item] = topLevel(res.text).parts;
      assert.equal(rawId(item?.raw ?? ''), '12345678901234567890');
    },
  );

  test('valid, invalid and refused items each get their own answer, in order', async () => {
    const res = await post<RpcAnswer[]>(at('native-mainnet'), [
      call('eth_chainId', 1),
      { jsonrpc: '1.0', id: 2, method: 'eth_chainId' },
      call('eth_accounts', 3),
      42,
      notification('eth_chainId'),
      { jsonrpc: '2.0', id: { no: 1 }, method: 'eth_chainId' },
      call('foo_bar', 'six'),
      call('net_version', 7),
    ]);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.json.map((a) => [a.id, a.error?.code ?? a.result.method]),
      [
        [1, 'eth_chainId'],
        [2, -32600],
        [3, -32601],
        [null, -32600],
        [null, -32600],
        ['six', -32601],
        [7, 'net_version'],
      ],
    );
    assert.equal(fake.callCount('eth_accounts'), 0);
  });

  test('an empty batch is one -32600 error object, not an array, with HTTP 400', async () => {
    const res = await post(at('native-mainnet'), '[]');
    assert.equal(res.status, 400);
    assert.ok(!Array.isArray(res.json));
    assert.equal(res.json.jsonrpc, '2.0');
    assert.equal(res.json.id, null);
    assert.equal(res.json.error.code, -32600);
  });

  test('100 items are answered; 101 are one -32600 error with HTTP 400 and reach no node', async () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => call('eth_getTransactionCount', i, [ADDRESS, 'latest']));
    const before = fake.callCount('eth_getTransactionCount');
    const ok = await post<RpcAnswer[]>(at('native-mainnet'), items(100));
    assert.equal(ok.status, 200);
    assert.equal(ok.json.length, 100);
    assert.deepEqual(
      ok.json.map((a) => a.id),
      [...Array(100).keys()],
    );
    assert.equal(fake.callCount('eth_getTransactionCount'), before + 100);

    const tooMany = await post(at('native-mainnet'), items(101));
    assert.equal(tooMany.status, 400);
    assert.ok(!Array.isArray(tooMany.json));
    assert.equal(tooMany.json.error.code, -32600);
    assert.equal(tooMany.json.id, null);
    assert.equal(fake.callCount('eth_getTransactionCount'), before + 100);
  });
});

describe('malformed requests (C22)', () => {
  test('a body that is not JSON is -32700 with HTTP 400 and id null', async () => {
    for (const body of ['{', '[1,2', 'not json', '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"', '']) {
      const res = await post(at('native-mainnet'), body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json.error.code, -32700, JSON.stringify(body));
      assert.equal(res.json.id, null);
      assert.equal(res.json.jsonrpc, '2.0');
    }
  });

  test('a JSON body is accepted whatever its content type (text/plain, none)', async () => {
    const plain = await post(at('native-mainnet'), call('eth_chainId', 5), { 'content-type': 'text/plain' });
    assert.equal(plain.status, 200);
    assert.equal(plain.json.id, 5);
    const res = await fetch(`${t.url}${at('native-mainnet')}`, { method: 'POST', body: new Blob([JSON.stringify(call('eth_chainId', 6))]) });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).id, 6);
  });

  test('invalid requests are -32600 with HTTP 400, with the id when it was valid, else null', async () => {
    const cases: Array<[unknown, unknown]> = [
      [{ id: 1, method: 'eth_chainId', params: [] }, 1], // jsonrpc missing
      [{ jsonrpc: '1.0', id: 'a', method: 'eth_chainId', params: [] }, 'a'],
      [{ jsonrpc: 2, id: 2, method: 'eth_chainId', params: [] }, 2],
      [{ jsonrpc: '2.0', id: 3, method: 42, params: [] }, 3],
      [{ jsonrpc: '2.0', id: 4, params: [] }, 4], // method missing
      [{ jsonrpc: '2.0', id: 5, method: 'eth_chainId', params: 7 }, 5],
      [{ jsonrpc: '2.0', id: 6, method: 'eth_chainId', params: 'x' }, 6],
      [{ jsonrpc: '2.0', id: { a: 1 }, method: 'eth_chainId', params: [] }, null],
      [{ jsonrpc: '2.0', id: [1], method: 'eth_chainId', params: [] }, null],
      [{ jsonrpc: '2.0', id: true, method: 'eth_chainId', params: [] }, null],
      ['"eth_chainId"', null], // a JSON string, not an object
      [7, null],
      [null, null],
    ];
    for (const [body, id] of cases) {
      const res = await post(at('native-mainnet'), body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json.error.code, -32600, JSON.stringify(body));
      assert.equal(res.json.id, id, JSON.stringify(body));
    }
    assert.equal(fake.callCount('(invalid)'), 0);
  });

  test('a body over 1 MiB is 413 with a JSON-RPC error body', async () => {
    const before = fake.callCount('eth_call');
    const res = await post(at('native-mainnet'), call('eth_call', 1, [{ data: `0x${'ab'.repeat(600_000)}` }, 'latest']));
    assert.equal(res.status, 413);
    assert.equal(res.json.jsonrpc, '2.0');
    assert.equal(typeof res.json.error.code, 'number');
    assert.match(res.json.error.message, /larger than 1048576 bytes/);
    assert.equal(fake.callCount('eth_call'), before);
  });
});

describe('the body limit is configurable (C23)', () => {
  let small: TestApp;
  let smallKey: string;
  before(async () => {
    small = await startTestApp({ env: { UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { server: { bodyLimitBytes: 4096 } } });
    smallKey = (await createKey(small.app)).key;
  });
  after(() => small?.close());

  /** A call whose serialised body is exactly `size` bytes. */
  const sized = (size: number) => {
    const base = JSON.stringify(call('web3_sha3', 1, ['0x']));
    return JSON.stringify(call('web3_sha3', 1, [`0x${'0'.repeat(size - base.length)}`]));
  };

  test('a body of exactly the limit passes, one byte more is 413 with a JSON-RPC error', async () => {
    const before = fake.callCount('web3_sha3');
    const url = `/v1/native-mainnet/${smallKey}`;
    const headers = { 'content-type': 'application/json' };
    const ok = await small.app.inject({ method: 'POST', url, headers, payload: sized(4096) });
    assert.equal(sized(4096).length, 4096);
    assert.equal(ok.statusCode, 200);
    assert.equal(fake.callCount('web3_sha3'), before + 1);

    const big = await small.app.inject({ method: 'POST', url, headers, payload: sized(4097) });
    assert.equal(big.statusCode, 413);
    assert.match(big.headers['content-type'] as string, /application\/json/);
    const body = big.json();
    assert.equal(body.jsonrpc, '2.0');
    assert.equal(body.id, null);
    assert.match(body.error.message, /4096 bytes/);
    assert.equal(fake.callCount('web3_sha3'), before + 1);
  });
});

describe('method policy (C24)', () => {
  const refusals: Array<[string, RegExp, string?]> = [
    ['eth_accounts', /account held by the node/],
    ['eth_sign', /account held by the node/],
    ['eth_signTransaction', /account held by the node/],
    ['eth_sendTransaction', /account held by the node/],
    ['personal_unlockAccount', /account held by the node/],
    ['admin_peers', /controls the node/],
    ['miner_start', /controls the node/],
    ['txpool_content', /not enabled/],
    ['debug_traceTransaction', /not enabled for this plan; the [a-z, ]+ plans? allows? it/],
    ['trace_block', /not enabled for this plan/],
    ['anvil_mine', /devnet control/],
    ['hardhat_mine', /devnet control/],
    ['evm_snapshot', /devnet control/],
    ['eth_subscribe', /WebSocket.*\/ws/],
    ['eth_unsubscribe', /WebSocket.*\/ws/],
    ['nat_getCandidates', /only on the native networks/, 'ethereum'],
    ['foo_bar', /not supported/],
    ['nat_noSuchThing', /not a supported native method/],
  ];

  test('each refused method is -32601 with HTTP 200, a message saying why, and never reaches the node', async () => {
    for (const [method, why, network = 'native-mainnet'] of refusals) {
      const res = await post(at(network), call(method, `id-${method}`, ['latest']));
      assert.equal(res.status, 200, method);
      assert.equal(res.json.id, `id-${method}`);
      assert.equal(res.json.error.code, -32601, method);
      assert.match(res.json.error.message, why, method);
      assert.ok(res.json.error.message.includes(method), `the message names ${method}`);
    }
    for (const [method] of refusals) {
      assert.equal(fake.callCount(method) + echo.callCount(method), 0, `${method} reached a node`);
    }
  });

  test('refused methods in a batch are refused item by item and never reach the node', async () => {
    const res = await post<RpcAnswer[]>(at('native-mainnet'), [call('eth_sign', 1, [ADDRESS, '0x00']), call('eth_chainId', 2), call('anvil_mine', 3)]);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.json.map((a) => a.error?.code ?? a.result.method),
      [-32601, 'eth_chainId', -32601],
    );
    assert.equal(fake.callCount('eth_sign') + fake.callCount('anvil_mine'), 0);
  });

  test('the public endpoint refuses the same methods (C18)', async () => {
    const res = await post('/public/main', call('eth_sendTransaction', 9, [{}]));
    assert.equal(res.status, 200);
    assert.equal(res.json.error.code, -32601);
    assert.equal(res.json.id, 9);
    assert.equal(fake.callCount('eth_sendTransaction'), 0);
  });

  test("debug_* is allowed when the plan's methods.planExtras lists it (pro here), refused for other plans", async () => {
    const before = fake.callCount('debug_traceTransaction');
    const pro = await post(at('native-mainnet', proKey), call('debug_traceTransaction', 1, [`0x${'11'.repeat(32)}`]));
    assert.equal(pro.status, 200);
    assert.equal(pro.json.result.method, 'debug_traceTransaction');
    assert.equal(fake.callCount('debug_traceTransaction'), before + 1);

    const free = await post(at('native-mainnet', freeKey), call('debug_traceTransaction', 1, [`0x${'11'.repeat(32)}`]));
    assert.equal(free.json.error.code, -32601);
    assert.equal(fake.callCount('debug_traceTransaction'), before + 1);
  });

  test('planExtras never opens the devnet control or node-account methods', async () => {
    for (const method of ['anvil_mine', 'eth_sendTransaction', 'txpool_content']) {
      const res = await post(at('native-mainnet', proKey), call(method));
      assert.equal(res.json.error.code, -32601, method);
    }
  });
});

describe('nat_* through the gateway (C24, C25)', () => {
  /** What the nat_* methods answer, with the members these tests read (C25). */
  interface Block {
    miner: string;
    number: number;
  }
  interface Candidates {
    candidates: Record<string, { capacity: string; status: string }>;
  }
  interface Masternodes {
    masternodesLen: number;
    masternodes: string[];
  }
  const nat = <R = unknown>(method: string, params: unknown[], id: unknown = 1) => post<RpcAnswer<R>>(at('native-testnet'), call(method, id, params));

  test('nat_getBlockByNumber answers the translated block', async () => {
    const res = await nat<Block>('nat_getBlockByNumber', ['latest']);
    assert.equal(res.status, 200);
    assert.equal(res.json.id, 1);
    assert.equal(res.json.result.miner, MN1);
    assert.equal(res.json.result.number, 80371234);
  });

  test('nat_getCandidates answers 0x addresses and exact stakes as decimal strings', async () => {
    const res = await nat<Candidates>('nat_getCandidates', ['latest']);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.result.candidates[MN1], { capacity: '10000000000000000000000000', status: 'MASTERNODE' });
    assert.equal(res.json.result.candidates['0x9d7e2f0a1c4b6e8d3f5a7c9e1b3d5f7a9c2e4f60']?.capacity, '12345678901234567890123456');
  });

  test('nat_getMasternodes answers camelCase keys and 0x addresses', async () => {
    const res = await nat<Masternodes>('nat_getMasternodes', ['latest']);
    assert.equal(res.status, 200);
    assert.equal(res.json.result.masternodesLen, 2);
    assert.equal(res.json.result.masternodes[0], MN1);
  });

  test('nat_getValidatorReward and nat_getVoterReward answer exact wei amounts', async () => {
    const validator = await nat('nat_getValidatorReward', [REWARD_EPOCH, `xdc${MN1.slice(2)}`]);
    assert.deepEqual(validator.json.result, { sign: 225, reward: '3281250000000000000123' });
    const voter = await nat('nat_getVoterReward', [REWARD_EPOCH, MN1, VOTER]);
    assert.equal(voter.json.result, '1968750000000000000123');
  });

  test('the node sees its own method names, never nat_*', async () => {
    assert.ok(native.logWithoutProbes().length > 0);
    assert.ok(native.logWithoutProbes().every((c) => !c.method.startsWith('nat_')));
  });

  test('nat_* calls mixed with a standard method in a batch are each answered, in order', async () => {
    const res = await post<[RpcAnswer<Candidates>, RpcAnswer<string>, RpcAnswer<Masternodes>, RpcAnswer<string>]>(at('native-testnet'), [
      call('nat_getCandidates', 'c', ['latest']),
      call('eth_blockNumber', 'b'),
      call('nat_getMasternodes', 'm', ['latest']),
      call('nat_getVoterReward', 'v', [REWARD_EPOCH, MN1, VOTER]),
    ]);
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.json.map((a) => a.id),
      ['c', 'b', 'm', 'v'],
    );
    const [c, b, m, v] = res.json;
    assert.equal(c.result.candidates[MN1]?.status, 'MASTERNODE');
    assert.equal(b.result, '0x4ca5e22');
    assert.equal(m.result.masternodes[1], '0x1f4b7d2e9a0c3f6b8d1e4a7c0f3b6d9e2a5c8f13');
    assert.equal(v.result, '1968750000000000000123');
  });

  test('bad nat_* params are -32602 before any node call', async () => {
    const before = native.logWithoutProbes().length;
    const res = await nat('nat_getValidatorReward', ['soon', 'nobody']);
    assert.equal(res.status, 200);
    assert.equal(res.json.error.code, -32602);
    assert.equal(native.logWithoutProbes().length, before);
  });
});

describe('CORS on the RPC addresses', () => {
  for (const path of ['/v1/native-mainnet/KEY', '/rpc/main/evm/50', '/public/main']) {
    test(`an OPTIONS preflight on ${path} answers 204 allowing POST and X-API-Key from any origin`, async () => {
      const res = await fetch(t.url + path, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://dapp.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,x-api-key',
        },
      });
      assert.equal(res.status, 204);
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.match(res.headers.get('access-control-allow-methods') ?? '', /\bPOST\b/);
      assert.match(res.headers.get('access-control-allow-headers') ?? '', /x-api-key/i);
      assert.match(res.headers.get('access-control-allow-headers') ?? '', /content-type/i);
      assert.equal((await res.arrayBuffer()).byteLength, 0);
    });
  }

  test('a POST answer, success or error, carries access-control-allow-origin and exposes the rate-limit headers', async () => {
    const origin = { origin: 'https://dapp.example' };
    const ok = await post(at('native-mainnet'), call('eth_chainId'), origin);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), '*');
    assert.match(ok.headers.get('access-control-expose-headers') ?? '', /X-RateLimit-Remaining/);
    const viaHeader = await post('/rpc/main/evm/50', call('eth_chainId'), { ...origin, 'x-api-key': key });
    assert.equal(viaHeader.status, 200);
    assert.equal(viaHeader.headers.get('access-control-allow-origin'), '*');
    const denied = await post('/rpc/main/evm/50', call('eth_chainId'), origin);
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), '*');
  });
});
