// Building the app has no side effects. `buildApp` opens no connection and starts
// no timer; every piece of background work (the Redis subscription, sweeps, pings, flushes) starts
// when the app is ready and stops when it closes, leaving the process as it found it.
import assert from 'node:assert/strict';
import { createHook } from 'node:async_hooks';
import { Socket } from 'node:net';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { openStorage } from '../../src/storage/db.ts';
import { TEST_PASSWORD_HASH_COST, TEST_SECRETS } from '../support/app.ts';
import { startFakeNode } from '../support/fake-node.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';
import { REDIS_URL, serviceSkip } from '../support/services.ts';

const redisSkip = await serviceSkip('Redis');

// `process.getActiveResourcesInfo()` leaves out what does not keep the process alive, and the
// app's timers are all unref'd: every timer and socket made from here on is tracked as well,
// until it is destroyed (cleared, fired, closed).
const TRACKED = /^(Timeout|TCPWRAP|TCPCONNECTWRAP|TCPSERVERWRAP|PIPEWRAP|PIPECONNECTWRAP|UDPWRAP|TLSWRAP|HTTPCLIENTREQUEST|HTTPINCOMINGMESSAGE)$/;
const live = new Map<number, string>();
createHook({
  init(id, type) {
    if (TRACKED.test(type)) live.set(id, type);
  },
  destroy(id) {
    live.delete(id);
  },
}).enable();

/** Resources by type: those keeping the process alive, and the live timers and sockets (unref'd ones included). */
function snapshot(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) out[`active:${type}`] = (out[`active:${type}`] ?? 0) + 1;
  for (const type of live.values()) out[`live:${type}`] = (out[`live:${type}`] ?? 0) + 1;
  return out;
}

/** Sockets open to Redis in this process (the app's own, once it subscribes). */
const redisSockets = () =>
  (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().filter((h) => h instanceof Socket && h.remotePort === Number(new URL(REDIS_URL).port || 6379)).length;

/** What `after` holds beyond `before`, type by type (only the increases). */
function added(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [type, n] of Object.entries(after)) if (n > (before[type] ?? 0)) out[type] = n - (before[type] ?? 0);
  return out;
}

/** Lets callbacks already due run, so that a timer fired or a socket closed meanwhile is counted as gone. */
const settle = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/** Waits until the resources are back to `before` (a closed socket is destroyed a moment later), or returns what is left. */
async function leftOver(before: Record<string, number>, ms = 2_000): Promise<Record<string, number>> {
  const end = Date.now() + ms;
  for (;;) {
    await settle();
    const extra = added(before, snapshot());
    if (Object.keys(extra).length === 0 || Date.now() > end) return extra;
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const variant of [
  { name: 'one instance (no Redis)', redis: false, skip: false as const },
  { name: 'with Redis (REDIS_URL)', redis: true, skip: redisSkip },
]) {
  describe(`the app's lifecycle, ${variant.name}`, { skip: variant.skip }, () => {
    test('buildApp opens no connection and starts no timer; ready + close leave the process as it was before the build', async () => {
      // Every network asks a local fake node: nothing leaves the machine, and the probes' sockets count.
      const node = await startFakeNode();
      const storage = await openStorage({ databaseUrl: null, dataDir: 'memory', pgliteImage: await pgliteTemplate() });
      const upstreams = Object.fromEntries(
        loadConfig({ env: {} }).networks.map((n) => [`UPSTREAM_${n.slug.toUpperCase().replaceAll('-', '_')}`, node.url]),
      );
      const config = loadConfig({ env: { LOG_LEVEL: 'warn', ...upstreams }, overrides: { auth: { passwordHashCost: TEST_PASSWORD_HASH_COST } } });
      const logStream = new Writable({ write: (_chunk, _enc, cb) => cb() });
      // Created lazily: making the client opens nothing, so whatever connects to Redis is the app's doing.
      const redis = variant.redis ? new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 }) : undefined;
      let app: Awaited<ReturnType<typeof buildApp>> | undefined;
      try {
        await settle();
        const before = snapshot();
        app = await buildApp(config, { storage, secrets: TEST_SECRETS, logStream, probeUpstreams: true, ...(redis ? { redis } : {}) });
        await settle();
        assert.deepEqual(added(before, snapshot()), {}, 'buildApp started no timer and opened no socket');
        if (redis) assert.equal(redis.status, 'wait', 'the Redis client was not asked to connect');
        assert.equal(redisSockets(), 0, 'nothing connected to Redis');

        await app.ready();
        const started = added(before, snapshot());
        assert.ok((started['live:Timeout'] ?? 0) > 0, `the background work started with the app: ${JSON.stringify(started)}`);
        // C20: the key-change subscription is made at start, on a connection of its own.
        assert.equal(redisSockets(), redis ? 1 : 0, 'one connection to Redis: the key-change subscription');
        await app.close();
        assert.deepEqual(await leftOver(before), {}, 'close stopped every timer and closed every socket the app had opened');
      } finally {
        await app?.close();
        redis?.disconnect();
        await storage.close();
        await node.close();
      }
    });
  });
}
