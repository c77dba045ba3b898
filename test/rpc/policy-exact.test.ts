// The method policy judges exactly the call the node will execute (C24). A node written in Go
// (geth, XDC) matches member names case-insensitively and keeps the last of a repeated one, so a
// second, differently cased "Method" would run a method the gateway never judged: a call's members
// must be exactly jsonrpc, method, params and id, each once and written exactly (-32600 otherwise).
// And methods are an exact allowlist: a node's own extensions (anvil's eth_sendUnsignedTransaction
// moves coins from dev accounts) are -32601 however they are named. Real anvil chain, behind a
// recorder that keeps every body the gateway sends it.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { createKey, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type Client, connect, withUpstreams, wsAddress } from '../support/ws.ts';

const ADMIN = 'admin-token-policy-exact-0123456789';
const RECIPIENT = '0x00000000000000000000000000000000000000bb';

/** A JSON-RPC error object (C22). */
interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}
/**
 * A JSON-RPC answer with the members these tests read (the results read here are quantities and
 * hashes: strings); whether it carries a result or an error is what they assert.
 */
interface RpcAnswer {
  jsonrpc: string;
  id: unknown;
  result: string;
  error: RpcError;
}

/** An HTTP node in front of the chain that keeps every body it receives (health probes too) and the chain's answer. */
interface Recorder {
  url: string;
  exchanges: Array<{ request: string; response: Buffer }>;
  /** Whether any body that reached the node contains `text`. */
  saw(text: string): boolean;
  close(): Promise<void>;
}

async function startRecorder(target: string): Promise<Recorder> {
  const exchanges: Recorder['exchanges'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      try {
        const up = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const response = Buffer.from(await up.arrayBuffer());
        exchanges.push({ request: body.toString('utf8'), response });
        res.writeHead(up.status, { 'content-type': 'application/json' }).end(response);
      } catch {
        exchanges.push({ request: body.toString('utf8'), response: Buffer.alloc(0) });
        res.writeHead(502).end();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exchanges,
    saw: (text) => exchanges.some((e) => e.request.includes(text)),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let devnet: Devnet;
let recorder: Recorder;
let t: TestApp;
let key: string;
let proKey: string;
let chainHttp: string;

before(async () => {
  devnet = await startDevnet({ networks: [{ slug: 'native-mainnet', chainId: 50, native: true }], nativeBlockTimeSeconds: 1 });
  const chain = devnet.upstreams['native-mainnet'] as { http: string; ws: string };
  chainHttp = chain.http;
  recorder = await startRecorder(chain.http);
  t = await startTestApp({
    listen: true,
    env: { ADMIN_TOKEN: ADMIN },
    overrides: {
      networks: withUpstreams({ 'native-mainnet': [{ http: recorder.url, ws: chain.ws }] }),
      methods: { planExtras: { pro: ['debug_traceTransaction'] } },
    },
  });
  // Enterprise: no rate limit gets in the way of the many calls below (C9).
  const main = await createKey(t.app, { networks: ['native-mainnet'] });
  await setTier(t.app, main.user.id, 'enterprise', ADMIN);
  key = main.key;
  const pro = await createKey(t.app, { networks: ['native-mainnet'] });
  await setTier(t.app, pro.user.id, 'pro', ADMIN);
  proKey = pro.key;
});

after(async () => {
  await t?.close();
  await recorder?.close();
  await devnet?.stop();
});

/** POSTs a body; the answer as bytes and parsed (undefined when it is not JSON), read as `J`. */
async function post<J = RpcAnswer>(path: string, body: string): Promise<{ status: number; bytes: Buffer; json: J }> {
  const res = await fetch(t.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: res.status, bytes, json: json as J };
}

/** Asks the chain itself, past the gateway. */
async function chain(method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(chainHttp, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return ((await res.json()) as { result: unknown }).result;
}

const call = (method: string, params: unknown[], id: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
const keyPath = () => `/v1/native-mainnet/${key}`;
const ADDRESSES: Array<[string, () => string]> = [
  ['the key-in-path address', keyPath],
  ['the keyless /public/main', () => '/public/main'],
];

// Each call carries a marker in its params, so "never reached the node" is: no body with the marker.
// `member` is the name as written (escapes kept); `id`: the id answered (null when the call's id is itself in doubt).
const STRAY: Array<{ what: string; body: (marker: string) => string; member: string; id: unknown }> = [
  {
    what: 'a second, differently cased "Method"',
    body: (m) => `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","Method":"admin_addPeer","params":["${m}"]}`,
    member: 'Method',
    id: 1,
  },
  {
    what: 'an upper-case "METHOD" before "method"',
    body: (m) => `{"jsonrpc":"2.0","id":2,"METHOD":"admin_removePeer","method":"eth_chainId","params":["${m}"]}`,
    member: 'METHOD',
    id: 2,
  },
  { what: 'a second id written "ID"', body: (m) => `{"jsonrpc":"2.0","id":3,"ID":4,"method":"eth_chainId","params":["${m}"]}`, member: 'ID', id: null },
  { what: 'a "JSONRPC" member', body: (m) => `{"JSONRPC":"2.0","jsonrpc":"2.0","id":5,"method":"eth_chainId","params":["${m}"]}`, member: 'JSONRPC', id: 5 },
  { what: 'an escaped "m\\u0065thod"', body: (m) => String.raw`{"jsonrpc":"2.0","id":6,"m\u0065thod":"eth_chainId","params":["` + m + '"]}', member: String.raw`m\u0065thod`, id: 6 },
  { what: 'an escaped "\\u0069d"', body: (m) => String.raw`{"jsonrpc":"2.0","\u0069d":7,"method":"eth_chainId","params":["` + m + '"]}', member: String.raw`\u0069d`, id: null },
  {
    what: 'the same method twice, identical',
    body: (m) => `{"jsonrpc":"2.0","id":8,"method":"eth_chainId","method":"eth_chainId","params":["${m}"]}`,
    member: 'method',
    id: 8,
  },
  {
    what: 'two methods, the last one allowed',
    body: (m) => `{"jsonrpc":"2.0","id":9,"method":"admin_addPeer","method":"eth_chainId","params":["${m}"]}`,
    member: 'method',
    id: 9,
  },
  { what: 'params twice', body: (m) => `{"jsonrpc":"2.0","id":10,"method":"eth_chainId","params":[],"params":["${m}"]}`, member: 'params', id: 10 },
  { what: 'id twice', body: (m) => `{"jsonrpc":"2.0","id":11,"id":11,"method":"eth_chainId","params":["${m}"]}`, member: 'id', id: null },
  { what: 'a member JSON-RPC calls do not have', body: (m) => `{"jsonrpc":"2.0","id":12,"method":"eth_chainId","params":["${m}"],"result":"0x1"}`, member: 'result', id: 12 },
  // Go folds U+017F (long s) to "s": "paramſ" is params to geth.
  { what: 'a Unicode case variant "paramſ"', body: (m) => `{"jsonrpc":"2.0","id":13,"method":"eth_chainId","paramſ":["${m}"]}`, member: 'paramſ', id: 13 },
];

let markers = 0;
const marker = () => `stray-marker-${markers++}`;

function assertStray(answer: { id?: unknown; error?: RpcError }, c: (typeof STRAY)[number]): void {
  assert.equal(answer.error?.code, -32600, `${c.what}: ${JSON.stringify(answer)}`);
  assert.deepEqual(answer.error?.data, { member: c.member }, c.what);
  assert.ok(answer.error?.message.includes(c.member), c.what);
  assert.equal(answer.id, c.id, c.what);
}

describe('members of a call as written (C22: -32600)', () => {
  for (const [where, path] of ADDRESSES) {
    test(`on ${where}, a call with a case variant, escaped spelling, repeat or unknown member is -32600 naming it and never reaches the node`, async () => {
      for (const c of STRAY) {
        const m = marker();
        const res = await post(path(), c.body(m));
        assert.equal(res.status, 400, c.what);
        assertStray(res.json, c);
        assert.ok(!recorder.saw(m), `${c.what} reached the node`);
      }
    });
  }

  test('in a batch, each such item is -32600 in place, naming its member, and only the clean items reach the node', async () => {
    const sent = STRAY.map((c) => ({ c, m: marker() }));
    const body = `[${sent.map(({ c, m }) => c.body(m)).join(',')},{"jsonrpc":"2.0","id":"clean","method":"eth_getBalance","params":["${RECIPIENT}","pending"]}]`;
    const res = await post<RpcAnswer[]>(keyPath(), body);
    assert.equal(res.status, 200);
    assert.equal(res.json.length, STRAY.length + 1);
    sent.forEach(({ c, m }, i) => {
      assertStray(res.json[i] as RpcAnswer, c);
      assert.ok(!recorder.saw(m), `${c.what} reached the node`);
    });
    const last = res.json[STRAY.length] as RpcAnswer;
    assert.equal(last.id, 'clean');
    assert.match(last.result, /^0x/);
  });

  test('a clean call goes to the node as its own bytes and its answer comes back byte for byte', async () => {
    const body = `{ "params" : [ "${RECIPIENT}" , "pending" ] ,\n  "id" : 9007199254740993, "method":"eth_getBalance" ,"jsonrpc":"2.0" }`;
    const res = await post(keyPath(), body);
    assert.equal(res.status, 200);
    const exchange = recorder.exchanges.find((e) => e.request === body);
    assert.ok(exchange, 'the node received the exact bytes');
    assert.ok(res.bytes.equals(exchange.response), `got ${res.bytes.toString()}`);
    assert.match(res.bytes.toString(), /"id":9007199254740993,"result":"0x/);
  });

  test('members in any order, with whitespace and without params, are accepted', async () => {
    for (const body of ['{"method":"net_version","jsonrpc":"2.0","id":"a"}', '{\n\t"id" : null ,"params":null, "jsonrpc":"2.0","method":"net_version"\r\n}']) {
      const res = await post(keyPath(), body);
      assert.equal(res.status, 200, body);
      assert.equal(typeof res.json.result, 'string', body);
    }
  });
});

// Methods that only some nodes have, that act for accounts held by the node, or that control a
// devnet; and standard names written in another case.
const REFUSED: Array<[string, unknown[], RegExp]> = [
  ['eth_sendUnsignedTransaction', [{ from: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', to: RECIPIENT, value: '0xde0b6b3a7640000' }], /account held by the node/],
  ['eth_sendTransactionSync', [{ from: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', to: RECIPIENT, value: '0xde0b6b3a7640000' }], /account held by the node/],
  ['anvil_setBalance', [RECIPIENT, '0xde0b6b3a7640000'], /devnet control/],
  ['anvil_mine', ['0x1'], /devnet control/],
  ['evm_mine', [], /devnet control/],
  ['evm_increaseTime', ['0x10'], /devnet control/],
  ['hardhat_setBalance', [RECIPIENT, '0xde0b6b3a7640000'], /devnet control/],
  ['hardhat_impersonateAccount', [RECIPIENT], /devnet control/],
  ['Eth_blockNumber', [], /case-sensitive \(did you mean eth_blockNumber\?\)/],
  ['ETH_CHAINID', [], /case-sensitive \(did you mean eth_chainId\?\)/],
  ['eth_getbalance', [RECIPIENT, 'latest'], /case-sensitive \(did you mean eth_getBalance\?\)/],
  ['eth_fooBar', [], /is not supported/],
  ['debug_setHead', ['0x1'], /not enabled for this plan/],
  ['txpool_content', [], /not enabled for this plan/],
];

describe('the exact method allowlist (C24: -32601)', () => {
  for (const [where, path] of ADDRESSES) {
    test(`on ${where}, node-specific, devnet and wrongly cased methods are -32601 saying why and reach nothing`, async () => {
      for (const [method, params, why] of REFUSED) {
        const res = await post(path(), call(method, params, `id-${method}`));
        assert.equal(res.status, 200, method);
        assert.equal(res.json.id, `id-${method}`);
        assert.equal(res.json.error?.code, -32601, `${method}: ${String(res.bytes)}`);
        assert.match(res.json.error.message, why, method);
        assert.deepEqual(res.json.error.data, { method });
        assert.ok(!recorder.saw(`"${method}"`), `${method} reached the node`);
      }
    });
  }

  test('in a batch, each refused method is -32601 in place and never reaches the node', async () => {
    const body = `[${REFUSED.map(([method, params], i) => call(method, params, i)).join(',')},${call('eth_chainId', [], 'ok')}]`;
    const res = await post<RpcAnswer[]>(keyPath(), body);
    assert.equal(res.status, 200);
    REFUSED.forEach(([method], i) => assert.equal(res.json[i]?.error?.code, -32601, method));
    assert.equal(res.json[REFUSED.length]?.result, '0x32');
    for (const [method] of REFUSED) assert.ok(!recorder.saw(`"${method}"`), `${method} reached the node`);
  });

  test("anvil's eth_sendUnsignedTransaction and eth_sendTransactionSync move no coins from the dev accounts", async () => {
    const before = await chain('eth_getBalance', [RECIPIENT, 'latest']);
    for (const [method, params] of REFUSED.slice(0, 2)) {
      for (const path of ['/public/main', keyPath()]) await post(path, call(method, params, 1));
    }
    await chain('anvil_mine', ['0x1']);
    assert.equal(await chain('eth_getBalance', [RECIPIENT, 'latest']), before);
  });

  test('eth_subscribe over HTTP points to the WebSocket; nat_* is refused off the native networks', async () => {
    const sub = await post(keyPath(), call('eth_subscribe', ['newHeads'], 1));
    assert.equal(sub.json.error.code, -32601);
    assert.match(sub.json.error.message, /WebSocket.*\/ws/);
    const eth = await createKey(t.app, { networks: ['ethereum'] });
    const nat = await post(`/v1/ethereum/${eth.key}`, call('nat_getCandidates', ['latest'], 1));
    assert.equal(nat.json.error.code, -32601);
    assert.match(nat.json.error.message, /only on the native networks/);
  });

  test("a plan's extras are exact names: debug_traceTransaction passes for pro, debug_traceCall does not", async () => {
    const hash = `0x${'11'.repeat(32)}`;
    const traced = await post(`/v1/native-mainnet/${proKey}`, call('debug_traceTransaction', [hash], 1));
    assert.notEqual(traced.json.error?.code, -32601, String(traced.bytes));
    assert.ok(recorder.saw('"debug_traceTransaction"'));
    const other = await post(`/v1/native-mainnet/${proKey}`, call('debug_traceCall', [{ to: RECIPIENT }, 'latest'], 2));
    assert.equal(other.json.error.code, -32601);
    assert.ok(!recorder.saw('"debug_traceCall"'));
    const free = await post('/public/main', call('debug_traceTransaction', [hash], 3));
    assert.equal(free.json.error.code, -32601);
  });

  test('every standard method of the shipped config is forwarded to the node', async () => {
    const probe = await createKey(t.app, { networks: ['native-mainnet'] });
    await setTier(t.app, probe.user.id, 'enterprise', ADMIN);
    for (const method of t.config.methods.standard) {
      const res = await post(`/v1/native-mainnet/${probe.key}`, call(method, [], method));
      assert.equal(res.status, 200, method);
      // The node may not know it (its own -32601 "Method not found"): the gateway let it through.
      const refusedHere = res.json.error?.code === -32601 && String(res.json.error.message).startsWith(`Method ${method} `);
      assert.ok(!refusedHere, `${method}: ${String(res.bytes)}`);
    }
  });

  test('50 random method names leave no usage rows: they are refused before metering', async () => {
    const k = await createKey(t.app, { networks: ['native-mainnet'] });
    await setTier(t.app, k.user.id, 'enterprise', ADMIN);
    const random = () => Math.random().toString(36).slice(2, 10);
    const names = Array.from({ length: 50 }, (_, i) => [`eth_${random()}`, `net_${random()}`, `web3_${random()}`, `${random()}_${random()}`, random()][i % 5] as string);
    for (const [i, method] of names.entries()) {
      const res = await post(`/v1/native-mainnet/${k.key}`, call(method, [], i));
      assert.equal(res.json.error?.code, -32601, method);
    }
    // An allowed call after them: once its row is stored, any row of theirs would be too.
    assert.match((await post(`/v1/native-mainnet/${k.key}`, call('net_version', [], 'last'))).json.result, /^\d+$/);
    const methods = async () =>
      ((await t.storage.db.execute(sql`select method from usage_daily where key_id = ${k.id}`)) as { rows: Array<{ method: string }> }).rows.map((r) => r.method);
    const deadline = Date.now() + 10_000;
    while (!(await methods()).includes('net_version')) {
      assert.ok(Date.now() < deadline, 'the usage of net_version was never stored');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(await methods(), ['net_version']);
    for (const method of names) assert.ok(!recorder.saw(`"${method}"`), `${method} reached the node`);
  });
});

describe('the same rules over the WebSocket (/ws)', () => {
  let c: Client;
  before(async () => {
    c = await connect(wsAddress(t, `/ws?apiKey=${key}`));
  });
  after(async () => {
    await c?.close();
  });

  test('a call with a stray member is -32600 naming it and never reaches the node', async () => {
    for (const s of STRAY) {
      const m = marker();
      assertStray(await c.send(s.body(m)), s);
      assert.ok(!recorder.saw(m), `${s.what} reached the node`);
    }
  });

  test('a stray member in a batch item, or beside eth_subscribe, is -32600 too', async () => {
    const m = marker();
    const batch = (await c.send(`[${(STRAY[0] as (typeof STRAY)[number]).body(m)},{"jsonrpc":"2.0","id":"ok","method":"eth_chainId","params":[]}]`)) as unknown as [RpcAnswer, RpcAnswer];
    assertStray(batch[0], STRAY[0] as (typeof STRAY)[number]);
    assert.equal(batch[1].result, '0x32');
    assert.ok(!recorder.saw(m));
    const sub = await c.send('{"jsonrpc":"2.0","id":"s","method":"eth_subscribe","Method":"admin_addPeer","params":["newHeads"]}');
    assert.equal(sub.error?.code, -32600, JSON.stringify(sub));
    assert.deepEqual(sub.error?.data, { member: 'Method' });
  });

  test('node-specific, devnet and wrongly cased methods are -32601 and reach nothing', async () => {
    for (const [method, params, why] of REFUSED) {
      const answer = await c.send(call(method, params, `ws-${method}`));
      assert.equal(answer.id, `ws-${method}`);
      assert.equal(answer.error?.code, -32601, method);
      assert.match(answer.error?.message ?? '', why, method);
      assert.ok(!recorder.saw(`"${method}"`), `${method} reached the node`);
    }
  });

  test('eth_subscribe and eth_unsubscribe work over the WebSocket', async () => {
    const sub = await c.subscribe(['newHeads']);
    assert.match(sub, /^0x[0-9a-f]{32}$/);
    assert.equal((await c.call('eth_unsubscribe', [sub])).result, true);
  });
});
