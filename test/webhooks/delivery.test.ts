// Webhook delivery (C39) to real local receivers: Standard Webhooks signatures verified with the
// `standardwebhooks` library, the same webhook-id on every retry, the retry schedule, Retry-After,
// 410 Gone, failing endpoints, secret rotation, filters (C38), bounded work for slow receivers.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { webhookAttempts, webhookDeliveries, webhookEndpoints } from '../../src/webhooks/schema.ts';
import { createKey, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, deliveries, FAST_WEBHOOKS, type Receiver, startReceiver, type User, userOn } from './helpers.ts';

describe('webhook delivery (C39)', () => {
  let t: TestApp;
  let user: User;
  const receivers: Receiver[] = [];

  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN }, overrides: { webhooks: { ...FAST_WEBHOOKS, concurrency: 4, maxEndpoints: { max: 100, enterprise: 100 } } } });
    user = await userOn(t.app);
  });
  after(async () => {
    await t?.close();
    for (const r of receivers) await r.close();
  });

  const receiver = async (answer?: Receiver['answer']) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  const sendTest = async (id: string, u = user) => {
    const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${id}/test`, headers: u.auth });
    assert.equal(res.statusCode, 200, res.body);
    return res.json().data as { eventId: string; deliveryId: string };
  };
  const verify = (secret: string, r: { body: string; headers: Record<string, unknown> }) =>
    new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as Record<string, unknown>;
  const publish = (event: Parameters<TestApp['app']['parts']['webhooks']['publish']>[1]) =>
    t.storage.db.transaction(async (tx) => {
      const n = await t.app.parts.webhooks.publish(tx, event);
      return n;
    });

  test('POST /test delivers a signed webhook.test event that verifies with standardwebhooks', async () => {
    const r = await receiver();
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    const { eventId } = await sendTest(hook.id);
    const got = await waitFor(() => r.received[0], { what: 'the test event' });
    assert.equal(got.headers['webhook-id'], eventId);
    assert.equal(got.headers['content-type'], 'application/json');
    assert.match(String(got.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
    const payload = verify(hook.secret, got);
    assert.equal(payload.type, 'webhook.test');
    assert.deepEqual(Object.keys(payload).sort(), ['data', 'timestamp', 'type']);
    assert.equal((payload.data as { webhookId: string }).webhookId, hook.id);
    assert.throws(() => verify(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, got), /No matching signature/);
    const list = await waitFor(async () => {
      const d = await deliveries(t.app, user, hook.id);
      return d[0]?.status === 'delivered' ? d : undefined;
    });
    assert.equal(list[0]?.eventId, eventId);
    assert.equal(list[0]?.type, 'webhook.test');
    assert.equal(list[0]?.attempts, 1);
    assert.equal(list[0]?.lastStatusCode, 200);
    assert.equal(typeof list[0]?.lastDurationMs, 'number');
    assert.equal(list[0]?.nextAttemptAt, null);
  });

  test('a receiver answering 500 then 200 gets the same webhook-id twice, both signatures verify', async () => {
    const r = await receiver((n) => ({ status: n === 0 ? 500 : 200 }));
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    const { eventId, deliveryId } = await sendTest(hook.id);
    await waitFor(() => r.received.length >= 2, { what: 'the retry' });
    assert.equal(r.received[0]?.headers['webhook-id'], eventId);
    assert.equal(r.received[1]?.headers['webhook-id'], eventId);
    assert.equal(r.received[0]?.body, r.received[1]?.body, 'the same body on every attempt');
    for (const got of r.received) assert.equal(verify(hook.secret, got).type, 'webhook.test');
    const d = await waitFor(async () => (await deliveries(t.app, user, hook.id)).find((x) => x.status === 'delivered'));
    assert.equal(d.attempts, 2);
    const attempts = await t.storage.db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, deliveryId)).orderBy(webhookAttempts.attempt);
    assert.deepEqual(
      attempts.map((a) => [a.attempt, a.statusCode, a.nextAttemptAt !== null]),
      [
        [1, 500, true],
        [2, 200, false],
      ],
    );
    assert.ok((r.received[1]?.at ?? 0) - (r.received[0]?.at ?? 0) >= 900, 'waited the first retry delay (1 s here)');
  });

  test('a receiver that always fails gets the first attempt and every retry, then the delivery is failed', async () => {
    const r = await receiver(() => ({ status: 500 }));
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    const metric = async (line: string) => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      const m = text.split('\n').find((l) => l.startsWith(`${line} `));
      return Number(m?.split(' ')[1] ?? NaN);
    };
    const failedBefore = await metric('junction_webhook_deliveries_total{outcome="failed"}');
    const attemptsBefore = await metric('junction_webhook_attempts_total');
    await sendTest(hook.id);
    const d = await waitFor(async () => (await deliveries(t.app, user, hook.id)).find((x) => x.status === 'failed'), { timeoutMs: 20_000 });
    // The same figures on /metrics: one more failed delivery, four more attempts (other tests of
    // this file may add attempts of their own, never fewer).
    assert.equal(await metric('junction_webhook_deliveries_total{outcome="failed"}') - failedBefore, 1);
    assert.ok(await metric('junction_webhook_attempts_total') - attemptsBefore >= 4);
    assert.equal(d.attempts, 1 + FAST_WEBHOOKS.retryDelaysSeconds.length);
    assert.equal(r.received.length, 4);
    assert.equal(d.lastStatusCode, 500);
    assert.equal(d.lastError, 'HTTP 500');
    assert.equal(d.nextAttemptAt, null);
    const [row] = await t.storage.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, hook.id));
    assert.equal(row?.status, 'enabled', 'one failed event does not disable the endpoint');
    assert.ok(row?.failingSince, 'the failure streak started');
  });

  test('410 Gone disables the endpoint at once and fails its delivery', async () => {
    const r = await receiver(() => ({ status: 410 }));
    const u = await userOn(t.app);
    const hook = await createWebhook(t.app, u, { url: r.url, events: ['intent.updated'] });
    await sendTest(hook.id, u);
    const d = await waitFor(async () => (await deliveries(t.app, u, hook.id)).find((x) => x.status === 'failed'));
    assert.equal(d.attempts, 1);
    assert.equal(d.lastStatusCode, 410);
    const one = await t.app.inject({ method: 'GET', url: `/api/v1/webhooks/${hook.id}`, headers: u.auth });
    assert.equal(one.json().data.status, 'disabled');
    assert.equal(one.json().data.disabledReason, 'gone');
    // A disabled endpoint gets no more events.
    assert.equal(await publish({ type: 'intent.updated', accountId: u.id, data: { id: 'i1' } }), 0);
    const test = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: u.auth });
    assert.equal(test.statusCode, 409);
    assert.equal(r.received.length, 1);
  });

  test('Retry-After on 429 and 503 is honoured over a shorter scheduled delay', async () => {
    for (const status of [429, 503]) {
      const r = await receiver((n) => (n === 0 ? { status, headers: { 'retry-after': '3' } } : { status: 200 }));
      const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
      const { deliveryId } = await sendTest(hook.id);
      await waitFor(() => r.received.length >= 2, { what: `the retry after ${status}` });
      const gap = (r.received[1]?.at ?? 0) - (r.received[0]?.at ?? 0);
      assert.ok(gap >= 2900, `${status}: the retry came ${gap} ms later; Retry-After said 3 s (the schedule 1 s)`);
      const [first] = await t.storage.db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, deliveryId)).orderBy(webhookAttempts.attempt);
      assert.ok(first?.nextAttemptAt && first.nextAttemptAt.getTime() - first.at.getTime() >= 2900);
    }
  });

  test('after a rotation both the old and the new secret verify; once the overlap ends only the new one signs', async () => {
    const r = await receiver();
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    const rotated = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/rotate-secret`, headers: user.auth });
    const newSecret = rotated.json().data.secret as string;
    // The old secret keeps signing for webhooks.rotationOverlapSeconds: 24 h by default.
    assert.equal(t.config.webhooks.rotationOverlapSeconds, 86_400);
    const [rotatedRow] = await t.storage.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, hook.id));
    const overlapMs = (rotatedRow?.previousSecretExpiresAt?.getTime() ?? 0) - Date.now();
    assert.ok(Math.abs(overlapMs - 86_400_000) < 60_000, `the old secret signs for ${overlapMs} ms more`);
    await sendTest(hook.id);
    const got = await waitFor(() => r.received[0]);
    assert.equal(String(got.headers['webhook-signature']).split(' ').length, 2);
    assert.equal(verify(newSecret, got).type, 'webhook.test');
    assert.equal(verify(hook.secret, got).type, 'webhook.test');
    // The overlap (24 h by default) is over:
    await t.storage.db.update(webhookEndpoints).set({ previousSecretExpiresAt: new Date(Date.now() - 1000) }).where(eq(webhookEndpoints.id, hook.id));
    await sendTest(hook.id);
    const later = await waitFor(() => r.received[1]);
    assert.equal(String(later.headers['webhook-signature']).split(' ').length, 1);
    assert.equal(verify(newSecret, later).type, 'webhook.test');
    assert.throws(() => verify(hook.secret, later));
  });

  test('events go to the endpoints whose type, filters and plan want them (C38)', async () => {
    const r = await receiver();
    const owner = await userOn(t.app);
    const before = r.received.length;
    assert.equal(before, 0);
    const big = await createWebhook(t.app, owner, { url: `${r.url}/big`, events: ['whale.alert'], filters: { networks: ['native-mainnet'], minValue: '1000' } });
    const all = await createWebhook(t.app, owner, { url: `${r.url}/all`, events: ['whale.alert'] });
    await createWebhook(t.app, owner, { url: `${r.url}/testnet`, events: ['whale.alert'], filters: { networks: ['native-testnet'] } });
    await createWebhook(t.app, owner, { url: `${r.url}/quota`, events: ['usage.quota'] });
    const downgraded = await userOn(t.app);
    await createWebhook(t.app, downgraded, { url: `${r.url}/downgraded`, events: ['whale.alert'] });
    await setTier(t.app, downgraded.id, 'pro', ADMIN_TOKEN);
    // Only this account's endpoints are looked at by this test's counts:
    const mine = async (path: string) => r.received.filter((x) => x.path === `/hook/${path}`);
    const alert = (value: string) => ({ id: `a-${value}`, network: 'native-mainnet', value, txHash: '0x01', from: '0x02', to: '0x03' });
    await publish({ type: 'whale.alert', data: alert('999.999999') });
    await publish({ type: 'whale.alert', data: alert('1000') });
    t.app.parts.webhooks.wake();
    await waitFor(async () => (await mine('all')).length === 2 && (await mine('big')).length === 1, { what: 'the alerts' });
    const bigGot = await mine('big');
    assert.equal((verify(big.secret, bigGot[0] as never).data as { value: string }).value, '1000');
    const allGot = await mine('all');
    assert.deepEqual(allGot.map((x) => (verify(all.secret, x as never).data as { value: string }).value).sort(), ['1000', '999.999999']);
    assert.equal((await mine('testnet')).length, 0);
    assert.equal((await mine('quota')).length, 0);
    assert.equal((await mine('downgraded')).length, 0, 'a plan without webhooks gets none');
  });

  test('an endpoint failing for disableAfterFailingDays days in a row is disabled', async () => {
    const r = await receiver(() => ({ status: 502 }));
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    await t.storage.db.update(webhookEndpoints).set({ failingSince: new Date(Date.now() - 6 * 86_400_000) }).where(eq(webhookEndpoints.id, hook.id));
    await sendTest(hook.id);
    const row = await waitFor(async () => {
      const [x] = await t.storage.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, hook.id));
      return x?.status === 'disabled' ? x : undefined;
    });
    assert.equal(row.disabledReason, 'failing');
    assert.equal((await deliveries(t.app, user, hook.id))[0]?.status, 'failed');
    assert.equal(r.received.length, 1);
    // Enabled again by its owner: the streak starts over.
    const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/webhooks/${hook.id}`, headers: user.auth, payload: { status: 'enabled' } });
    assert.equal(res.json().data.status, 'enabled');
    const [again] = await t.storage.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, hook.id));
    assert.equal(again?.failingSince, null);
  });

  test('a receiver that never answers holds neither the other receivers nor more than its share of the senders', async () => {
    const dead = await receiver(() => ({ hang: true }));
    const fast = await receiver();
    const u = await userOn(t.app);
    const deadHook = await createWebhook(t.app, u, { url: dead.url, events: ['intent.updated'] });
    const fastHook = await createWebhook(t.app, u, { url: fast.url, events: ['intent.updated'] });
    for (let i = 0; i < 6; i++) await sendTest(deadHook.id, u);
    await waitFor(() => dead.received.length >= 2, { what: 'the dead receiver to hold requests' });
    await sendTest(fastHook.id, u);
    await waitFor(() => fast.received.length === 1, { what: 'the fast receiver' });
    // concurrency 4: at most half of it (2) waits on one receiver at a time.
    assert.equal(dead.maxOpen, 2, 'requests held at once by the dead receiver');
    const timedOut = await waitFor(async () => (await deliveries(t.app, u, deadHook.id)).find((d) => d.lastError !== null));
    assert.match(String(timedOut.lastError), /no answer within 2000 ms/);
    await t.app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${deadHook.id}`, headers: u.auth });
  });

  test('settled deliveries older than deliveryRetentionDays are deleted, pending ones stay', async () => {
    const r = await receiver();
    const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
    const { deliveryId } = await sendTest(hook.id);
    await waitFor(async () => (await deliveries(t.app, user, hook.id))[0]?.status === 'delivered');
    await t.storage.db.update(webhookDeliveries).set({ createdAt: sql`now() - interval '31 days'` }).where(eq(webhookDeliveries.id, deliveryId));
    await t.app.parts.webhooks.sweep();
    assert.deepEqual(await deliveries(t.app, user, hook.id), []);
    const attempts = await t.storage.db.select().from(webhookAttempts).where(eq(webhookAttempts.deliveryId, deliveryId));
    assert.deepEqual(attempts, []);
  });

  test('no signing secret appears in the logs', () => {
    const text = t.logs.join('');
    assert.ok(!/whsec_/.test(text));
  });
});

describe('webhook delivery at shutdown (C39)', () => {
  test('a stop aborts an attempt still waiting after the grace period and leaves its row due, unrecorded', async () => {
    const r = await startReceiver(() => ({ hang: true }));
    const t = await startTestApp({ env: { ADMIN_TOKEN }, overrides: { webhooks: { ...FAST_WEBHOOKS, timeoutMs: 60_000 } } });
    try {
      const user = await userOn(t.app);
      const hook = await createWebhook(t.app, user, { url: r.url, events: ['intent.updated'] });
      const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: user.auth });
      const { deliveryId } = res.json().data as { deliveryId: string };
      await waitFor(() => r.received.length === 1, { what: 'the attempt to start' });
      await t.app.close();
      const [row] = await t.storage.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, deliveryId));
      assert.equal(row?.status, 'pending');
      assert.equal(row?.attempts, 0, 'not counted as an attempt');
      assert.equal(row?.claimToken, null, 'released: due again at once on another instance or the next start');
    } finally {
      await t.close().catch(() => {});
      await r.close();
    }
  });
});

describe('webhook delivery beside the RPC path (C39)', () => {
  test('while a dead receiver holds every attempt it may, JSON-RPC calls are answered and other work goes on', async () => {
    const dead = await startReceiver(() => ({ hang: true }));
    const node = await startFakeNode();
    const t = await startTestApp({
      env: { ADMIN_TOKEN, UPSTREAM_NATIVE_MAINNET: node.url },
      overrides: { webhooks: { ...FAST_WEBHOOKS, concurrency: 2, timeoutMs: 60_000 } },
    });
    try {
      const user = await userOn(t.app);
      const hook = await createWebhook(t.app, user, { url: dead.url, events: ['intent.updated'] });
      for (let i = 0; i < 4; i++) {
        const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: user.auth });
        assert.equal(res.statusCode, 200);
      }
      await waitFor(() => dead.received.length >= 1 && t.app.parts.webhooks.stats.inFlight >= 1, { what: 'attempts held by the dead receiver' });
      const held = t.app.parts.webhooks.stats.inFlight;
      const { key } = await createKey(t.app, {}, user);
      const calls = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: { jsonrpc: '2.0', id: i, method: 'eth_chainId', params: [] } }),
        ),
      );
      for (const res of calls) {
        assert.equal(res.statusCode, 200, res.body);
        assert.ok(res.json().result !== undefined, res.body);
      }
      // Answered while the attempts were still waiting on the receiver (their timeout is a minute).
      assert.equal(t.app.parts.webhooks.stats.inFlight, held, 'the attempts are still in flight');
      assert.equal(t.app.parts.webhooks.stats.attempts, 0, 'none of them has ended');
      const rows = await deliveries(t.app, user, hook.id);
      assert.ok(rows.every((d) => d.status === 'pending'));
      // C39: an attempt is counted in storage before it is sent: those held by the receiver show 1.
      assert.equal(rows.filter((d) => d.attempts === 1).length, held, JSON.stringify(rows.map((d) => d.attempts)));
      assert.equal(rows.filter((d) => d.attempts === 0).length, rows.length - held);
    } finally {
      await t.close().catch(() => {});
      await dead.close();
      await node.close();
    }
  });
});
