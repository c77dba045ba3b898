import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, type registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';

// API keys on the RPC hot path (C1, C20): every address, every key state, and changes that take
// effect on the very next request, with no storage round trip per request.
const ADMIN = 'admin-token-keys-on-rpc-0123456789';

/**
 * A JSON-RPC answer with the members these tests read: whether it carries a result or an error
 * (and which) is what they assert (C22).
 */
interface RpcAnswer {
  jsonrpc: string;
  id: unknown;
  result: unknown;
  error: { code: number; message: string; data?: { reason?: string } };
}
interface Served {
  status: number;
  /** The body parsed (undefined when empty). */
  json: RpcAnswer;
}
type User = Awaited<ReturnType<typeof registerUser>>;

let t: TestApp;
let fake: FakeNode;

before(async () => {
  fake = await startFakeNode();
  t = await startTestApp({
    listen: true,
    env: {
      ADMIN_TOKEN: ADMIN,
      UPSTREAM_NATIVE_MAINNET: fake.url,
      UPSTREAM_NATIVE_TESTNET: fake.url,
      UPSTREAM_ETHEREUM: fake.url,
      UPSTREAM_POLYGON: fake.url,
    },
    overrides: { methods: { planExtras: { pro: ['debug_traceTransaction'] } } },
  });
});

after(async () => {
  await t?.close();
  await fake?.close();
});

const call = (method = 'eth_chainId', id: unknown = 1, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

/** One JSON-RPC POST with real fetch; `key` goes in X-API-Key when given. */
async function rpc(path: string, opts: { key?: string; body?: unknown } = {}): Promise<Served> {
  const res = await fetch(t.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(opts.key === undefined ? {} : { 'x-api-key': opts.key }) },
    body: JSON.stringify(opts.body ?? call()),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as RpcAnswer };
}

/** Asserts a successful answer that reached the node (the fake echoes the method). */
function assertServed(res: Served, id: unknown = 1, what = ''): void {
  assert.equal(res.status, 200, `${what} ${JSON.stringify(res.json)}`);
  assert.equal(res.json.id, id, what);
  assert.ok(res.json.result !== undefined, `${what} ${JSON.stringify(res.json)}`);
}

/** Asserts a JSON-RPC error with its code and HTTP status (C22), echoing the request id. */
function assertError(res: Served, code: number, status: number, id: unknown = 1): void {
  assert.equal(res.json?.error?.code, code, JSON.stringify(res.json));
  assert.equal(res.status, status);
  assert.equal(res.json.jsonrpc, '2.0');
  assert.equal(res.json.id, id);
}

/** A REST call that must succeed; its answer's data read as `D` (C7). */
async function rest<D = unknown>(user: User, method: 'PATCH' | 'POST' | 'DELETE', url: string, payload?: unknown): Promise<{ data: D }> {
  const res = await t.app.inject({ method, url: `/api/v1${url}`, headers: user.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  assert.equal(res.statusCode, 200, `${method} ${url}: ${res.body}`);
  return res.json();
}

const patchKey = (user: User, id: string, body: Record<string, unknown>) => rest(user, 'PATCH', `/api-keys/${id}`, body);

/** A fresh key, used once so that its lookup is cached before the change under test. */
async function usedKey(payload: { networks?: string[] } = {}): Promise<{ key: string; id: string; user: User }> {
  const k = await createKey(t.app, payload);
  assertServed(await rpc(`/v1/native-mainnet/${k.key}`), 1, 'first use');
  return k;
}

describe('addresses (C1)', () => {
  test('/rpc/main/evm/50 and /rpc/main/evm/51 with X-API-Key reach native mainnet and testnet', async () => {
    const { key } = await createKey(t.app);
    assertServed(await rpc('/rpc/main/evm/50', { key, body: call('eth_chainId', 50) }), 50);
    assertServed(await rpc('/rpc/main/evm/51', { key, body: call('eth_chainId', 51) }), 51);
  });

  test('/rpc/main/evm/{chainId} serves every other network the key may use (pro key)', async () => {
    const { user } = await createKey(t.app);
    // A key given its own list on the free plan keeps it after the upgrade (C16).
    const nativeOnly = await createKey(t.app, { networks: ['native-mainnet'] }, user);
    await setTier(t.app, user.id, 'pro', ADMIN);
    // networks omitted: every network the plan allows, which on pro is all of them (C52).
    const pro = await createKey(t.app, {}, user);
    assertServed(await rpc('/rpc/main/evm/1', { key: pro.key }), 1, 'ethereum');
    assertServed(await rpc('/rpc/main/evm/137', { key: pro.key }), 1, 'polygon');
    assertServed(await rpc('/v1/ethereum/' + pro.key), 1, 'ethereum by slug');
    assertError(await rpc('/rpc/main/evm/1', { key: nativeOnly.key }), -32003, 403);
  });

  test('/v1/{slug}/{key} takes the key as the last path segment', async () => {
    const { key } = await createKey(t.app);
    assertServed(await rpc(`/v1/native-mainnet/${key}`));
    assertServed(await rpc(`/v1/native-testnet/${key}`));
  });

  test('/public/main answers without a key', async () => {
    assertServed(await rpc('/public/main', { body: call('eth_blockNumber', 'pub') }), 'pub');
  });

  test('the API key never reaches the node, neither in the path nor in a header', async () => {
    const { key } = await createKey(t.app);
    assertServed(await rpc(`/v1/native-mainnet/${key}`, { key, body: call('eth_gasPrice') }));
    const last = fake.last;
    assert.ok(last);
    assert.ok(!last.path.includes(key));
    assert.ok(!JSON.stringify(last.headers).includes(key), JSON.stringify(last.headers));
  });
});

describe('key failures (C20, C22)', () => {
  test('a missing key is -32001 with HTTP 401', async () => {
    assertError(await rpc('/rpc/main/evm/50', { body: call('eth_chainId', 'no-key') }), -32001, 401, 'no-key');
    assertError(await rpc('/rpc/main/evm/50', { key: '', body: call('eth_chainId', 'empty') }), -32001, 401, 'empty');
    const noSegment = await rpc('/v1/native-mainnet', { body: call('eth_chainId', 3) });
    assert.equal(noSegment.status, 401);
    assert.equal(noSegment.json.error.code, -32001);
  });

  test(
    '/v1/{slug} without the key segment echoes the request id',
    async () => {
      assertError(await rpc('/v1/native-mainnet', { body: call('eth_chainId', 'req-9') }), -32001, 401, 'req-9');
    },
  );

  test('an unknown key is -32001 with HTTP 401 on every address', async () => {
    const { key } = await createKey(t.app);
    const wrong = `${key.slice(0, -4)}AAAA` === key ? `${key.slice(0, -4)}BBBB` : `${key.slice(0, -4)}AAAA`;
    assertError(await rpc('/rpc/main/evm/50', { key: wrong, body: call('eth_chainId', 'u1') }), -32001, 401, 'u1');
    assertError(await rpc(`/v1/native-mainnet/${wrong}`, { body: call('eth_chainId', 'u2') }), -32001, 401, 'u2');
    assertError(await rpc(`/v1/native-mainnet/${key.toUpperCase()}`), -32001, 401);
    assertError(await rpc('/rpc/main/evm/50', { key: 'x'.repeat(300) }), -32001, 401);
  });

  test(
    'an over-long key in the path is a JSON-RPC -32001 too',
    async () => {
      assertError(await rpc(`/v1/native-mainnet/${'x'.repeat(150)}`), -32001, 401);
    },
  );

  test('a deleted key is -32001 at once', async () => {
    const k = await usedKey();
    await rest(k.user, 'DELETE', `/api-keys/${k.id}`);
    assertError(await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'del') }), -32001, 401, 'del');
    assertError(await rpc('/rpc/main/evm/50', { key: k.key }), -32001, 401);
  });

  test('an inactive key is -32001 at once, and works again at once when re-activated', async () => {
    const k = await usedKey();
    await patchKey(k.user, k.id, { status: 'inactive' });
    assertError(await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'off') }), -32001, 401, 'off');
    assertError(await rpc('/rpc/main/evm/51', { key: k.key }), -32001, 401);
    await patchKey(k.user, k.id, { status: 'active' });
    assertServed(await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'on') }), 'on');
  });

  test('a revoked key is -32002 at once', async () => {
    const k = await usedKey();
    await rest(k.user, 'POST', `/api-keys/${k.id}/revoke`);
    const res = await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'rev') });
    assertError(res, -32002, 401, 'rev');
    assert.equal(res.json.error.data?.reason, 'revoked');
    assertError(await rpc('/rpc/main/evm/50', { key: k.key }), -32002, 401);
  });

  test('a key whose expiresAt is set in the past is -32002 at once; clearing expiresAt revives it', async () => {
    const k = await usedKey();
    await patchKey(k.user, k.id, { expiresAt: new Date(Date.now() - 60_000).toISOString() });
    const res = await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'exp') });
    assertError(res, -32002, 401, 'exp');
    assert.equal(res.json.error.data?.reason, 'expired');
    await patchKey(k.user, k.id, { expiresAt: null });
    assertServed(await rpc(`/v1/native-mainnet/${k.key}`));
  });

  test('a cached key stops at the moment it expires', async (ctx) => {
    const k = await usedKey();
    // A point in time, not an event: the gateway's clock (Date) is moved to it.
    ctx.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      const expiresAt = Date.now() + 1_000;
      await patchKey(k.user, k.id, { expiresAt: new Date(expiresAt).toISOString() });
      assertServed(await rpc(`/v1/native-mainnet/${k.key}`));
      ctx.mock.timers.tick(999);
      assertServed(await rpc(`/v1/native-mainnet/${k.key}`));
      ctx.mock.timers.tick(1);
      assertError(await rpc(`/v1/native-mainnet/${k.key}`), -32002, 401);
    } finally {
      ctx.mock.timers.reset();
    }
  });

  test('a rotated key: the old value is -32001 at once, the new one works at once', async () => {
    const k = await usedKey();
    const rotated = (await rest<{ key: string }>(k.user, 'POST', `/api-keys/${k.id}/rotate`)).data;
    assert.notEqual(rotated.key, k.key);
    assertError(await rpc(`/v1/native-mainnet/${k.key}`, { body: call('eth_chainId', 'old') }), -32001, 401, 'old');
    assertError(await rpc('/rpc/main/evm/50', { key: k.key }), -32001, 401);
    assertServed(await rpc(`/v1/native-mainnet/${rotated.key}`, { body: call('eth_chainId', 'new') }), 'new');
    assertServed(await rpc('/rpc/main/evm/50', { key: rotated.key }));
  });

  test('a network the key may not use is -32003 with HTTP 403, on both address forms', async () => {
    const { key } = await createKey(t.app, { networks: ['native-mainnet'] });
    assertError(await rpc('/rpc/main/evm/51', { key, body: call('eth_chainId', 'n1') }), -32003, 403, 'n1');
    assertError(await rpc(`/v1/ethereum/${key}`, { body: call('eth_chainId', 'n2') }), -32003, 403, 'n2');
    const refused = await rpc('/rpc/main/evm/1', { key });
    assertError(refused, -32003, 403);
    // A whole sentence that says how to get the network, and how many networks the plan allows (C16).
    assert.equal(
      refused.json.error?.message,
      "API key not authorized for network ethereum. Add it to the key's networks with PATCH /api/v1/api-keys/{id}: the free plan allows 5 networks over all of the account's keys.",
    );
  });

  test('a network the key may not use on a plan without a network cap says the plan allows every network', async () => {
    const { key, user } = await createKey(t.app, { networks: ['native-mainnet'] });
    await setTier(t.app, user.id, 'enterprise', ADMIN);
    const refused = await rpc('/rpc/main/evm/1', { key });
    assertError(refused, -32003, 403);
    assert.match(refused.json.error?.message ?? '', /^API key not authorized for network ethereum\. Add it to the key's networks with PATCH \/api\/v1\/api-keys\/\{id\}: the enterprise plan allows every network\.$/);
  });

  test('a network narrowed by PATCH is -32003 at once', async () => {
    const k = await usedKey();
    assertServed(await rpc(`/v1/native-testnet/${k.key}`));
    await patchKey(k.user, k.id, { networks: ['native-mainnet'] });
    assertError(await rpc(`/v1/native-testnet/${k.key}`), -32003, 403);
    assertServed(await rpc(`/v1/native-mainnet/${k.key}`));
  });

  test('an unknown slug or chainId is -32004 with HTTP 404', async () => {
    const { key } = await createKey(t.app);
    assertError(await rpc(`/v1/nonet/${key}`, { body: call('eth_chainId', 's') }), -32004, 404, 's');
    assertError(await rpc('/rpc/main/evm/999999', { key, body: call('eth_chainId', 'c') }), -32004, 404, 'c');
    assertError(await rpc('/rpc/main/evm/0x32', { key }), -32004, 404);
    assertError(await rpc('/rpc/main/evm/50abc', { key }), -32004, 404);
  });

  test('errors on refused calls reach no node', async () => {
    const before = fake.callCount('eth_getCode');
    const body = call('eth_getCode', 1, ['0x00000000000000000000000000000000000000aa', 'latest']);
    await rpc('/rpc/main/evm/50', { body });
    await rpc('/rpc/main/evm/50', { key: 'jk_live_nope', body });
    await rpc('/v1/nonet/whatever', { body });
    assert.equal(fake.callCount('eth_getCode'), before);
  });
});

describe('plan changes take effect at once (C20)', () => {
  test('a free key limited to the native networks can use ethereum right after the tier change and a PATCH', async () => {
    const k = await usedKey({ networks: ['native-mainnet', 'native-testnet'] });
    assertError(await rpc('/rpc/main/evm/1', { key: k.key }), -32003, 403);
    await setTier(t.app, k.user.id, 'pro', ADMIN);
    // The key's own list (given at creation) still holds only the native networks (C16).
    assertError(await rpc('/rpc/main/evm/1', { key: k.key }), -32003, 403);
    await patchKey(k.user, k.id, { networks: ['native-mainnet', 'ethereum', 'polygon', 'bsc', 'base', 'arbitrum'] });
    assertServed(await rpc('/rpc/main/evm/1', { key: k.key }), 1, 'ethereum after the change');
    assertServed(await rpc('/v1/polygon/' + k.key), 1, 'polygon after the change');
  });

  test('a plan-gated method (debug_* for pro) is allowed right after the tier change, and refused right after going back', async () => {
    const k = await usedKey();
    const debug = call('debug_traceTransaction', 'dbg', [`0x${'22'.repeat(32)}`]);
    const before = fake.callCount('debug_traceTransaction');
    assertError(await rpc(`/v1/native-mainnet/${k.key}`, { body: debug }), -32601, 200, 'dbg');
    await setTier(t.app, k.user.id, 'pro', ADMIN);
    assertServed(await rpc(`/v1/native-mainnet/${k.key}`, { body: debug }), 'dbg');
    assert.equal(fake.callCount('debug_traceTransaction'), before + 1);
    await setTier(t.app, k.user.id, 'free', ADMIN);
    assertError(await rpc(`/v1/native-mainnet/${k.key}`, { body: debug }), -32601, 200, 'dbg');
    assert.equal(fake.callCount('debug_traceTransaction'), before + 1);
  });
});

describe('no storage round trip per request', () => {
  test('after a first request, 50 more with the same key cause no storage lookup', async () => {
    const k = await usedKey();
    const cache = t.app.parts.keyCache;
    const misses = cache.misses;
    for (let i = 0; i < 25; i++) assertServed(await rpc(`/v1/native-mainnet/${k.key}`));
    await Promise.all(Array.from({ length: 25 }, async () => assertServed(await rpc('/rpc/main/evm/51', { key: k.key }))));
    assert.equal(cache.misses, misses);
  });

  test('20 requests with the same unknown key cause at most one storage lookup (negative cache)', async () => {
    const cache = t.app.parts.keyCache;
    const unknown = `jk_live_deadbeef${'A'.repeat(30)}`;
    const misses = cache.misses;
    for (let i = 0; i < 20; i++) assertError(await rpc(`/v1/native-mainnet/${unknown}`), -32001, 401);
    assert.ok(cache.misses - misses <= 1, `${cache.misses - misses} lookups`);
  });

  test('20 concurrent first requests with one key share one storage lookup', async () => {
    const { key } = await createKey(t.app);
    const cache = t.app.parts.keyCache;
    const misses = cache.misses;
    const answers = await Promise.all(Array.from({ length: 20 }, () => rpc('/rpc/main/evm/50', { key })));
    for (const a of answers) assertServed(a);
    assert.equal(cache.misses - misses, 1);
  });

  test('a change evicts only the changed key: other cached keys still cost no lookup', async () => {
    const a = await usedKey();
    const b = await usedKey();
    const cache = t.app.parts.keyCache;
    await patchKey(a.user, a.id, { name: 'renamed' });
    const misses = cache.misses;
    assertServed(await rpc(`/v1/native-mainnet/${b.key}`));
    assert.equal(cache.misses, misses);
    assertServed(await rpc(`/v1/native-mainnet/${a.key}`));
    assert.equal(cache.misses, misses + 1);
  });
});
