// usage.quota (C38): an account's daily requests or monthly compute units passing 80% and 100%
// of its effective limits (admin overrides included, C8) make one event per threshold and period,
// checked after usage flushes (never on the RPC path) and recorded so it is never sent twice.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createKey, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, deliveries, FAST_WEBHOOKS, type Receiver, startReceiver, type User, userOn } from './helpers.ts';

describe('usage.quota events (C38)', () => {
  let t: TestApp;
  let fake: FakeNode;
  let r: Receiver;

  before(async () => {
    fake = await startFakeNode();
    r = await startReceiver();
    t = await startTestApp({ env: { ADMIN_TOKEN, UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { webhooks: FAST_WEBHOOKS } });
  });
  after(async () => {
    await t?.close();
    await r?.close();
    await fake?.close();
  });

  const limits = async (user: User, l: Record<string, number | null>) => {
    const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${user.id}`, headers: { 'x-admin-token': ADMIN_TOKEN }, payload: { limits: l } });
    assert.equal(res.statusCode, 200, res.body);
  };
  const calls = async (key: string, n: number) => {
    for (let i = 0; i < n; i++) {
      const res = await t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: { jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] } });
      assert.equal(res.statusCode, 200, res.body);
    }
  };
  /** Usage reaches storage, then the quota check that follows it has run. */
  const flushed = async () => {
    await t.app.parts.usage.flush();
    await t.app.parts.webhooks.quota.idle();
  };
  const quotaEvents = (secret: string, path: string) =>
    r.received.filter((x) => x.path === path).map((x) => (new Webhook(secret).verify(x.body, x.headers as Record<string, string>) as { data: Record<string, unknown> }).data);

  test('one event at 80% and one at 100% of an admin-overridden daily limit, none twice', async () => {
    const user = await userOn(t.app);
    await limits(user, { dailyLimit: 10 });
    const { key } = await createKey(t.app, {}, user);
    const hook = await createWebhook(t.app, user, { url: `${r.url}/daily`, events: ['usage.quota'] });

    await calls(key, 7);
    await flushed();
    assert.deepEqual(await deliveries(t.app, user, hook.id), [], '70%: nothing yet');

    await calls(key, 1);
    await flushed();
    await waitFor(() => quotaEvents(hook.secret, '/hook/daily').length === 1, { what: 'the 80% notice' });
    const [first] = quotaEvents(hook.secret, '/hook/daily');
    assert.deepEqual(first, {
      period: 'daily',
      periodStart: new Date().toISOString().slice(0, 10),
      metric: 'requests',
      used: 8,
      limit: 10,
      percent: 80,
      threshold: 80,
    });

    await calls(key, 1);
    await flushed();
    // As after a restart or on another instance: the check finds the notice stored and sends nothing.
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 0);
    assert.equal((await deliveries(t.app, user, hook.id)).length, 1, '90%: the 80% notice is not repeated');

    await calls(key, 1);
    await flushed();
    await waitFor(() => quotaEvents(hook.secret, '/hook/daily').length === 2, { what: 'the 100% notice' });
    const second = quotaEvents(hook.secret, '/hook/daily')[1];
    assert.deepEqual([second?.used, second?.limit, second?.percent, second?.threshold], [10, 10, 100, 100]);
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 0);
  });

  test('monthly compute units crossing 80% of an overridden monthly limit make a monthly notice', async () => {
    const user = await userOn(t.app);
    await limits(user, { monthlyLimit: 10 });
    const { key } = await createKey(t.app, {}, user);
    const hook = await createWebhook(t.app, user, { url: `${r.url}/monthly`, events: ['usage.quota'] });
    await calls(key, 8);
    await flushed();
    await waitFor(() => quotaEvents(hook.secret, '/hook/monthly').length === 1, { what: 'the monthly notice' });
    const [event] = quotaEvents(hook.secret, '/hook/monthly');
    assert.equal(event?.period, 'monthly');
    assert.equal(event?.metric, 'computeUnits');
    assert.equal(event?.periodStart, `${new Date().toISOString().slice(0, 7)}-01`);
    assert.equal(event?.limit, 10);
    assert.equal(event?.threshold, 80);
  });

  test('an account without a usage.quota endpoint gets no notice recorded', async () => {
    const user = await userOn(t.app);
    await limits(user, { dailyLimit: 2 });
    const { key } = await createKey(t.app, {}, user);
    await calls(key, 2);
    await flushed();
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 0);
    // Made later, the endpoint gets the notice for the period under way (nothing was recorded before).
    const hook = await createWebhook(t.app, user, { url: `${r.url}/late`, events: ['usage.quota'] });
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 2, '80% and 100%');
    await waitFor(() => quotaEvents(hook.secret, '/hook/late').length === 2);
  });

  test('an account moved to a plan without webhooks gets no notice, and gets it once back on max', async () => {
    const user = await userOn(t.app);
    const hook = await createWebhook(t.app, user, { url: `${r.url}/moved`, events: ['usage.quota'] });
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    await limits(user, { dailyLimit: 2 });
    const { key } = await createKey(t.app, {}, user);
    await calls(key, 2);
    await flushed();
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 0);
    await setTier(t.app, user.id, 'max', ADMIN_TOKEN);
    assert.equal(await t.app.parts.webhooks.quota.check([user.id]), 2);
    await waitFor(() => quotaEvents(hook.secret, '/hook/moved').length === 2);
  });
});
