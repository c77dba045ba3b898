// The WebSocket address (C1, spec 4.3): the upgrade answers like the HTTP RPC addresses
// (401/403/404 before any WebSocket exists, C13 headers on the 101), and every message is a
// JSON-RPC call or batch handled, metered and refused exactly as over HTTP (C10, C20, C22–C24).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../../support/app.ts';
import { connect, tryUpgrade, wsAddress } from '../../support/ws.ts';

let t: TestApp;
let key: string;

const RATE_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-cu-remaining'];

before(async () => {
  t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet', 'native-testnet'], listen: true });
  key = (await createKey(t.app)).key;
});

after(async () => {
  await t?.close();
});

const patchKey = async (auth: { authorization: string }, id: string, payload: object) => {
  const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: auth, payload });
  assert.equal(res.statusCode, 200, res.body);
};

describe('upgrade', () => {
  test('answers 101 with the rate-limit headers on /ws, /ws/ and /ws/{network}, the key in the query or in X-API-Key', async () => {
    const plain = await tryUpgrade(wsAddress(t, `/ws?apiKey=${key}`));
    assert.equal(plain.status, 101);
    for (const h of RATE_HEADERS) assert.match(String(plain.headers[h]), /^-?\d+$/, h);
    assert.equal(plain.headers['x-ratelimit-limit'], '100');
    plain.ws?.close();

    for (const path of [`/ws/?apiKey=${key}`, `/ws/native-testnet?apiKey=${key}`, `/ws/native-testnet/?apiKey=${key}`]) {
      const c = await connect(wsAddress(t, path));
      const chainId = (await c.call('eth_chainId')).result;
      assert.equal(chainId, path.includes('testnet') ? '0x33' : '0x32', path);
      await c.close();
    }
    const viaHeader = await connect(wsAddress(t, '/ws/native-testnet'), { headers: { 'X-API-Key': key } });
    assert.equal((await viaHeader.call('eth_chainId')).result, '0x33');
    await viaHeader.close();
  });

  test('refuses a missing, unknown, inactive or deleted key with 401 and -32001, without upgrading', async () => {
    const user = await registerUser(t.app);
    const inactive = await createKey(t.app, {}, user);
    await patchKey(user.auth, inactive.id, { status: 'inactive' });
    const deleted = await createKey(t.app, {}, user);
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${deleted.id}`, headers: user.auth });
    assert.equal(del.statusCode, 200);

    for (const path of ['/ws', '/ws?apiKey=jk_live_00000000nope', `/ws?apiKey=${inactive.key}`, `/ws?apiKey=${deleted.key}`]) {
      const r = await tryUpgrade(wsAddress(t, path));
      assert.equal(r.status, 401, path);
      assert.equal(r.headers.connection, 'close');
      assert.equal(JSON.parse(r.body).error.code, -32001, path);
      assert.equal(JSON.parse(r.body).jsonrpc, '2.0');
    }
  });

  test('refuses a revoked or expired key with 401 and -32002', async () => {
    const user = await registerUser(t.app);
    const revoked = await createKey(t.app, {}, user);
    const rev = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${revoked.id}/revoke`, headers: user.auth });
    assert.equal(rev.statusCode, 200);
    const expired = await createKey(t.app, {}, user);
    await patchKey(user.auth, expired.id, { expiresAt: new Date(Date.now() - 1000).toISOString() });

    for (const [k, reason] of [[revoked.key, 'revoked'], [expired.key, 'expired']] as const) {
      const r = await tryUpgrade(wsAddress(t, `/ws?apiKey=${k}`));
      assert.equal(r.status, 401);
      const err = JSON.parse(r.body).error;
      assert.equal(err.code, -32002);
      assert.equal(err.data.reason, reason);
    }
  });

  test('refuses a network the key may not use with 403 (-32003, with the rate-limit headers) and an unknown network with 404 (-32004)', async () => {
    // A free key reaches the two native networks only (C16).
    const forbidden = await tryUpgrade(wsAddress(t, `/ws/ethereum?apiKey=${key}`));
    assert.equal(forbidden.status, 403);
    assert.equal(JSON.parse(forbidden.body).error.code, -32003);
    for (const h of RATE_HEADERS) assert.ok(forbidden.headers[h], h);

    const unknown = await tryUpgrade(wsAddress(t, `/ws/no-such-chain?apiKey=${key}`));
    assert.equal(unknown.status, 404);
    assert.equal(JSON.parse(unknown.body).error.code, -32004);
    assert.equal(unknown.headers.connection, 'close');
  });

  test('leaves other paths to HTTP: a WebSocket upgrade elsewhere is 404, a plain GET /ws is 426, an h2c upgrade on a REST path is served as usual', async () => {
    const elsewhere = await tryUpgrade(wsAddress(t, `/v1/native-mainnet/${key}`));
    assert.equal(elsewhere.status, 404);

    const get = await fetch(`${t.url}/ws?apiKey=${key}`);
    assert.equal(get.status, 426);
    assert.equal(get.headers.get('upgrade'), 'websocket');

    // curl --http2 on http:// asks to upgrade to h2c, bodies included; such requests are answered
    // as HTTP/1.1, as Node does when nobody listens for upgrades.
    const curl = (...args: string[]) => promisify(execFile)('curl', ['-sS', '-i', '--max-time', '5', '--http2', ...args]);
    const rest = await curl(`${t.url}/api/v1/networks/native-mainnet`);
    assert.match(rest.stdout, /^HTTP\/1\.1 200/);
    assert.match(rest.stdout, /"chainId":50/);
    const rpc = await curl('-d', '{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}', `${t.url}/v1/native-mainnet/${key}`);
    assert.match(rpc.stdout, /^HTTP\/1\.1 200/);
    assert.match(rpc.stdout, /\{"jsonrpc":"2.0","id":7,"result":"0x32"\}/);
  });
  test('reports open connections and upstream subscriptions in /metrics', async () => {
    const c = await connect(wsAddress(t, `/ws?apiKey=${key}`));
    await c.subscribe(['newHeads']);
    const text = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(text, /^junction_ws_connections 1$/m);
    assert.match(text, /^junction_ws_upstream_subscriptions\{network="native-mainnet"\} 1$/m);
    await c.close();
  });
});

describe('calls', () => {
  test('answers every HTTP method over the socket: single calls, ids as sent, batches in order, notifications unanswered', async () => {
    const c = await connect(wsAddress(t, `/ws?apiKey=${key}`));
    const block = await c.call<string>('eth_blockNumber');
    assert.match(block.result, /^0x[0-9a-f]+$/);
    const balance = await c.call<string>('eth_getBalance', ['0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', 'latest']);
    assert.match(balance.result, /^0x[0-9a-f]+$/);

    // Ids come back exactly as written, big numbers too (C23).
    c.ws.send('{"jsonrpc":"2.0","id":9007199254740993,"method":"eth_chainId","params":[]}');
    await c.next((m) => m.result === '0x32');
    assert.ok(c.raw.some((r) => r.includes('"id":9007199254740993')));
    c.ws.send('{"jsonrpc":"2.0","id":"abc","method":"net_version","params":[]}');
    assert.equal((await c.next((m) => m.id === 'abc')).result, '50');

    // A notification gets no frame; the batch after it is answered in request order.
    c.ws.send('{"jsonrpc":"2.0","method":"eth_chainId","params":[]}');
    c.ws.send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 'b', method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', method: 'eth_blockNumber', params: [] },
        { jsonrpc: '2.0', id: 'a', method: 'eth_accounts', params: [] },
        { jsonrpc: '2.0', id: 'c', method: 'net_version', params: [] },
      ]),
    );
    const batch = await c.next();
    assert.ok(Array.isArray(batch), `expected the batch answer first, got ${JSON.stringify(batch)}`);
    const items = batch as unknown as Array<{ id: string; result?: string; error?: { code: number } }>;
    assert.deepEqual(items.map((i) => i.id), ['b', 'a', 'c']);
    assert.equal(items[0]?.result, '0x32');
    assert.equal(items[1]?.error?.code, -32601);
    assert.equal(items[2]?.result, '50');

    const empty = await c.send('[]');
    assert.equal(empty.error?.code, -32600);
    await c.close();
  });

  test('answers invalid JSON and binary frames with -32700 and refused methods with -32601, and stays open', async () => {
    const c = await connect(wsAddress(t, `/ws?apiKey=${key}`));
    assert.equal((await c.send('{"jsonrpc":"2.0",')).error?.code, -32700);
    assert.equal((await c.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}'), { binary: true })).error?.code, -32700);
    for (const method of ['eth_sendTransaction', 'anvil_mine', 'admin_peers', 'nat_nope']) {
      assert.equal((await c.call(method)).error?.code, -32601, method);
    }
    assert.equal((await c.call('eth_chainId')).result, '0x32');
    await c.close();
  });

  test('meters each message like an HTTP request: a key limited to 3 per minute gets -32005 on the 4th (eth_subscribe counts, a batch counts each item)', async () => {
    const limited = await createKey(t.app, { rateLimit: 3 });
    const up = await tryUpgrade(wsAddress(t, `/ws?apiKey=${limited.key}`));
    assert.equal(up.headers['x-ratelimit-limit'], '3');
    assert.equal(up.headers['x-ratelimit-remaining'], '3', 'the upgrade itself consumes nothing');
    up.ws?.close();

    const c = await connect(wsAddress(t, `/ws?apiKey=${limited.key}`));
    assert.ok((await c.call('eth_chainId')).result);
    const sub = await c.subscribe(['newHeads']);
    assert.match(sub, /^0x[0-9a-f]{32}$/);
    assert.ok((await c.call('eth_blockNumber')).result);
    const fourth = await c.call('eth_chainId');
    assert.equal(fourth.error?.code, -32005);
    assert.ok((fourth.error?.data as { retryAfter: number }).retryAfter >= 1);
    // Over the limit, a subscription is refused too; the open one keeps delivering (not metered).
    assert.equal((await c.call('eth_subscribe', ['newHeads'])).error?.code, -32005);
    await c.notification(sub);
    await c.close();

    const batchKey = await createKey(t.app, { rateLimit: 3 });
    const b = await connect(wsAddress(t, `/ws?apiKey=${batchKey.key}`));
    b.ws.send(JSON.stringify([1, 2, 3].map((id) => ({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] }))));
    const three = (await b.next()) as unknown as unknown[];
    assert.equal(three.length, 3);
    assert.equal((await b.call('eth_chainId')).error?.code, -32005);
    await b.close();
  });

  test('records calls and subscriptions over WebSocket as usage', async () => {
    const k = await createKey(t.app);
    const c = await connect(wsAddress(t, `/ws?apiKey=${k.key}`));
    await c.call('eth_chainId');
    const sub = await c.subscribe(['newHeads']);
    // The documented metering choice: eth_unsubscribe is not metered (it only gives a slot back).
    assert.equal((await c.call('eth_unsubscribe', [sub])).result, true);
    await c.close();
    await t.app.parts.usage.flush();
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: k.user.auth });
    const stats = res.json().data;
    assert.equal(stats.requestsByMethod.eth_chainId, 1);
    assert.equal(stats.requestsByMethod.eth_subscribe, 1);
    assert.equal(stats.requestsByMethod.eth_unsubscribe, undefined);
    assert.equal(stats.requestsByNetwork['native-mainnet'], 2);
  });

  test('eth_unsubscribe takes nothing from the rate limit, even with none left', async () => {
    const limited = await createKey(t.app, { rateLimit: 2 });
    const c = await connect(wsAddress(t, `/ws?apiKey=${limited.key}`));
    const a = await c.subscribe(['newHeads']);
    const b = await c.subscribe(['newHeads']);
    assert.equal((await c.call('eth_chainId')).error?.code, -32005, 'the two subscriptions used the limit');
    assert.equal((await c.call('eth_unsubscribe', [a])).result, true);
    assert.equal((await c.call('eth_unsubscribe', [b])).result, true);
    await c.close();
  });

  test('closes the connections of a key revoked while they are open (1008), so its subscriptions stop', async () => {
    const k = await createKey(t.app);
    const c = await connect(wsAddress(t, `/ws?apiKey=${k.key}`));
    const sub = await c.subscribe(['newHeads']);
    await c.notification(sub);
    const rev = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/revoke`, headers: k.user.auth });
    assert.equal(rev.statusCode, 200);
    const closed = await c.closed;
    assert.equal(closed.code, 1008);
    assert.match(closed.reason, /revoked or expired/);
  });

  test('refuses the next message of a key that expired while connected (-32002), then closes', async (ctx) => {
    const k = await createKey(t.app);
    const c = await connect(wsAddress(t, `/ws?apiKey=${k.key}`));
    // A point in time (the expiry): the gateway's clock (Date) is moved to it.
    ctx.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      await patchKey(k.user.auth, k.id, { expiresAt: new Date(Date.now() + 1_000).toISOString() });
      assert.equal((await c.call('eth_chainId')).result, '0x32');
      ctx.mock.timers.tick(1_000);
      const refused = await c.call('eth_chainId');
      assert.equal(refused.error?.code, -32002);
    } finally {
      ctx.mock.timers.reset();
    }
    assert.equal((await c.closed).code, 1008);
  });
});
