// A receiver down for "30 minutes" (C39's default schedule compressed 300 times: 30 min = 6 s)
// while events keep coming: once it is back it gets every event, in creation order per endpoint,
// none lost, each signature verifying with `standardwebhooks`, on real PostgreSQL.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { startTestApp, type TestApp } from '../support/app.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, userOn } from './helpers.ts';

const skip = await serviceSkip('PostgreSQL');
const SCALE = 300;
/** config/default.json's schedule (5 s, 5 min, 30 min, 2 h, ...) divided by SCALE. */
const SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000].map((s) => s / SCALE);
const OUTAGE_MS = (30 * 60 * 1000) / SCALE;
/** Attempts in flight for one endpoint: half of `webhooks.concurrency` (8 below). */
const PER_ENDPOINT = 4;

interface Got {
  headers: IncomingHttpHeaders;
  body: string;
  path: string;
}

/** A receiver that can go down (port closed: connection refused) and come back on the same port. */
async function outageReceiver() {
  const received: Got[] = [];
  let server: Server | undefined;
  const listen = (port: number) =>
    new Promise<number>((resolve) => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), path: req.url ?? '' });
          res.writeHead(200).end('ok');
        });
      });
      server.listen(port, '127.0.0.1', () => resolve((server?.address() as AddressInfo).port));
    });
  const port = await listen(0);
  const down = () =>
    new Promise<void>((resolve) => {
      server?.closeAllConnections();
      server?.close(() => resolve());
    });
  return { received, url: `http://127.0.0.1:${port}/hook`, down, up: () => listen(port), close: down };
}

describe('a webhook receiver down for 30 (compressed) minutes (C39)', { skip }, () => {
  let t: TestApp;
  let r: Awaited<ReturnType<typeof outageReceiver>>;

  before(async () => {
    r = await outageReceiver();
    t = await startTestApp({
      backend: 'postgres',
      env: { ADMIN_TOKEN },
      overrides: { webhooks: { allowPrivateTargets: true, retryDelaysSeconds: SCHEDULE, pollIntervalMs: 50, timeoutMs: 2000, concurrency: 8 } },
    });
  });
  after(async () => {
    await t?.close();
    await r?.close();
  });

  const publish = (accountId: string, tag: string, i: number) =>
    t.storage.db.transaction(async (tx) => {
      await t.app.parts.webhooks.publish(tx, { type: 'intent.updated', accountId, data: { id: `${tag}-${i}` } });
    });

  test('every event arrives once the receiver is back, in creation order per endpoint, none lost', async () => {
    const user = await userOn(t.app);
    const one = await createWebhook(t.app, user, { url: `${r.url}?e=1`, events: ['intent.updated'] });
    const two = await createWebhook(t.app, user, { url: `${r.url}?e=2`, events: ['intent.updated'] });
    const secrets = new Map([
      ['1', one.secret],
      ['2', two.secret],
    ]);
    let sent = 0;
    // Before the outage: delivered at once.
    for (; sent < 5; sent++) await publish(user.id, 'ev', sent);
    t.app.parts.webhooks.wake();
    await waitFor(() => r.received.length >= 10, { what: 'the first 10 deliveries' });
    await r.down();
    const outageEnds = Date.now() + OUTAGE_MS;
    // Events keep coming during the outage (one every 150 ms: many retry cycles of the head event).
    while (Date.now() < outageEnds) {
      await publish(user.id, 'ev', sent++);
      t.app.parts.webhooks.wake();
      await sleep(150);
    }
    const pendingAtReturn = r.received.length;
    assert.equal(pendingAtReturn, 10, 'nothing arrives while the receiver is down');
    await r.up();
    // The head event's retry that falls due after the outage is the one at 30 (compressed) minutes;
    // on a loaded machine the receiver can come back just after it, and the next is 2 h (24 s) later.
    await waitFor(() => r.received.length >= 2 * sent, { what: `all ${2 * sent} deliveries`, timeoutMs: 45_000 });
    const expected = Array.from({ length: sent }, (_, i) => `ev-${i}`);
    for (const [endpoint, secret] of secrets) {
      const mine = r.received.filter((g) => g.path.endsWith(`e=${endpoint}`));
      // At least once, and here exactly once: the claim lease is far longer than an attempt.
      const firsts: string[] = [];
      const seen = new Set<string>();
      for (const g of mine) {
        const payload = new Webhook(secret).verify(g.body, g.headers as Record<string, string>) as { data: { id: string } };
        if (seen.has(String(g.headers['webhook-id']))) continue;
        seen.add(String(g.headers['webhook-id']));
        firsts.push(payload.data.id);
      }
      // Every event, once: none lost.
      const byNumber = (a: string, b: string) => Number(a.slice(3)) - Number(b.slice(3));
      assert.deepEqual([...firsts].sort(byNumber), expected, `endpoint ${endpoint}: every event once`);
      // While the endpoint failed only its oldest pending event was attempted: it is the first to arrive after the outage.
      assert.equal(firsts[5], 'ev-5', `endpoint ${endpoint}: the oldest pending event first after the outage`);
      // Sent in creation order; with up to PER_ENDPOINT attempts in flight to a receiver that is up,
      // neighbours may arrive swapped (docs/whales-and-webhooks.md), never further apart than that.
      firsts.forEach((id, i) => assert.ok(Math.abs(Number(id.slice(3)) - i) < PER_ENDPOINT, `endpoint ${endpoint}: ${id} arrived ${i + 1}th`));
    }
  });
});
