// C39: webhook targets that are, or resolve to, loopback or private addresses are refused on
// create, and again at send time (after DNS resolution, on the address connected to), by the
// running gateway's sender. The address rules on their own: test/webhooks/ssrf.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { webhookEndpoints } from '../../src/webhooks/schema.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, deliveries, type Receiver, startReceiver, type User, userOn } from './helpers.ts';
import { loopbackName } from './loopback-name.ts';

describe('SSRF guard at send time (C39)', () => {
  let t: TestApp;
  let r: Receiver;
  let user: User;

  before(async () => {
    t = await startTestApp({
      env: { ADMIN_TOKEN },
      overrides: { webhooks: { allowPrivateTargets: false, retryDelaysSeconds: [1], pollIntervalMs: 100, timeoutMs: 2000 } },
    });
    r = await startReceiver();
    user = await userOn(t.app);
  });
  after(async () => {
    await t?.close();
    await r?.close();
  });

  test('a hostname of this machine that resolves to 127.0.0.1 is refused on create', async (ctx) => {
    const name = await loopbackName();
    if (!name) return ctx.skip('no name of this machine resolves to a loopback address');
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/webhooks', headers: user.auth, payload: { url: `http://${name}:${r.port}/hook`, events: ['intent.updated'] } });
    assert.equal(res.statusCode, 400);
  });

  test('an endpoint whose target became private is refused when sending, by address and by name', async () => {
    const name = await loopbackName();
    const targets = [`http://127.0.0.1:${r.port}/hook`, `http://[::ffff:127.0.0.1]:${r.port}/hook`, `http://localhost:${r.port}/hook`];
    if (name) targets.push(`http://${name}:${r.port}/hook`);
    for (const target of targets) {
      // Made with a public address, then (say, by a DNS change) the target points inside.
      const hook = await createWebhook(t.app, user, { url: 'http://93.184.215.14/hook', events: ['intent.updated'] });
      await t.storage.db.update(webhookEndpoints).set({ url: target }).where(eq(webhookEndpoints.id, hook.id));
      const res = await t.app.inject({ method: 'POST', url: `/api/v1/webhooks/${hook.id}/test`, headers: user.auth });
      assert.equal(res.statusCode, 200);
      const d = await waitFor(async () => (await deliveries(t.app, user, hook.id)).find((x) => x.lastError !== null), { what: `the refused attempt to ${target}` });
      assert.match(String(d.lastError), /^refused target: .*(loopback|private)/, target);
      assert.equal(d.lastStatusCode, null);
      await t.app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${hook.id}`, headers: user.auth });
    }
    assert.equal(r.received.length, 0, 'nothing reached the private receiver');
  });
});
