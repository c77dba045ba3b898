// C39: targets that are, or resolve to, loopback, private, link-local or metadata addresses are
// refused on create and again at send time (after DNS resolution, on the address connected to).
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { webhookEndpoints } from '../../src/webhooks/schema.ts';
import { checkTargetHost, isForbiddenAddress } from '../../src/webhooks/ssrf.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, deliveries, type Receiver, startReceiver, type User, userOn } from './helpers.ts';

/** A name of this machine that resolves to a loopback address (not spelled "localhost"), if any. */
async function loopbackName(): Promise<string | undefined> {
  const name = hostname();
  try {
    const all = await lookup(name, { all: true });
    return all.length > 0 && all.every((a) => isForbiddenAddress(a.address)) && name !== 'localhost' ? name : undefined;
  } catch {
    return undefined;
  }
}

describe('SSRF guard: the address rules', () => {
  test('forbidden: loopback, private, link-local, CGNAT, multicast, unspecified, reserved, mapped and metadata addresses', () => {
    for (const ip of [
      '127.0.0.1',
      '127.255.255.254',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '224.0.0.251',
      '255.255.255.255',
      '::',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:a9fe:a9fe',
      'fd00:ec2::254',
      'fe80::1',
      'ff02::1',
      '64:ff9b::a00:1',
      // IPv4-translated, and the rest of IANA's special-purpose registries
      '::ffff:0:7f00:1',
      '::ffff:0:a00:1',
      '192.31.196.1',
      '192.52.193.1',
      '192.88.99.1',
      '192.175.48.1',
      '2001::1',
      '2001:2::1',
      '2001:20::1',
      '100:0:0:1::1',
      '2620:4f:8000::1',
      '3fff::1',
      '5f00::1',
    ]) {
      assert.equal(isForbiddenAddress(ip), true, ip);
    }
  });

  test('allowed: public addresses', () => {
    for (const ip of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8']) {
      assert.equal(isForbiddenAddress(ip), false, ip);
    }
  });

  test('a name resolving to a loopback address is refused', async () => {
    await assert.rejects(checkTargetHost('localhost'), /loopback/);
    const name = await loopbackName();
    if (name) await assert.rejects(checkTargetHost(name), /resolves to a loopback/);
    await assert.rejects(checkTargetHost('no-such-host.invalid'), /does not resolve/);
  });
});

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
