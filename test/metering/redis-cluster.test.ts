import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { Cluster } from 'ioredis';
import { createKey, registerUser, type TestApp } from '../support/app.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { hasRedisServer, type OwnRedisCluster, startRedisCluster } from '../support/redis-cluster.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const ADMIN = 'admin-token-0123456789abcdef';
const pgSkip = await serviceSkip('PostgreSQL');
const skip = pgSkip || (hasRedisServer() ? false : 'no redis-server binary (apt-get install -y redis-server)');
const call = (id = 1) => ({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] });
/** Far beyond redis.commandTimeoutMs (250 ms): a call that takes this long waited on Redis. */
const HUNG_MS = 5_000;

describe('Redis Cluster (REDIS_CLUSTER_NODES): limits shared and exact across instances, enforced in memory while a primary is away (C48)', { skip }, () => {
  let cluster: OwnRedisCluster;
  let fake: FakeNode;
  let set: ScaleOut | undefined;
  let a: TestApp | undefined;
  let b: TestApp | undefined;
  let probe: Cluster;

  before(async () => {
    cluster = await startRedisCluster();
    fake = await startFakeNode();
    set = await startScaleOut({ redisClusterNodes: cluster.nodes, env: { UPSTREAM_NATIVE_MAINNET: fake.url, ADMIN_TOKEN: ADMIN } });
    ({ a, b } = set);
    probe = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] as number }]);
  });
  after(async () => {
    probe?.disconnect();
    await set?.close();
    await fake?.close();
    await cluster?.close();
  });

  const A = () => a as TestApp;
  const B = () => b as TestApp;
  const rpc = async (t: TestApp, key: string): Promise<LightMyRequestResponse | 'hung'> => {
    const res = t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call() });
    return Promise.race([res, sleep(HUNG_MS).then(() => 'hung' as const)]);
  };
  const statuses = (all: Array<LightMyRequestResponse | 'hung'>) => all.map((r) => (r === 'hung' ? 'hung' : r.statusCode));
  const count = (s: Array<number | string>, v: number | string) => s.filter((x) => x === v).length;
  const state = async (t: TestApp) => (await t.app.inject({ method: 'GET', url: '/health/ready' })).json().checks.redis.state as string;
  /** Accounts with a per-minute limit of `limit`, one key each, until their limiter keys sit on every primary. */
  const keysOnEveryPrimary = async (limit: number) => {
    const slots = await probe.cluster('SLOTS');
    const primaryOf = (slot: number) => slots.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2]?.[1];
    const out: Array<{ key: string; primary: number }> = [];
    const seen = new Set<number>();
    // Account ids are random: 40 tries miss a primary with a chance of about 3 x (2/3)^40, never in practice.
    for (let i = 0; i < 40 && seen.size < 3; i++) {
      const u = await registerUser(A().app);
      const set = await A().app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: { requestsPerMinute: limit } } });
      assert.equal(set.statusCode, 200, set.body);
      const { key } = await createKey(A().app, {}, u);
      // The limiter's keys of this account carry it as a hash tag: one slot for all of them.
      const slot = Number(await probe.cluster('KEYSLOT', `junction:rl:{${u.id}}:a:${u.id}`));
      const primary = primaryOf(slot) as number;
      seen.add(primary);
      out.push({ key, primary });
    }
    assert.equal(seen.size, 3, 'accounts on all three primaries');
    return out;
  };

  test('a limit of N fired N+k at once across two instances admits exactly N, for keys on every primary; no CROSSSLOT', async () => {
    const keys = await keysOnEveryPrimary(5);
    for (const { key } of keys) {
      const s = statuses(await Promise.all(Array.from({ length: 12 }, (_, i) => rpc(i % 2 ? A() : B(), key))));
      assert.deepEqual([count(s, 200), count(s, 429)], [5, 7], `one shared window of 5: ${s.join(' ')}`);
    }
    // The account's remaining quota (several keys of one account in one script) answers too.
    const me = await registerUser(A().app);
    const remaining = await A().app.inject({ method: 'GET', url: '/api/v1/me', headers: me.auth });
    assert.equal(remaining.statusCode, 200, remaining.body);
    assert.equal(await state(A()), 'up');
    assert.equal(await state(B()), 'up');
    assert.ok(!A().logs.some((l) => /CROSSSLOT/.test(l)) && !B().logs.some((l) => /CROSSSLOT/.test(l)), 'no CROSSSLOT');
  });

  test('the key-change bus crosses instances on the cluster (C20)', async () => {
    const { key, id, user } = await createKey(A().app);
    assert.deepEqual(statuses([await rpc(B(), key)]), [200], 'b has the key cached');
    const r = await A().app.inject({ method: 'POST', url: `/api/v1/api-keys/${id}/revoke`, headers: user.auth });
    assert.equal(r.statusCode, 200);
    await waitFor(async () => {
      const x = await rpc(B(), key);
      return x !== 'hung' && x.statusCode === 401;
    }, { timeoutMs: 1_000, intervalMs: 25, what: 'b to refuse a key revoked on a (C20)' });
  });

  test('one primary hung (SIGSTOP): no call waits or fails, each instance admits a key at most its limit, shared again once it answers', async () => {
    const keys = await keysOnEveryPrimary(4);
    for (const { key } of keys) assert.notEqual(await rpc(B(), key), 'hung');
    const stopped = keys[0]?.primary as number;
    cluster.freeze(cluster.ports.indexOf(stopped));
    try {
      for (const { key, primary } of keys) {
        for (const t of [A(), B()]) {
          const s = statuses(await Promise.all(Array.from({ length: 7 }, () => rpc(t, key))));
          assert.equal(count(s, 'hung'), 0, `no call waits on the stopped primary: ${s.join(' ')}`);
          assert.equal(s.filter((x) => x !== 200 && x !== 429).length, 0, `only 200 and 429: ${s.join(' ')}`);
          // C48: at most the limit per instance (4 already used in Redis for b), never unlimited.
          assert.ok(count(s, 200) <= 4, `${primary === stopped ? 'stopped' : 'live'} primary: at most 4 admitted: ${s.join(' ')}`);
          assert.ok(count(s, 429) >= 3, s.join(' '));
        }
      }
      assert.equal(await state(A()), 'degraded');
    } finally {
      cluster.thaw(cluster.ports.indexOf(stopped));
    }
    await cluster.waitOk();
    await waitFor(async () => (await state(A())) === 'up' && (await state(B())) === 'up', {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: 'both instances to share limits again',
    });
    const [fresh] = await keysOnEveryPrimary(3);
    const s = statuses(await Promise.all(Array.from({ length: 8 }, (_, i) => rpc(i % 2 ? A() : B(), (fresh as { key: string }).key))));
    assert.deepEqual([count(s, 200), count(s, 429)], [3, 5], `shared again: ${s.join(' ')}`);
  });
});
