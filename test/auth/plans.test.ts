// GET /api/v1/plans: the configured plan table (C9), public like GET /networks, so the sign-up
// page can say what the free plan gives; the limits named as GET /me names them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

describe('GET /plans: the plans of the configuration, without a token', () => {
  let t: TestApp;
  before(async () => {
    // A changed plan table shows as changed: the answer is read from the config, not written down.
    t = await startTestApp({ overrides: { plans: { free: { requestsPerMinute: 60, dailyLimit: 5000, monthlyComputeUnits: 70_000, maxKeys: 4, maxNetworks: 6 } } } });
  });
  after(() => t?.close());

  test('answers every tier in order with its limits from the config; no token needed (C6 beyond the contract)', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/plans' });
    assert.equal(res.statusCode, 200);
    const { success, data } = res.json();
    assert.equal(success, true);
    assert.deepEqual(
      data.map((p: { tier: string }) => p.tier),
      ['free', 'pro', 'max', 'enterprise'],
    );
    assert.deepEqual(data[0], { tier: 'free', limits: { requestsPerMinute: 60, dailyLimit: 5000, monthlyLimit: 70_000, maxKeys: 4, maxNetworks: 6 } });
    for (const p of data) {
      const c = t.config.plans[p.tier as 'free'];
      assert.deepEqual(p.limits, { requestsPerMinute: c.requestsPerMinute, dailyLimit: c.dailyLimit, monthlyLimit: c.monthlyComputeUnits, maxKeys: c.maxKeys, maxNetworks: c.maxNetworks });
    }
    assert.deepEqual(data[3].limits, { requestsPerMinute: null, dailyLimit: null, monthlyLimit: null, maxKeys: null, maxNetworks: null }, 'enterprise: unlimited');
  });

  test("a new account's /me limits are the free plan's of /plans", async () => {
    const u = await registerUser(t.app);
    const me = (await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: u.auth })).json().data;
    const plans = (await t.app.inject({ method: 'GET', url: '/api/v1/plans' })).json().data;
    assert.deepEqual(me.limits, plans.find((p: { tier: string }) => p.tier === me.tier).limits);
  });

  test('is documented without bearer security; unknown methods keep the C7 envelope', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const op = doc.paths['/api/v1/plans']?.get;
    assert.ok(op, 'documented');
    assert.equal(op.security, undefined, 'public');
    const item = op.responses['200'].content['application/json'].schema.properties.data.items;
    assert.deepEqual(Object.keys(item.properties).sort(), ['limits', 'tier']);
    const post = await t.app.inject({ method: 'POST', url: '/api/v1/plans', payload: {} });
    assert.equal(post.json().success, false);
  });
});
