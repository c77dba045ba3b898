// Two instances on one PostgreSQL (and one Redis) deliver each webhook event once (C39: each
// attempt claimed by one instance), keep the endpoint allowance (C37), send a usage.quota notice
// once (C38), and retry a row whose claimer died once its lease runs out.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { webhookDeliveries } from '../../src/webhooks/schema.ts';
import { createKey, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, FAST_WEBHOOKS, type Receiver, startReceiver, userOn } from './helpers.ts';

const skip = (await serviceSkip('PostgreSQL')) || (await serviceSkip('Redis'));

describe('webhooks on two instances sharing PostgreSQL and Redis (C37-C39)', { skip }, () => {
  let a: TestApp;
  let b: TestApp;
  let r: Receiver;
  let fake: FakeNode;
  let scale: ScaleOut | undefined;

  before(async () => {
    fake = await startFakeNode();
    r = await startReceiver();
    scale = await startScaleOut({
      env: { ADMIN_TOKEN, UPSTREAM_NATIVE_MAINNET: fake.url },
      overrides: { webhooks: { ...FAST_WEBHOOKS, concurrency: 8, maxEndpoints: { max: 5, enterprise: 100 } } },
    });
    ({ a, b } = scale);
  });
  after(async () => {
    await scale?.close();
    await r?.close();
    await fake?.close();
  });

  const publishOn = (t: TestApp, accountId: string, n: number, tag: string) =>
    t.storage.db.transaction(async (tx) => {
      for (let i = 0; i < n; i++) await t.app.parts.webhooks.publish(tx, { type: 'intent.updated', accountId, data: { id: `${tag}-${i}` } });
    });

  test('every event is delivered exactly once although both instances send', async () => {
    const user = await userOn(a.app);
    const hook = await createWebhook(a.app, user, { url: `${r.url}/once`, events: ['intent.updated'] });
    const before = { a: a.app.parts.webhooks.stats.attempts, b: b.app.parts.webhooks.stats.attempts };
    await Promise.all([publishOn(a, user.id, 30, 'a'), publishOn(b, user.id, 30, 'b')]);
    a.app.parts.webhooks.wake();
    b.app.parts.webhooks.wake();
    await waitFor(
      async () => {
        const [row] = await a.storage.db
          .select({ n: sql<number>`count(*)::int` })
          .from(webhookDeliveries)
          .where(sql`${webhookDeliveries.endpointId} = ${hook.id} and ${webhookDeliveries.status} = 'delivered'`);
        return row?.n === 60;
      },
      { what: '60 deliveries', timeoutMs: 30_000 },
    );
    const got = r.received.filter((x) => x.path === '/hook/once');
    const ids = new Set(got.map((x) => x.headers['webhook-id']));
    assert.equal(ids.size, 60);
    assert.equal(got.length, 60, 'no event twice');
    const attempts = a.app.parts.webhooks.stats.attempts - before.a + (b.app.parts.webhooks.stats.attempts - before.b);
    assert.equal(attempts, 60, 'one attempt per event over both instances');
  });

  test('a row claimed by an instance that died is sent once its lease runs out', async () => {
    const user = await userOn(a.app);
    await createWebhook(a.app, user, { url: `${r.url}/lease`, events: ['intent.updated'] });
    // Claimed by a claimer that is gone, in the same transaction as the event is stored.
    await a.storage.db.transaction(async (tx) => {
      await a.app.parts.webhooks.publish(tx, { type: 'intent.updated', accountId: user.id, data: { id: 'lease' } });
      await tx.execute(sql`update webhook_deliveries set claimed_until = now() + interval '1 hour', claim_token = 'crashed' where status = 'pending' and claim_token is null`);
    });
    a.app.parts.webhooks.wake();
    b.app.parts.webhooks.wake();
    const [row] = await a.storage.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.claimToken, 'crashed'));
    assert.ok(row, 'the claim holds');
    assert.equal(row.attempts, 0);
    await a.storage.db.update(webhookDeliveries).set({ claimedUntil: sql`now() - interval '1 second'` }).where(eq(webhookDeliveries.id, row.id));
    const done = await waitFor(
      async () => {
        const [x] = await a.storage.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, row.id));
        return x?.status === 'delivered' ? x : undefined;
      },
      { what: 'the delivery after the lease ran out' },
    );
    assert.equal(done.attempts, 1);
    assert.equal(r.received.filter((x) => x.path === '/hook/lease').length, 1);
  });

  test('N+k creates split over both instances leave exactly N endpoints', async () => {
    const user = await userOn(a.app);
    const results = await Promise.all(
      Array.from({ length: 9 }, (_, i) =>
        (i % 2 ? a : b).app.inject({ method: 'POST', url: '/api/v1/webhooks', headers: user.auth, payload: { url: `${r.url}/n${i}`, events: ['intent.updated'] } }),
      ),
    );
    assert.equal(results.filter((x) => x.statusCode === 200).length, 5);
    assert.ok(results.filter((x) => x.statusCode !== 200).every((x) => x.statusCode === 403 && x.json().error.code === 'PLAN_LIMIT'));
    const list = await b.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: user.auth });
    assert.equal(list.json().data.length, 5);
  });

  test('usage from both instances passing 80% makes one usage.quota notice', async () => {
    const user = await userOn(a.app);
    const res = await a.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${user.id}`, headers: { 'x-admin-token': ADMIN_TOKEN }, payload: { limits: { dailyLimit: 10 } } });
    assert.equal(res.statusCode, 200);
    const { key } = await createKey(a.app, {}, user);
    await createWebhook(a.app, user, { url: `${r.url}/quota`, events: ['usage.quota'] });
    const call = (t: TestApp, id: number) => t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: { jsonrpc: '2.0', id, method: 'eth_chainId', params: [] } });
    for (let i = 0; i < 4; i++) {
      assert.equal((await call(a, i)).statusCode, 200);
      assert.equal((await call(b, i)).statusCode, 200);
    }
    await Promise.all([a.app.parts.usage.flush(), b.app.parts.usage.flush()]);
    await Promise.all([a.app.parts.webhooks.quota.idle(), b.app.parts.webhooks.quota.idle()]);
    // Both check again, as a restart would.
    await Promise.all([a.app.parts.webhooks.quota.check([user.id]), b.app.parts.webhooks.quota.check([user.id])]);
    await waitFor(() => r.received.some((x) => x.path === '/hook/quota'), { what: 'the notice' });
    const [n] = await a.storage.db.execute(sql`select count(*)::int as n from webhook_quota_notices where user_id = ${user.id}`).then((x) => (x as { rows: Array<{ n: number }> }).rows);
    assert.equal(n?.n, 1);
    const deliveredOrPending = await a.storage.db.execute(
      sql`select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.type = 'usage.quota' and e.body like ${`%"used":8%`}`,
    );
    assert.equal((deliveredOrPending as { rows: Array<{ n: number }> }).rows[0]?.n, 1);
  });
});
