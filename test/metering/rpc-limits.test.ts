import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { serviceSkip } from '../support/services.ts';

const ADMIN = 'admin-token-for-metering-tests';
const call = (method = 'eth_blockNumber', id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params: [] });
const redisSkip = await serviceSkip('Redis');
const randomIp = () => `10.${[0, 0, 0].map(() => Math.floor(Math.random() * 250) + 1).join('.')}`;

/** The same behaviour with the in-process limiter and with Redis (C12, issue: two stores). */
for (const store of [
  { name: 'in-process', redis: false, skip: false as const },
  { name: 'Redis', redis: true, skip: redisSkip },
]) {
  describe(`RPC limits and quotas, ${store.name} (C9–C13)`, { skip: store.skip }, () => {
    let t: TestApp;
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode();
      t = await startTestApp({
        redis: store.redis,
        env: { ADMIN_TOKEN: ADMIN, UPSTREAM_NATIVE_MAINNET: fake.url },
        // debug_traceTransaction opened to the free plan, for the weight of a tracer (C10, C24).
        overrides: { limits: { publicRpcPerMinute: 3 }, methods: { planExtras: { free: ['debug_traceTransaction'] } } },
      });
    });
    after(async () => {
      await t?.close();
      await fake?.close();
    });

    const rpc = (key: string, body: unknown, headers: Record<string, string> = {}) =>
      t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: body as object, headers });
    const limits = (userId: string, l: Record<string, number | null>) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${userId}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: l } });

    test("a key's own rateLimit: the 6th request in a minute is -32005 with 429, Retry-After and the C13 headers", async () => {
      const { key } = await createKey(t.app, { rateLimit: 5 });
      // net_listening: the pool's health probes send eth_blockNumber, which would blur the count,
      // and eth_chainId is answered from the response cache after the first call (C44).
      const before = fake.callCount('net_listening');
      for (let i = 0; i < 5; i++) {
        const res = await rpc(key, call('net_listening'));
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['x-ratelimit-limit'], '5');
        assert.equal(res.headers['x-ratelimit-remaining'], String(4 - i));
        // The window ends (and the 6th is allowed) when the first of the five leaves it: the last
        // place taken says so too, not "now".
        assert.ok(Number(res.headers['x-ratelimit-reset']) >= Math.floor(Date.now() / 1000) + 55, `reset after ${i + 1}: ${String(res.headers['x-ratelimit-reset'])}`);
        assert.equal(res.headers['x-cu-remaining'], String(100_000 - (i + 1)));
      }
      const res = await rpc(key, call('net_listening', 'six'));
      assert.equal(res.statusCode, 429);
      assert.equal(res.json().error.code, -32005);
      assert.equal(res.json().id, 'six');
      const retry = Number(res.headers['retry-after']);
      assert.ok(retry > 0 && retry <= 60);
      assert.equal(res.json().error.data.retryAfter, retry);
      assert.equal(res.headers['x-ratelimit-remaining'], '0');
      assert.equal(fake.callCount('net_listening') - before, 5, 'the refused request did not reach the node');
    });

    test("the account's plan rate is shared by its keys; the tighter limit answers", async () => {
      const u = await registerUser(t.app);
      await limits(u.id, { requestsPerMinute: 6 });
      const a = await createKey(t.app, { name: 'a' }, u);
      const b = await createKey(t.app, { name: 'b' }, u);
      for (let i = 0; i < 3; i++) assert.equal((await rpc(a.key, call())).statusCode, 200);
      for (let i = 0; i < 3; i++) assert.equal((await rpc(b.key, call())).statusCode, 200);
      const res = await rpc(a.key, call());
      assert.equal(res.statusCode, 429);
      assert.equal(res.json().error.data.limit, 'plan');
      assert.equal(res.headers['x-ratelimit-limit'], '6');
    });

    test('a batch counts each item and is refused whole when it does not fit, consuming nothing', async () => {
      const { key } = await createKey(t.app, { rateLimit: 5 });
      assert.equal((await rpc(key, [call('eth_blockNumber', 1), call('eth_chainId', 2)])).headers['x-ratelimit-remaining'], '3');
      const big = await rpc(key, [1, 2, 3, 4].map((i) => call('eth_blockNumber', i)));
      assert.equal(big.statusCode, 429);
      assert.ok(!Array.isArray(big.json()), 'one error for the whole batch');
      assert.equal(big.json().error.code, -32005);
      const next = await rpc(key, [1, 2, 3].map((i) => call('eth_blockNumber', i)));
      assert.equal(next.statusCode, 200, 'the refused batch consumed nothing');
      assert.equal(next.headers['x-ratelimit-remaining'], '0');
    });

    test('the daily limit: past it, -32006 with 429', async () => {
      const u = await registerUser(t.app);
      await limits(u.id, { dailyLimit: 4 });
      const { key } = await createKey(t.app, {}, u);
      assert.equal((await rpc(key, [1, 2, 3].map((i) => call('eth_blockNumber', i)))).statusCode, 200);
      assert.equal((await rpc(key, call())).statusCode, 200);
      const res = await rpc(key, call());
      assert.equal(res.statusCode, 429);
      assert.equal(res.json().error.code, -32006);
      assert.equal(res.json().error.data.limit, 'daily');
      const retry = Number(res.headers['retry-after']);
      const toMidnight = Math.ceil((Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1) - Date.now()) / 1000);
      assert.ok(Math.abs(retry - toMidnight) <= 2, 'C11: the daily quota resets at 00:00 UTC');
    });

    test('the monthly limit counts compute units by method weight (C10)', async () => {
      const u = await registerUser(t.app);
      await limits(u.id, { monthlyLimit: 12 });
      const { key } = await createKey(t.app, {}, u);
      const logs = await rpc(key, call('eth_getLogs'));
      assert.equal(logs.statusCode, 200);
      assert.equal(logs.headers['x-cu-remaining'], '2', 'eth_getLogs costs 10');
      const again = await rpc(key, call('eth_getLogs'));
      assert.equal(again.statusCode, 429);
      assert.equal(again.json().error.code, -32006);
      assert.equal(again.json().error.data.limit, 'monthly');
      assert.equal((await rpc(key, call('eth_call'))).headers['x-cu-remaining'], '0', 'eth_call costs 2');
    });

    test('a tracer weighs more than a read: debug_traceTransaction costs 20 (C10)', async () => {
      const u = await registerUser(t.app);
      await limits(u.id, { monthlyLimit: 25 });
      const { key } = await createKey(t.app, {}, u);
      const trace = { ...call('debug_traceTransaction'), params: [`0x${'11'.repeat(32)}`] };
      const first = await rpc(key, trace);
      assert.equal(first.statusCode, 200);
      assert.equal(first.json().error, undefined);
      assert.equal(first.headers['x-cu-remaining'], '5');
      const again = await rpc(key, trace);
      assert.equal(again.statusCode, 429);
      assert.equal(again.json().error.data.limit, 'monthly');
      assert.equal((await rpc(key, call('net_listening'))).headers['x-cu-remaining'], '4', 'a simple read still costs 1');
    });

    test('enterprise is unlimited: every dimension reports -1', async () => {
      const u = await registerUser(t.app);
      await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { tier: 'enterprise' } });
      const { key } = await createKey(t.app, {}, u);
      const res = await rpc(key, call());
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-ratelimit-limit'], '-1');
      assert.equal(res.headers['x-ratelimit-remaining'], '-1');
      assert.equal(res.headers['x-ratelimit-reset'], '-1');
      assert.equal(res.headers['x-cu-remaining'], '-1');
    });

    test('error answers carry the headers too and consume nothing (method refused, network not allowed)', async () => {
      const { key } = await createKey(t.app, { rateLimit: 5 });
      const refused = await rpc(key, call('eth_accounts'));
      assert.equal(refused.json().error.code, -32601);
      assert.equal(refused.headers['x-ratelimit-remaining'], '5');
      const other = await t.app.inject({ method: 'POST', url: `/v1/ethereum/${key}`, payload: call() });
      assert.equal(other.statusCode, 403);
      assert.equal(other.headers['x-ratelimit-limit'], '5');
      assert.equal(other.headers['x-ratelimit-remaining'], '5');
    });

    test('answers given before metering carry the caller\'s limits, read and not consumed: a parse error, an unknown network, a key that cannot be used (C13)', async () => {
      const ip = randomIp();
      const post = (url: string, payload: string | object, headers: Record<string, string> = {}) =>
        t.app.inject({ method: 'POST', url, payload, remoteAddress: ip, headers: { 'content-type': 'application/json', ...headers } });
      const { key, id, user } = await createKey(t.app, { rateLimit: 5 });
      assert.equal((await rpc(key, call('net_listening'))).statusCode, 200);
      // A usable key in memory: its own window (5, one used), before the body is understood.
      for (const res of [
        await post(`/v1/native-mainnet/${key}`, '{"jsonrpc":"2.0",'),
        await post(`/v1/no-such-network/${key}`, call()),
        await post('/rpc/main/evm/999999', call(), { 'x-api-key': key }),
      ]) {
        assert.ok([400, 404].includes(res.statusCode), res.body);
        assert.equal(res.headers['x-ratelimit-limit'], '5', res.body);
        assert.equal(res.headers['x-ratelimit-remaining'], '4', res.body);
        assert.ok(Number(res.headers['x-ratelimit-reset']) >= Math.floor(Date.now() / 1000) + 55, 'reset: when the one request counted leaves the window');
        assert.equal(res.headers['x-cu-remaining'], String(100_000 - 1));
      }
      assert.equal((await rpc(key, call('net_listening'))).headers['x-ratelimit-remaining'], '3', 'none of them was counted');

      // Keys that cannot be used: the address's failed-key-lookup window (C17), read; only a
      // lookup in storage that found nothing counts in it.
      const unknown = `jk_${'0'.repeat(40)}${Math.random().toString(16).slice(2, 10)}`;
      const lookups = t.config.limits.failedAuthPerMinute;
      // (First: a key change forgets the unknown keys remembered.)
      assert.equal((await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${id}/revoke`, headers: user.auth })).statusCode, 200);
      const looked = await post(`/v1/native-mainnet/${unknown}`, call());
      assert.equal(looked.json().error.code, -32001);
      assert.equal(looked.headers['x-ratelimit-limit'], String(lookups));
      assert.equal(looked.headers['x-ratelimit-remaining'], String(lookups - 1));
      for (const [url, code] of [
        [`/v1/native-mainnet/${unknown}`, -32001], // remembered from the lookup
        ['/v1/native-mainnet', -32001], // no key
        [`/v1/native-mainnet/${'k'.repeat(300)}`, -32001], // longer than any key
        [`/v1/native-mainnet/${key}`, -32002], // revoked
        [`/v1/no-such-network/${unknown}`, -32004],
      ] as const) {
        const res = await post(url, call());
        assert.equal(res.json().error.code, code, url);
        assert.equal(res.headers['x-ratelimit-limit'], String(lookups), url);
        assert.equal(res.headers['x-ratelimit-remaining'], String(lookups - 1), url);
        assert.equal(res.headers['x-cu-remaining'], '-1', url);
        assert.ok(Number(res.headers['x-ratelimit-reset']) >= Math.floor(Date.now() / 1000) + 55, url);
      }
      // The public endpoint: the address's own window (C18), a parse error counting nothing.
      const pub = await post('/public/main', 'nope');
      assert.equal(pub.json().error.code, -32700);
      assert.equal(pub.headers['x-ratelimit-limit'], '3');
      assert.equal(pub.headers['x-ratelimit-remaining'], '3');
    });

    test('the public endpoint is limited per client IP (C18); X-Forwarded-For is ignored from untrusted peers', async () => {
      // Fresh addresses each run: with Redis the buckets outlive this process.
      const [ip1, ip2] = [randomIp(), randomIp()];
      const pub = (xff?: string) =>
        t.app.inject({ method: 'POST', url: '/public/main', payload: call(), remoteAddress: ip1, headers: xff ? { 'x-forwarded-for': xff } : {} });
      for (let i = 0; i < 3; i++) {
        const res = await pub(`192.0.2.${i}`);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['x-ratelimit-limit'], '3');
        assert.equal(res.headers['x-cu-remaining'], '-1');
      }
      const res = await pub('192.0.2.99');
      assert.equal(res.statusCode, 429, 'a spoofed X-Forwarded-For does not buy a new bucket');
      assert.equal(res.json().error.code, -32005);
      const other = await t.app.inject({ method: 'POST', url: '/public/main', payload: call(), remoteAddress: ip2 });
      assert.equal(other.statusCode, 200, 'another client has its own bucket');
    });
  });
}

describe('client IP behind a trusted proxy (C18)', () => {
  test('X-Forwarded-For is honoured only from a configured trusted proxy', async () => {
    const fake = await startFakeNode();
    const t = await startTestApp({
      env: { UPSTREAM_NATIVE_MAINNET: fake.url, TRUSTED_PROXIES: '10.0.0.1' },
      overrides: { limits: { publicRpcPerMinute: 1 } },
    });
    try {
      const pub = (remoteAddress: string, xff: string) =>
        t.app.inject({ method: 'POST', url: '/public/main', payload: call(), remoteAddress, headers: { 'x-forwarded-for': xff } });
      assert.equal((await pub('10.0.0.1', '198.51.100.1')).statusCode, 200);
      assert.equal((await pub('10.0.0.1', '198.51.100.2')).statusCode, 200, 'a different client behind the proxy');
      assert.equal((await pub('10.0.0.1', '198.51.100.1')).statusCode, 429, 'the same client again');
    } finally {
      await t.close();
      await fake.close();
    }
  });
});

describe('REST limits (C17)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ overrides: { limits: { restPerMinute: 4, failedLoginsPerMinute: 2, registrationsPerHour: 3 } } });
  });
  after(() => t.close());

  test('signed-in requests are limited per account, with the C13 headers and 429 + Retry-After past the limit', async () => {
    const u = await registerUser(t.app);
    const list = () => t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: u.auth });
    for (let i = 0; i < 4; i++) {
      const res = await list();
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-ratelimit-limit'], '4');
      assert.equal(res.headers['x-ratelimit-remaining'], String(3 - i));
    }
    const res = await list();
    assert.equal(res.statusCode, 429);
    assert.equal(res.json().error.code, 'RATE_LIMITED');
    assert.ok(Number(res.headers['retry-after']) > 0);
  });

  test('failed logins: 2 per minute per (IP, e-mail); then even the right password waits', async () => {
    const u = await registerUser(t.app, {});
    const login = (password: string, remoteAddress = '203.0.113.5') =>
      t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password }, remoteAddress });
    assert.equal((await login('wrong-1')).statusCode, 401);
    assert.equal((await login('wrong-2')).statusCode, 401);
    const blocked = await login(u.password);
    assert.equal(blocked.statusCode, 429);
    assert.ok(Number(blocked.headers['retry-after']) > 0);
    assert.equal((await login(u.password, '203.0.113.6')).statusCode, 200, 'another address is not blocked');
  });

  test('registrations: 3 per hour per IP', async () => {
    const reg = (i: number) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        payload: { email: `burst${i}.${Date.now()}@example.com`, password: 'long enough pw', name: 'B' },
        remoteAddress: '198.51.100.77',
      });
    for (let i = 0; i < 3; i++) assert.equal((await reg(i)).statusCode, 200);
    const res = await reg(3);
    assert.equal(res.statusCode, 429);
    assert.equal(res.json().error.code, 'RATE_LIMITED');
  });
});
