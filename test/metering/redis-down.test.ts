import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { createKey, registerUser, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { hasRedisServer, type OwnRedis, startOwnRedis } from '../support/redis-server.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const ADMIN = 'admin-token-0123456789abcdef';
const pgSkip = await serviceSkip('PostgreSQL');
const skip = pgSkip || (hasRedisServer() ? false : 'no redis-server binary (apt-get install -y redis-server)');
const call = (id = 1) => ({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] });
/** Far beyond redis.commandTimeoutMs (250 ms): a call that takes this long waited on Redis. */
const HUNG_MS = 5_000;

describe('Redis away: every limit enforced per instance in memory, shared again when it returns (C48)', { skip }, () => {
  let redis: OwnRedis;
  let fake: FakeNode;
  let scale: ScaleOut | undefined;
  let a: TestApp;
  let b: TestApp;

  before(async () => {
    redis = await startOwnRedis();
    fake = await startFakeNode();
    scale = await startScaleOut({ redisUrl: redis.url, env: { UPSTREAM_NATIVE_MAINNET: fake.url, ADMIN_TOKEN: ADMIN } });
    ({ a, b } = scale);
  });
  after(async () => {
    await scale?.close();
    await fake?.close();
    await redis?.close();
  });

  /** One RPC call; 'hung' when it has no answer after HUNG_MS. */
  const rpc = async (t: TestApp, key: string): Promise<LightMyRequestResponse | 'hung'> => {
    const res = t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call() });
    return Promise.race([res, sleep(HUNG_MS).then(() => 'hung' as const)]);
  };
  const statuses = (all: Array<LightMyRequestResponse | 'hung'>) => all.map((r) => (r === 'hung' ? 'hung' : r.statusCode));
  const count = (s: Array<number | string>, v: number | string) => s.filter((x) => x === v).length;
  const redisState = async (t: TestApp) => {
    const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
    return { status: res.statusCode, redis: res.json().checks.redis as { ok: boolean; state: string; error?: string } };
  };
  const metric = async (t: TestApp, name: string) => {
    const body = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    const m = new RegExp(`^${name} (\\d+)`, 'm').exec(body);
    return m ? Number(m[1]) : undefined;
  };
  const bothUp = () =>
    waitFor(async () => (await redisState(a)).redis.state === 'up' && (await redisState(b)).redis.state === 'up', {
      timeoutMs: 5_000,
      intervalMs: 50,
      what: 'both instances to use Redis again (C48: within seconds)',
    });
  const sharedLimitHolds = async () => {
    const { key } = await createKey(a.app, { rateLimit: 4 });
    const s = statuses(await Promise.all(Array.from({ length: 12 }, (_, i) => rpc(i % 2 ? a : b, key))));
    assert.deepEqual([count(s, 200), count(s, 429)], [4, 8], `one shared window of 4 for both instances: ${s.join(' ')}`);
  };

  test('Redis killed: no call fails or waits, each instance admits a key its limit and no more, and says so in /health/ready, metrics and one log line', async () => {
    const { key } = await createKey(a.app, { rateLimit: 5 });
    assert.equal((await rpc(b, key)) !== 'hung', true, 'b knows the key');
    await redis.kill();

    // C48: a key gets at most its limit per instance, never unlimited: 5 + 3 at once on each. b
    // starts from the one call it admitted through Redis: 4 more in this minute.
    for (const [t, admitted] of [[a, 5], [b, 4]] as const) {
      const s = statuses(await Promise.all(Array.from({ length: 8 }, () => rpc(t, key))));
      assert.deepEqual([count(s, 200), count(s, 429)], [admitted, 8 - admitted], `${admitted} admitted, the rest refused, nothing else: ${s.join(' ')}`);
    }
    for (const t of [a, b]) {
      const ready = await redisState(t);
      assert.equal(ready.status, 200, 'the instance serves, so it stays ready');
      assert.equal(ready.redis.state, 'degraded');
      assert.equal(ready.redis.ok, true);
      assert.match(ready.redis.error ?? '', /in memory/);
      assert.equal(await metric(t, 'junction_redis_up'), 0);
      assert.ok(((await metric(t, 'junction_limiter_memory_calls_total')) ?? 0) >= 8);
    }
    assert.equal(a.logs.filter((l) => l.includes('Redis does not answer')).length, 1, 'logged once on the way down');

    await redis.restart();
    await bothUp();
    assert.equal(a.logs.filter((l) => l.includes('Redis answers again')).length, 1, 'logged once on the way back');
    assert.equal(await metric(a, 'junction_redis_up'), 1);
    await sharedLimitHolds();
  });

  test('a daily quota spent before and during the outage is not handed out again by a Redis that came back empty', async () => {
    const u = await registerUser(a.app);
    const set = await a.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: { dailyLimit: 6 } } });
    assert.equal(set.statusCode, 200, set.body);
    const { key } = await createKey(a.app, {}, u);
    for (let i = 0; i < 2; i++) assert.deepEqual(statuses([await rpc(a, key)]), [200]);
    await redis.kill();
    // Memory starts from the 2 Redis counted: 4 more today, not 6.
    const during = statuses(await Promise.all(Array.from({ length: 6 }, () => rpc(a, key))));
    assert.deepEqual([count(during, 200), count(during, 429)], [4, 2], during.join(' '));
    await redis.restart();
    await bothUp();
    // Written back: 2 + 4 of 6, on either instance.
    for (const t of [a, b]) {
      const res = await rpc(t, key);
      assert.notEqual(res, 'hung');
      if (res === 'hung') return;
      assert.equal(res.statusCode, 429, res.body);
      assert.equal(res.json().error.data?.limit, 'daily');
    }
  });

  test('a key limited to 30 a minute gets 30 in the minute on one instance across the loss of Redis and its return empty, not 30 more each time; two instances 2 x 30', async () => {
    await bothUp();
    const { key } = await createKey(a.app, { rateLimit: 30 });
    const fire = async (t: TestApp) => statuses(await Promise.all(Array.from({ length: 40 }, () => rpc(t, key))));
    const refusedAll = (s: Array<number | string>) => assert.deepEqual([count(s, 200), count(s, 429)], [0, 40], s.join(' '));
    let s = await fire(a);
    assert.deepEqual([count(s, 200), count(s, 429)], [30, 10], `with Redis: ${s.join(' ')}`);

    await redis.kill();
    // a carries the 30 it admitted through Redis into memory: none more this minute.
    refusedAll(await fire(a));
    // b admitted none of them itself: its own 30 (C48: N instances, at most N x the limit).
    s = await fire(b);
    assert.deepEqual([count(s, 200), count(s, 429)], [30, 10], `b in memory: ${s.join(' ')}`);

    await redis.restart();
    await bothUp();
    // Redis came back empty: a put back the 30 it admitted before, b the 30 of the outage.
    refusedAll(await fire(a));
    refusedAll(await fire(b));
  });

  test('Redis hung (SIGSTOP): calls wait at most redis.commandTimeoutMs, then limits hold in memory until it answers again', async () => {
    const { key } = await createKey(a.app, { rateLimit: 5 });
    assert.notEqual(await rpc(a, key), 'hung');
    redis.freeze();
    try {
      const s = statuses(await Promise.all(Array.from({ length: 8 }, () => rpc(a, key))));
      assert.equal(count(s, 'hung'), 0, `no call waits on a hung Redis: ${s.join(' ')}`);
      // Memory starts from the call admitted through Redis just before: 4 more.
      assert.deepEqual([count(s, 200), count(s, 429)], [4, 4], s.join(' '));
      const ready = await redisState(a);
      assert.equal(ready.status, 200);
      assert.equal(ready.redis.state, 'degraded');
      assert.match(ready.redis.error ?? '', /timed out/i);
    } finally {
      redis.thaw();
    }
    await bothUp();
    await sharedLimitHolds();
  });

  test('a busy gateway is not a hung Redis: calls in flight while the event loop is blocked past redis.commandTimeoutMs keep the shared limit', async () => {
    await bothUp();
    const { key } = await createKey(a.app, { rateLimit: 4 });
    let settled = false;
    const calls = Promise.all(Array.from({ length: 12 }, (_, i) => rpc(i % 2 ? a : b, key))).finally(() => (settled = true));
    // One turn of the loop (the calls move on by one step: a command sent, an answer read), then
    // 300 ms of work on this thread, longer than the 250 ms timeout: every command sent meanwhile
    // has both its answer in the socket and its timer expired when the loop comes back.
    for (let turn = 0; turn < 40 && !settled; turn++) {
      await new Promise((r) => setImmediate(r));
      const until = Date.now() + 300;
      while (Date.now() < until) {
        // a synchronous burst: a slow machine's first calls, a long GC
      }
    }
    const s = statuses(await calls);
    assert.deepEqual([count(s, 200), count(s, 429)], [4, 8], `one shared window of 4 for both instances: ${s.join(' ')}`);
    for (const t of [a, b]) assert.equal((await redisState(t)).redis.state, 'up', 'Redis answered every command: it was this process that was late');
  });

  test('key changes cross instances again once Redis returns: one made during the outage, and new ones over the resubscribed channel', async () => {
    const { key, id, user } = await createKey(a.app);
    assert.deepEqual(statuses([await rpc(b, key)]), [200], 'b has the key cached');
    redis.freeze();
    let revoked;
    try {
      revoked = await a.app.inject({ method: 'POST', url: `/api/v1/api-keys/${id}/revoke`, headers: user.auth });
    } finally {
      redis.thaw();
    }
    assert.equal(revoked.statusCode, 200, revoked.body);
    await waitFor(async () => {
      const r = await rpc(b, key);
      return r !== 'hung' && r.statusCode === 401;
    }, { timeoutMs: 5_000, intervalMs: 50, what: 'b to refuse the key revoked while Redis was away' });

    await redis.kill();
    await redis.restart();
    await bothUp();
    // ioredis subscribes again on its own after a reconnect: both instances listen before the change is made.
    const probe = new Redis(redis.url);
    try {
      await waitFor(async () => {
        const [, n] = (await probe.pubsub('NUMSUB', 'junction:key-changes')) as [string, number];
        return n === 2;
      }, { timeoutMs: 5_000, intervalMs: 50, what: 'both instances to subscribe again' });
    } finally {
      probe.disconnect();
    }
    const next = await createKey(a.app);
    assert.deepEqual(statuses([await rpc(b, next.key)]), [200]);
    const r2 = await a.app.inject({ method: 'POST', url: `/api/v1/api-keys/${next.id}/revoke`, headers: next.user.auth });
    assert.equal(r2.statusCode, 200);
    await waitFor(async () => {
      const r = await rpc(b, next.key);
      return r !== 'hung' && r.statusCode === 401;
    }, { timeoutMs: 1_000, intervalMs: 25, what: 'b to refuse a key revoked on a after Redis came back (C20)' });
  });
});

describe('a start while Redis is away: served with limits in memory, shared once it answers (C48)', { skip }, () => {
  let redis: OwnRedis;
  let fake: FakeNode;
  let scale: ScaleOut | undefined;

  before(async () => {
    redis = await startOwnRedis();
    await redis.kill();
    fake = await startFakeNode();
  });
  after(async () => {
    await scale?.close();
    await fake?.close();
    await redis?.close();
  });

  test('two instances start with Redis down, each admits a key its limit of 5 of 8 fired at once; when Redis starts both share limits within seconds, carrying what they admitted, and key changes cross', async () => {
    // Before C48 covered the start, opening the Redis connection threw here and the instance never started.
    scale = await startScaleOut({ redisUrl: redis.url, env: { UPSTREAM_NATIVE_MAINNET: fake.url, ADMIN_TOKEN: ADMIN } });
    const { a, b } = scale;
    const rpc = (t: TestApp, key: string) => t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call() });
    const state = async (t: TestApp) => (await t.app.inject({ method: 'GET', url: '/health/ready' })).json().checks.redis as { ok: boolean; state: string };
    const fire = async (t: TestApp, key: string, n: number) => {
      const codes = (await Promise.all(Array.from({ length: n }, () => rpc(t, key)))).map((r) => r.statusCode);
      return [codes.filter((c) => c === 200).length, codes.filter((c) => c === 429).length];
    };
    for (const t of [a, b]) {
      const ready = await state(t);
      assert.deepEqual([ready.ok, ready.state], [true, 'degraded'], 'ready, and says Redis is away');
      assert.equal(t.logs.filter((l) => l.includes('Redis does not answer')).length, 1, 'one line on the way in');
    }
    const { key, user } = await createKey(a.app, { rateLimit: 5 });
    // C48: at most the limit per instance, never unlimited (N instances, at most N x the limit).
    assert.deepEqual(await fire(a, key, 8), [5, 3]);
    assert.deepEqual(await fire(b, key, 8), [5, 3]);

    await redis.restart();
    await waitFor(async () => (await state(a)).state === 'up' && (await state(b)).state === 'up', { timeoutMs: 5_000, intervalMs: 50, what: 'both instances to use Redis once it answers' });
    // What each admitted in memory went to Redis: the key's window is spent on both.
    assert.deepEqual(await fire(a, key, 4), [0, 4]);
    assert.deepEqual(await fire(b, key, 4), [0, 4]);
    const fresh = await createKey(a.app, { rateLimit: 4 });
    const codes = (await Promise.all(Array.from({ length: 12 }, (_, i) => rpc(i % 2 ? a : b, fresh.key)))).map((r) => r.statusCode);
    assert.deepEqual([codes.filter((c) => c === 200).length, codes.filter((c) => c === 429).length], [4, 8], `one shared window of 4: ${codes.join(' ')}`);

    // The key-change channel, never subscribed at the start, is subscribed by the first connection.
    const probe = new Redis(redis.url);
    try {
      await waitFor(async () => ((await probe.pubsub('NUMSUB', 'junction:key-changes')) as [string, number])[1] === 2, {
        timeoutMs: 5_000,
        intervalMs: 50,
        what: 'both instances to subscribe to key changes',
      });
    } finally {
      probe.disconnect();
    }
    const other = await createKey(a.app, {}, user);
    assert.equal((await rpc(b, other.key)).statusCode, 200, 'b has the key cached');
    const revoked = await a.app.inject({ method: 'POST', url: `/api/v1/api-keys/${other.id}/revoke`, headers: user.auth });
    assert.equal(revoked.statusCode, 200, revoked.body);
    await waitFor(async () => (await rpc(b, other.key)).statusCode === 401, { timeoutMs: 1_000, intervalMs: 25, what: 'b to refuse a key revoked on a (C20)' });
  });
});
