import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

const TOKEN = 'admin-secret-token-for-tests-42';

describe('admin (C8)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN: TOKEN } });
  });
  after(() => t.close());
  const admin = { 'x-admin-token': TOKEN };

  test('GET /admin/users?email= finds an account case-insensitively', async () => {
    const u = await registerUser(t.app);
    const res = await t.app.inject({ method: 'GET', url: `/api/v1/admin/users?email=${encodeURIComponent(u.email.toUpperCase())}`, headers: admin });
    assert.equal(res.statusCode, 200);
    const [found] = res.json().data;
    assert.equal(found.id, u.id);
    assert.equal(found.tier, 'free');
    assert.equal(found.effective.requestsPerMinute, 100);
    assert.ok(!res.body.includes('password'), 'no password hash');
    const none = await t.app.inject({ method: 'GET', url: '/api/v1/admin/users?email=nobody%40example.com', headers: admin });
    assert.deepEqual(none.json().data, []);
  });

  test('PATCH sets the tier and per-account overrides; null clears one', async () => {
    const u = await registerUser(t.app);
    const patch = (payload: unknown) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: admin, payload: payload as object });
    const r1 = await patch({ tier: 'pro', limits: { requestsPerMinute: 250, dailyLimit: 5000 } });
    assert.equal(r1.statusCode, 200);
    assert.equal(r1.json().data.tier, 'pro');
    assert.deepEqual(r1.json().data.overrides, { requestsPerMinute: 250, dailyLimit: 5000, monthlyLimit: null });
    assert.equal(r1.json().data.effective.requestsPerMinute, 250);
    assert.equal(r1.json().data.effective.monthlyLimit, 1_000_000);
    const r2 = await patch({ limits: { requestsPerMinute: null } });
    assert.equal(r2.json().data.effective.requestsPerMinute, 1000, 'back to the pro plan rate');
    assert.equal(r2.json().data.overrides.dailyLimit, 5000, 'the other override is kept');
    // The user sees the tier too.
    const login = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: u.password } });
    assert.equal(login.json().data.user.tier, 'pro');
    // Overrides bound the key rate limit (C14).
    const key = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'x', rateLimit: 1000 } });
    assert.equal(key.statusCode, 200);
    await patch({ limits: { requestsPerMinute: 10 } });
    const tooHigh = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'y', rateLimit: 11 } });
    assert.equal(tooHigh.statusCode, 400);
  });

  test('bad input is 400 and changes nothing; an unknown account is 404', async () => {
    const u = await registerUser(t.app);
    // Limits are kept in 4-byte integer columns: a larger one is a 400 naming it, not a failed write (500).
    const tooBig: Array<[string, number]> = [['dailyLimit', 1e12], ['monthlyLimit', 2 ** 31], ['requestsPerMinute', 2 ** 31]];
    const payloads: object[] = [{ tier: 'platinum' }, { limits: { requestsPerMinute: 0 } }, { limits: { foo: 1 } }, { isAdmin: true }, {}];
    for (const payload of [...payloads, ...tooBig.map(([field, value]) => ({ tier: 'pro', limits: { [field]: value } }))]) {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: admin, payload });
      assert.equal(res.statusCode, 400, JSON.stringify(payload));
      assert.equal(res.json().error.code, 'VALIDATION_ERROR', res.body);
    }
    for (const [field, value] of tooBig) {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: admin, payload: { limits: { [field]: value } } });
      assert.ok(
        (res.json().error.details as Array<{ field: string }>).some((d) => d.field.startsWith(`body.limits.${field}`)),
        `${field}: the field is named: ${res.body}`,
      );
    }
    const look = await t.app.inject({ method: 'GET', url: `/api/v1/admin/users?email=${encodeURIComponent(u.email)}`, headers: admin });
    assert.equal(look.json().data[0].tier, 'free');
    assert.deepEqual(look.json().data[0].overrides, { requestsPerMinute: null, dailyLimit: null, monthlyLimit: null });
    const largest = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: admin, payload: { limits: { dailyLimit: 2 ** 31 - 1 } } });
    assert.equal(largest.statusCode, 200, largest.body);
    assert.equal(largest.json().data.overrides.dailyLimit, 2 ** 31 - 1);
    const missing = await t.app.inject({ method: 'PATCH', url: '/api/v1/admin/users/nope', headers: admin, payload: { tier: 'pro' } });
    assert.equal(missing.statusCode, 404);
  });

  test('a missing or wrong X-Admin-Token is 401; a user bearer token is not enough', async () => {
    const u = await registerUser(t.app);
    for (const headers of [{}, { 'x-admin-token': 'wrong' }, { 'x-admin-token': `${TOKEN}x` }, u.auth]) {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/admin/users?email=a%40b.c', headers });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().success, false);
    }
  });

  test('without ADMIN_TOKEN the admin routes answer 404', async () => {
    const closed = await startTestApp();
    try {
      for (const [method, url] of [['GET', '/api/v1/admin/users?email=a%40b.c'], ['PATCH', '/api/v1/admin/users/x']] as const) {
        const res = await closed.app.inject({ method, url, headers: { 'x-admin-token': 'anything-at-all-here' }, payload: method === 'PATCH' ? { tier: 'pro' } : undefined });
        assert.equal(res.statusCode, 404);
        assert.equal(res.json().error.code, 'NOT_FOUND');
      }
    } finally {
      await closed.close();
    }
  });
});
