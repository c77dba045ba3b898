// C50, C54: the param guards of src/methods/judge.ts on the running gateway: a call they refuse is
// answered -32602 before any node sees it (HTTP, batch items, WebSocket), and the node runs the
// call as judged, re-encoded when it was not written canonically. The rules themselves are
// tested on the module in test/methods/judge.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { connect, withUpstreams, wsAddress } from '../support/ws.ts';

const ALLOWED = '0x' + '11'.repeat(20);
const OTHER = '0x' + '22'.repeat(20);

describe('param guards on the running gateway, before any node sees the call (C50, C54)', () => {
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

  test('a keyless eth_feeHistory with a 160-bit block count is -32602 in every spelling, and the chain still answers afterwards', async () => {
    for (const count of ['"0xffffffffffffffffffffffffffffffffffffffff"', `"0X${'F'.repeat(40)}"`, `"${'0'.repeat(90)}"`.replace(/0"$/, '1025"'), `"${'9'.repeat(90)}"`]) {
      const killer = `{"jsonrpc":"2.0","id":1,"method":"eth_feeHistory","params":[${count},"latest"]}`;
      const res = await post('/public/main', killer);
      assert.equal(res.status, 200);
      assert.equal((res.json as { error?: { code: number } }).error?.code, -32602, count);
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

describe('the node runs what the gateway judged (C54)', () => {
  let fake: FakeNode;
  let t: TestApp;
  let key: string;
  before(async () => {
    fake = await startFakeNode();
    t = await startTestApp({ listen: true, overrides: { networks: withUpstreams({ ethereum: [{ http: fake.url }] }) } });
    key = (await createKey(t.app, { networks: ['ethereum'] })).key;
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  const send = async (body: string) => {
    const res = await fetch(`${t.url}/v1/ethereum/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return res.text();
  };
  const lastBody = () => fake.bodies.filter((b) => !b.includes('eth_blockNumber')).at(-1) ?? '';

  test('a call in canonical form reaches the node byte for byte', async () => {
    const body = `{"jsonrpc":"2.0","id":"a b","method":"eth_getBalance","params":["${ALLOWED}", "0x1f"]}`;
    await send(body);
    assert.equal(lastBody(), body);
  });

  test('other spellings reach the node re-encoded, under the caller id as written', async () => {
    await send(`{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_getBalance","params":["${ALLOWED}","0X1F"]}`);
    assert.equal(lastBody(), `{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_getBalance","params":["${ALLOWED}","0x1f"]}`);
    await send(`{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{"To":"${ALLOWED}","Gas":"0031"},"latest"]}`);
    assert.equal(lastBody(), `{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{"to":"${ALLOWED}","gas":"0x1f"},"latest"]}`);
  });

  test('in a batch, each call is judged and re-encoded alone', async () => {
    const answer = JSON.parse(await send(`[{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["${ALLOWED}","0X2"]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId","params":[]}]`)) as Array<{ id: number }>;
    assert.deepEqual(answer.map((a) => a.id).sort(), [1, 2]);
    assert.match(lastBody(), new RegExp(`"params":\\["${ALLOWED}","0x2"\\]`));
  });
});
