// A plan change by an admin (C8) brings the account's keys within the new plan at once:
// key allowance (C15), networks (C16) and per-key rate (C14), seen on the RPC path right away.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { storageBackends } from '../support/services.ts';

const ADMIN = 'admin-token-for-plan-change-tests';
const backends = await storageBackends();
const call = (method = 'eth_chainId') => ({ jsonrpc: '2.0', id: 1, method, params: [] });

type User = Awaited<ReturnType<typeof registerUser>>;

for (const backend of backends) {
  describe(`plan changes on ${backend.name} (C8, C14–C16, C20)`, { skip: backend.skip }, () => {
    let t: TestApp;
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode();
      t = await startTestApp({
        backend: backend.name,
        env: { ADMIN_TOKEN: ADMIN, UPSTREAM_NATIVE_MAINNET: fake.url, UPSTREAM_ETHEREUM: fake.url, UPSTREAM_POLYGON: fake.url },
      });
    });
    after(async () => {
      await t?.close();
      await fake?.close();
    });

    const setTier = async (userId: string, tier: string) => {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${userId}`, headers: { 'x-admin-token': ADMIN }, payload: { tier } });
      assert.equal(res.statusCode, 200, res.body);
      return res.json().data as { tier: string; keyChanges: { deactivated: string[]; networksChanged: string[]; rateLimited: string[] } };
    };
    const rpc = (network: string, key: string) => t.app.inject({ method: 'POST', url: `/v1/${network}/${key}`, payload: call() });
    const list = async (u: User) => {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: u.auth });
      return res.json().data as Array<{ id: string; status: string; networks: string[]; rateLimit: number }>;
    };
    const patchKey = (u: User, id: string, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: u.auth, payload });

    test('a downgrade to free leaves the 3 oldest keys active, at most 5 networks and rates within the plan, effective on the RPC path at once', async () => {
      const u = await registerUser(t.app);
      await setTier(u.id, 'pro');
      const k1 = await createKey(t.app, { name: 'k1' }, u); // every network
      const k2 = await createKey(t.app, { name: 'k2', networks: ['ethereum', 'polygon'], rateLimit: 800 }, u);
      const k3 = await createKey(t.app, { name: 'k3', networks: ['base'] }, u);
      const k4 = await createKey(t.app, { name: 'k4' }, u);
      const k5 = await createKey(t.app, { name: 'k5', networks: ['arbitrum'] }, u);
      // Every key works and is in the key cache before the change.
      for (const [network, k] of [['native-mainnet', k1], ['ethereum', k1], ['ethereum', k2], ['native-mainnet', k4], ['ethereum', k4]] as const) {
        assert.equal((await rpc(network, k.key)).statusCode, 200, `${k.id} on ${network} before`);
      }
      assert.equal((await rpc('ethereum', k2.key)).headers['x-ratelimit-limit'], '800');

      const changed = await setTier(u.id, 'free');
      assert.equal(changed.tier, 'free');
      assert.deepEqual(changed.keyChanges.deactivated.sort(), [k4.id, k5.id].sort(), 'the 2 newest keys are switched off');
      assert.deepEqual(changed.keyChanges.rateLimited, [k2.id]);

      // C15: an inactive key answers -32001 on the very next request (the cached lookup was dropped).
      const off = await rpc('native-mainnet', k4.key);
      assert.equal(off.statusCode, 401);
      assert.equal(off.json().error.code, -32001);
      // C52: k1, made for every network, follows the plan: the free plan's native networks. C16: of
      // the networks the keys then name, the first 5 stay and the others are gone.
      const gone = await rpc('arbitrum', k1.key);
      assert.equal(gone.statusCode, 403);
      assert.equal(gone.json().error.code, -32003);
      assert.equal((await rpc('ethereum', k1.key)).statusCode, 403);
      assert.equal((await rpc('native-mainnet', k1.key)).statusCode, 200);
      // C14: the key's own rate is the plan's now.
      const slowed = await rpc('ethereum', k2.key);
      assert.equal(slowed.statusCode, 200);
      assert.equal(slowed.headers['x-ratelimit-limit'], '100');

      const keys = await list(u);
      const byId = new Map(keys.map((k) => [k.id, k]));
      assert.deepEqual(
        keys.map((k) => k.status),
        ['active', 'active', 'active', 'inactive', 'inactive'],
      );
      assert.deepEqual(byId.get(k1.id)?.networks, ['native-mainnet', 'native-testnet']);
      assert.deepEqual(byId.get(k2.id)?.networks, ['ethereum', 'polygon']);
      assert.deepEqual(byId.get(k3.id)?.networks, ['base']);
      assert.deepEqual(byId.get(k5.id)?.networks, ['native-mainnet', 'native-testnet'], 'a key left with none gets the free defaults');
      assert.equal(byId.get(k2.id)?.rateLimit, 100);
      assert.ok(new Set(keys.flatMap((k) => k.networks)).size <= 5, 'C16: at most 5 distinct networks');

      // Switching a key back on would make 4 active keys: 403 PLAN_LIMIT, until another is revoked.
      const back = await patchKey(u, k4.id, { status: 'active' });
      assert.equal(back.statusCode, 403, back.body);
      assert.equal(back.json().error.code, 'PLAN_LIMIT');
      assert.equal((await rpc('native-mainnet', k4.key)).statusCode, 401);
      assert.equal((await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k3.id}/revoke`, headers: u.auth })).statusCode, 200);
      assert.equal((await patchKey(u, k4.id, { status: 'active' })).statusCode, 200);
      assert.equal((await rpc('native-mainnet', k4.key)).statusCode, 200);

      // An upgrade changes no key.
      const up = await setTier(u.id, 'pro');
      assert.deepEqual(up.keyChanges, { deactivated: [], networksChanged: [], rateLimited: [] });
    });

    test('a downgrade keeps the first 5 networks the keys name when no key is left without one', async () => {
      const u = await registerUser(t.app);
      await setTier(u.id, 'pro');
      const a = await createKey(t.app, { name: 'a', networks: ['ethereum', 'polygon', 'bsc'] }, u);
      const b = await createKey(t.app, { name: 'b', networks: ['base', 'arbitrum', 'optimism'] }, u);
      assert.equal((await rpc('polygon', a.key)).statusCode, 200);
      const changed = await setTier(u.id, 'free');
      assert.deepEqual(changed.keyChanges.networksChanged, [b.id]);
      const keys = await list(u);
      assert.deepEqual(keys.map((k) => k.networks), [['ethereum', 'polygon', 'bsc'], ['base', 'arbitrum']]);
      assert.equal((await rpc('polygon', a.key)).statusCode, 200);
      assert.equal((await rpc('optimism', b.key)).statusCode, 403);
    });

    test('C52: a key made without networks follows a tier change at once (on the RPC path too); a key with its own list keeps it', async () => {
      const u = await registerUser(t.app);
      const every = await createKey(t.app, { name: 'every' }, u);
      const own = await createKey(t.app, { name: 'own', networks: ['native-mainnet'] }, u);
      // On free: the native networks only; ethereum is refused (and the refusal is in the key cache).
      assert.equal((await rpc('native-mainnet', every.key)).statusCode, 200);
      assert.equal((await rpc('ethereum', every.key)).statusCode, 403);
      assert.equal((await rpc('ethereum', own.key)).statusCode, 403);
      let byName = new Map((await list(u)).map((k) => [k.id, k as { networks: string[]; allNetworks?: boolean }]));
      assert.deepEqual(byName.get(every.id)?.networks, ['native-mainnet', 'native-testnet']);
      assert.equal(byName.get(every.id)?.allNetworks, true);
      assert.equal(byName.get(own.id)?.allNetworks, false);

      const up = await setTier(u.id, 'pro');
      assert.deepEqual(up.keyChanges, { deactivated: [], networksChanged: [], rateLimited: [] });
      // The very next call on a pro-only network works; the key with its own list still stops there.
      assert.equal((await rpc('ethereum', every.key)).statusCode, 200);
      assert.equal((await rpc('polygon', every.key)).statusCode, 200);
      assert.equal((await rpc('ethereum', own.key)).statusCode, 403);
      byName = new Map((await list(u)).map((k) => [k.id, k]));
      assert.equal(byName.get(every.id)?.networks.length, 16, 'the API shows the plan’s current list');
      assert.deepEqual(byName.get(own.id)?.networks, ['native-mainnet']);
      const admin = await t.app.inject({ method: 'GET', url: `/api/v1/admin/users/${u.id}/keys`, headers: { 'x-admin-token': ADMIN } });
      assert.equal((admin.json().data as Array<{ id: string; networks: string[] }>).find((k) => k.id === every.id)?.networks.length, 16);

      // Back to free: the native networks again, at once.
      await setTier(u.id, 'free');
      assert.equal((await rpc('ethereum', every.key)).statusCode, 403);
      assert.equal((await rpc('native-mainnet', every.key)).statusCode, 200);
      // Naming networks makes a key's list its own; an empty list makes it follow the plan again.
      assert.equal((await patchKey(u, every.id, { networks: ['native-testnet'] })).json().data.allNetworks, false);
      const back = await patchKey(u, every.id, { networks: [] });
      assert.deepEqual([back.json().data.allNetworks, back.json().data.networks], [true, ['native-mainnet', 'native-testnet']]);
    });

    test('lowering the per-minute override lowers key rates above it; a change within the plan changes no key', async () => {
      const u = await registerUser(t.app);
      const k = await createKey(t.app, { name: 'r', rateLimit: 90 }, u);
      const limits = (l: Record<string, number | null>) =>
        t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: l } });
      const same = await limits({ dailyLimit: 500 });
      assert.deepEqual(same.json().data.keyChanges, { deactivated: [], networksChanged: [], rateLimited: [] });
      const lower = await limits({ requestsPerMinute: 20 });
      assert.deepEqual(lower.json().data.keyChanges.rateLimited, [k.id]);
      const res = await rpc('native-mainnet', k.key);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-ratelimit-limit'], '20');
    });
  });
}
