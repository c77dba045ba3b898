// Two gateway processes (the compiled dist/main.js) on one PostgreSQL deliver webhooks; the
// receiver holds its answers so attempts are in flight; one instance is SIGKILLed. Its claims run
// out (webhooks.leaseSeconds) and the other instance sends them: every event arrives at least
// once, and a duplicate carries the same webhook-id and body, its signature verifying (C39).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createTestDatabase } from '../support/storage.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, type Receiver, startReceiver } from './helpers.ts';

const skip = await serviceSkip('PostgreSQL');
const EVENTS = 30;
// C59: a gateway outside the devnet takes real secrets only; both instances share these.
const SECRETS = { jwt: randomBytes(32).toString('hex'), key: randomBytes(32).toString('hex') };

describe('an instance SIGKILLed in the middle of webhook deliveries (C39)', { skip, timeout: 60_000 }, () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  let dir: string;
  let r: Receiver;
  const gateways: GatewayProcess[] = [];

  before(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(path.join(tmpdir(), 'junction-wh-kill-'));
    // Each answer takes 1.5 s: attempts are in flight when the kill comes.
    r = await startReceiver(() => ({ status: 200, delayMs: 1500 }));
  });
  after(async () => {
    for (const g of gateways) if (g.child.exitCode === null && g.child.signalCode === null) g.child.kill('SIGKILL');
    await Promise.all(gateways.map((g) => g.exited));
    await r?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    const config = path.join(dir, 'config.json');
    writeFileSync(
      config,
      JSON.stringify({
        webhooks: { allowPrivateTargets: true, timeoutMs: 3000, leaseSeconds: 4, concurrency: 8, pollIntervalMs: 100, retryDelaysSeconds: [1, 1, 1, 1, 1] },
        auth: { passwordHashCost: 10 },
      }),
    );
    const g = await spawnGateway({
      env: {
        DATABASE_URL: db?.url ?? '',
        JWT_SECRET: SECRETS.jwt,
        KEY_ENCRYPTION_SECRET: SECRETS.key,
        ADMIN_TOKEN,
        READY_WHEN: 'storage',
        GATEWAY_CONFIG: config,
      },
    });
    gateways.push(g);
    return g;
  };
  const call = async (g: GatewayProcess, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${g.url}/api/v1${url}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `${method} ${url}: ${text}`);
    return JSON.parse(text).data;
  };

  test('every event is delivered at least once; a duplicate has the same webhook-id, and its delivery counts both attempts', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    assert.ok(a && b);
    const reg = await call(a, 'POST', '/auth/register', { email: `kill-${Date.now()}@example.com`, password: 'long enough pw', name: 'K' });
    await call(a, 'PATCH', `/admin/users/${reg.user.id}`, { tier: 'max' }, { 'x-admin-token': ADMIN_TOKEN });
    const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
    const hook = await call(a, 'POST', '/webhooks', { url: r.url, events: ['intent.updated'] }, auth);
    // Made through instance A, which is woken by each and claims first.
    const eventIds: string[] = [];
    for (let i = 0; i < EVENTS; i++) eventIds.push((await call(a, 'POST', `/webhooks/${hook.id}/test`, undefined, auth)).eventId);
    await waitFor(() => r.received.length >= 4, { what: 'attempts in flight' });
    a.child.kill('SIGKILL');
    await a.exited;
    await waitFor(() => eventIds.every((id) => r.received.some((g) => g.headers['webhook-id'] === id)), {
      what: `all ${EVENTS} events`,
      timeoutMs: 25_000,
    });
    const byId = new Map<string, string[]>();
    for (const g of r.received) {
      const id = String(g.headers['webhook-id']);
      // Every attempt, duplicates included, verifies with the endpoint's secret.
      new Webhook(hook.secret).verify(g.body, g.headers as Record<string, string>);
      byId.set(id, [...(byId.get(id) ?? []), g.body]);
    }
    assert.deepEqual([...byId.keys()].sort(), [...eventIds].sort(), 'only these events, each at least once');
    const duplicated = [...byId.values()].filter((bodies) => bodies.length > 1);
    assert.ok(duplicated.length >= 1, 'the killed instance had attempts in flight: sent again by the other one');
    for (const bodies of duplicated) assert.ok(bodies.every((x) => x === bodies[0]), 'a duplicate carries the same body');
    // The survivor records them all delivered (its last answers come 1.5 s after they arrive).
    const list = await waitFor(
      async () => {
        const all = (await call(b, 'GET', `/webhooks/${hook.id}/deliveries?limit=100`, undefined, auth)) as Array<{ status: string; eventId: string; attempts: number }>;
        return all.filter((d) => d.status === 'delivered').length === EVENTS ? all : undefined;
      },
      { what: 'every delivery recorded delivered', timeoutMs: 10_000 },
    );
    // C39: an attempt is counted before it is sent, so the one cut by the kill is counted too.
    const attemptsOf = new Map(list.map((d) => [d.eventId, d.attempts]));
    for (const [id, bodies] of byId) {
      if (bodies.length > 1) assert.equal(attemptsOf.get(id), bodies.length, `event ${id}: received ${bodies.length} times, attempts ${attemptsOf.get(id)}`);
      else assert.ok((attemptsOf.get(id) ?? 0) >= 1);
    }
  });
});
