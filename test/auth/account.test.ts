import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { serviceSkip } from '../support/services.ts';

const ADMIN = 'admin-token-for-account-tests';
const pgSkip = await serviceSkip('PostgreSQL');
const redisSkip = await serviceSkip('Redis');

/** PGlite with limits in process, and PostgreSQL with limits on Redis. */
for (const setup of [
  { name: 'PGlite, limits in process', backend: 'pglite' as const, redis: false, skip: false as const },
  { name: 'PostgreSQL, limits on Redis', backend: 'postgres' as const, redis: true, skip: pgSkip || redisSkip },
]) {
  describe(`the signed-in account: /me, logout, password change (${setup.name})`, { skip: setup.skip }, () => {
    let t: TestApp;
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode();
      t = await startTestApp({
        backend: setup.backend,
        redis: setup.redis,
        env: { ADMIN_TOKEN: ADMIN, UPSTREAM_NATIVE_MAINNET: fake.url },
      });
    });
    after(async () => {
      await t?.close();
      await fake?.close();
    });

    const get = (auth: Record<string, string>, url = '/api/v1/me') => t.app.inject({ method: 'GET', url, headers: auth });
    const refresh = (refreshToken: string) => t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken } });
    const login = (email: string, password: string) => t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });
    const admin = (userId: string, payload: object) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${userId}`, headers: { 'x-admin-token': ADMIN }, payload });
    const rpc = (key: string, method = 'eth_chainId') =>
      t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: { jsonrpc: '2.0', id: 1, method, params: [] } });

    test('GET /me answers the account, its plan limits and what is left, without a password or hash', async () => {
      const u = await registerUser(t.app, { name: 'Mia' });
      const res = await get(u.auth);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), {
        success: true,
        data: {
          id: u.id,
          email: u.email,
          name: 'Mia',
          tier: 'free',
          limits: { requestsPerMinute: 100, dailyLimit: 10_000, monthlyLimit: 100_000, maxKeys: 3, maxNetworks: 5 },
          remaining: { requestsThisMinute: 100, requestsToday: 10_000, computeUnitsThisMonth: 100_000 },
        },
      });
      assert.ok(!res.body.includes(u.password));
      assert.ok(!/scrypt|hash/i.test(res.body));
      assert.equal((await get({})).statusCode, 401, 'C6: a bearer token is needed');
    });

    test("/me applies the account's admin overrides (C8) and shows what RPC traffic used, reading without consuming", async () => {
      const u = await registerUser(t.app);
      assert.equal((await admin(u.id, { limits: { requestsPerMinute: 50, monthlyLimit: 1000 } })).statusCode, 200);
      const { key } = await createKey(t.app, {}, u);
      assert.equal((await rpc(key)).statusCode, 200);
      const getLogs = await rpc(key, 'eth_getLogs');
      assert.equal(getLogs.statusCode, 200);
      const first = (await get(u.auth)).json().data;
      assert.deepEqual(first.limits, { requestsPerMinute: 50, dailyLimit: 10_000, monthlyLimit: 1000, maxKeys: 3, maxNetworks: 5 });
      assert.deepEqual(first.remaining, { requestsThisMinute: 48, requestsToday: 9998, computeUnitsThisMonth: 1000 - 1 - 10 });
      assert.equal(String(first.remaining.computeUnitsThisMonth), getLogs.headers['x-cu-remaining'], 'the same count the RPC headers show');
      const again = (await get(u.auth)).json().data;
      assert.deepEqual(again.remaining, first.remaining, 'reading /me consumed nothing');
    });

    test('C13: a REST answer\'s X-CU-Remaining is the account\'s compute units left this month (not -1 on a free plan); -1 when unlimited or signed out', async () => {
      const u = await registerUser(t.app);
      const fresh = await get(u.auth, '/api/v1/api-keys');
      assert.equal(fresh.statusCode, 200);
      assert.equal(fresh.headers['x-cu-remaining'], '100000', 'the free plan\'s 100,000 a month, none used');
      const { key } = await createKey(t.app, {}, u);
      const logs = await rpc(key, 'eth_getLogs');
      const after = await get(u.auth);
      assert.equal(after.headers['x-cu-remaining'], logs.headers['x-cu-remaining'], 'the count the RPC answer showed');
      assert.equal(after.headers['x-cu-remaining'], String(100_000 - 10));
      assert.equal(after.json().data.remaining.computeUnitsThisMonth, 100_000 - 10, 'and /me says the same');
      await admin(u.id, { tier: 'enterprise' });
      assert.equal((await get(u.auth)).headers['x-cu-remaining'], '-1', 'enterprise: unlimited');
      assert.equal((await t.app.inject({ method: 'GET', url: '/api/v1/networks' })).headers['x-cu-remaining'], '-1', 'signed out: no account to count');
    });

    test('/me of an enterprise account shows null (unlimited) limits and remaining', async () => {
      const u = await registerUser(t.app);
      await admin(u.id, { tier: 'enterprise' });
      const data = (await get(u.auth)).json().data;
      assert.equal(data.tier, 'enterprise');
      assert.deepEqual(data.limits, { requestsPerMinute: null, dailyLimit: null, monthlyLimit: null, maxKeys: null, maxNetworks: null });
      assert.deepEqual(data.remaining, { requestsThisMinute: null, requestsToday: null, computeUnitsThisMonth: null });
    });

    test("logout revokes that login's refresh token family only; its access token lives out its lifetime", async () => {
      const u = await registerUser(t.app);
      const other = (await login(u.email, u.password)).json().data.tokens;
      const rotated = (await refresh(u.refreshToken)).json().data;
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: { authorization: `Bearer ${rotated.accessToken}` } });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(Object.keys(res.json()).sort(), ['message', 'success']);
      assert.equal((await refresh(rotated.refreshToken)).statusCode, 401, 'the logged-out refresh token stops working');
      assert.equal((await refresh(other.refreshToken)).statusCode, 200, 'another login is untouched');
      assert.equal((await get({ authorization: `Bearer ${rotated.accessToken}` })).statusCode, 200, 'stateless access token until it expires');
      assert.equal((await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout' })).statusCode, 401);
    });

    test('logout-all signs every login of the account out, this one included; other accounts and access tokens are untouched', async () => {
      const u = await registerUser(t.app);
      const second = (await login(u.email, u.password)).json().data.tokens;
      const rotated = (await refresh(second.refreshToken)).json().data;
      const stranger = await registerUser(t.app);
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout-all', headers: u.auth });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(Object.keys(res.json()).sort(), ['message', 'success']);
      for (const [name, token] of [
        ['the caller', u.refreshToken],
        ['another login', rotated.refreshToken],
      ]) {
        const r = await refresh(token);
        assert.equal(r.statusCode, 401, `${name}: its refresh token stops working`);
        assert.equal(r.json().success, false, 'C7 envelope');
      }
      assert.equal((await refresh(stranger.refreshToken)).statusCode, 200, "another account's login is untouched");
      assert.equal((await get(u.auth)).statusCode, 200, 'stateless access token until it expires');
      assert.equal((await login(u.email, u.password)).statusCode, 200, 'signing in again works');
      const none = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout-all' });
      assert.equal(none.statusCode, 401, 'C6: a bearer token is needed');
      assert.equal(none.json().success, false);
    });

    test('password change: checks the current one, signs every other login out and answers fresh tokens for this one', async () => {
      const u = await registerUser(t.app);
      const second = (await login(u.email, u.password)).json().data.tokens;
      const third = (await login(u.email, u.password)).json().data.tokens;
      const change = (currentPassword: string) =>
        t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/password',
          headers: u.auth,
          payload: { currentPassword, newPassword: 'a brand new passphrase' },
        });

      const wrong = await change('not my password');
      assert.equal(wrong.statusCode, 400);
      assert.deepEqual(
        wrong.json().error.details.map((d: { field: string }) => d.field),
        ['body.currentPassword'],
      );
      assert.equal((await refresh(second.refreshToken)).statusCode, 200, 'a wrong current password changes nothing');

      const res = await change(u.password);
      assert.equal(res.statusCode, 200);
      const fresh = res.json().data;
      assert.deepEqual(Object.keys(fresh).sort(), ['accessToken', 'refreshToken']);
      assert.ok(!res.body.includes('a brand new passphrase'));

      assert.equal((await refresh(third.refreshToken)).statusCode, 401, 'other logins are signed out');
      assert.equal((await refresh(u.refreshToken)).statusCode, 401, "this login's old refresh token is replaced");
      assert.equal((await refresh(fresh.refreshToken)).statusCode, 200, 'the fresh pair works');
      assert.equal((await get({ authorization: `Bearer ${fresh.accessToken}` })).statusCode, 200);
      assert.equal((await login(u.email, u.password)).statusCode, 401, 'the old password no longer signs in');
      assert.equal((await login(u.email, 'a brand new passphrase')).statusCode, 200);
    });

    test('password change rejects unknown body fields and a short new password (C7)', async () => {
      const u = await registerUser(t.app);
      for (const payload of [
        { currentPassword: u.password, newPassword: 'long enough passphrase', extra: 1 },
        { currentPassword: u.password, newPassword: 'short' },
        { newPassword: 'long enough passphrase' },
      ]) {
        const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/password', headers: u.auth, payload });
        assert.equal(res.statusCode, 400, JSON.stringify(payload));
        assert.equal(res.json().error.code, 'VALIDATION_ERROR');
      }
    });
  });
}

describe('the account routes in the OpenAPI document', () => {
  test('/me, /auth/logout, /auth/logout-all and /auth/password are listed with their schemas and bearer security', async () => {
    const t = await startTestApp();
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
      const me = doc.paths['/api/v1/me']?.get;
      const logout = doc.paths['/api/v1/auth/logout']?.post;
      const password = doc.paths['/api/v1/auth/password']?.post;
      const logoutAll = doc.paths['/api/v1/auth/logout-all']?.post;
      for (const [name, op] of Object.entries({ me, logout, logoutAll, password })) {
        assert.ok(op, `${name} is documented`);
        assert.deepEqual(op.security, [{ bearerAuth: [] }], `${name} needs a bearer token`);
      }
      const body = password.requestBody.content['application/json'].schema;
      assert.deepEqual(Object.keys(body.properties).sort(), ['currentPassword', 'newPassword']);
      const data = me.responses['200'].content['application/json'].schema.properties.data;
      assert.deepEqual(Object.keys(data.properties).sort(), ['email', 'id', 'limits', 'name', 'remaining', 'tier']);
    } finally {
      await t.close();
    }
  });
});
