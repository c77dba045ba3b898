import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import type { KeyChange } from '../../src/keys/changes.ts';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';

const ADMIN = 'admin-token-for-tests-0123456789';
const backends = await storageBackends();

type Auth = { authorization: string };

for (const backend of backends) {
  describe(`API keys on ${backend.name} (spec 4.2; C14–C16, C19–C21)`, { skip: backend.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ backend: backend.name, env: { ADMIN_TOKEN: ADMIN } });
    });
    after(() => t?.close());

    const create = (auth: Auth, payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth, payload });
    const list = async (auth: Auth) => {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth });
      assert.equal(res.statusCode, 200);
      return res.json().data as Array<Record<string, unknown>>;
    };
    const setTier = (id: string, tier: string) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${id}`, headers: { 'x-admin-token': ADMIN }, payload: { tier } });
    const rawRows = async () =>
      ((await t.storage.db.execute(sql`select * from api_keys`)) as { rows: Array<Record<string, unknown>> }).rows;

    test('create answers id, name, key, prefix, networks, rateLimit, createdAt', async () => {
      const u = await registerUser(t.app);
      const res = await create(u.auth, { name: 'prod', networks: ['native-mainnet'], rateLimit: 50 });
      assert.equal(res.statusCode, 200);
      const k = res.json().data;
      for (const f of ['id', 'name', 'key', 'prefix', 'networks', 'rateLimit', 'createdAt']) assert.ok(f in k, f);
      assert.equal(k.name, 'prod');
      assert.deepEqual(k.networks, ['native-mainnet']);
      assert.equal(k.rateLimit, 50);
      assert.equal(k.status, 'active');
      assert.equal(k.expiresAt, null);
      assert.ok(!Number.isNaN(Date.parse(k.createdAt)) && k.createdAt.endsWith('Z'));
    });

    test('C19: a key is <prefix><secret>, the prefix is jk_live_ + 8 hex, the secret carries >= 128 bits', async () => {
      const u = await registerUser(t.app);
      const keys = await Promise.all([1, 2].map(async (i) => (await create(u.auth, { name: `k${i}` })).json().data));
      for (const k of keys) {
        assert.match(k.prefix, /^jk_live_[0-9a-f]{8}$/);
        assert.ok(k.key.startsWith(k.prefix));
        const secret = k.key.slice(k.prefix.length);
        assert.match(secret, /^[A-Za-z0-9_-]+$/);
        assert.ok(secret.length * 6 >= 128, 'base64url secret of at least 128 bits');
      }
      assert.notEqual(keys[0].key, keys[1].key);
    });

    test('C19: storage holds a SHA-256 hash and AES-GCM ciphertext, never the plain key', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'secret' })).json().data;
      const row = (await rawRows()).find((r) => r.id === k.id) as Record<string, unknown>;
      assert.equal(row.key_hash, createHash('sha256').update(k.key).digest('hex'));
      assert.match(String(row.key_ciphertext), /^v1\./);
      const secretPart = k.key.slice(k.prefix.length);
      for (const v of Object.values(row)) assert.ok(!JSON.stringify(v ?? '').includes(secretPart), 'no column holds the secret');
    });

    test('the RPC key lookup reads what a key in memory needs, and neither the password hash nor the ciphertext', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'looked up', networks: ['native-mainnet'], rateLimit: 7 })).json().data;
      const row = await t.app.parts.keys.lookupByHash(createHash('sha256').update(k.key).digest('hex'));
      assert.ok(row);
      assert.deepEqual(Object.keys(row.key).sort(), ['access', 'allNetworks', 'expiresAt', 'id', 'networks', 'rateLimit', 'status']);
      assert.deepEqual(Object.keys(row.user).sort(), ['dailyLimit', 'id', 'monthlyLimit', 'requestsPerMinute', 'tier']);
      assert.deepEqual({ id: row.key.id, networks: row.key.networks, rateLimit: row.key.rateLimit, status: row.key.status, user: row.user.id, tier: row.user.tier }, { id: k.id, networks: ['native-mainnet'], rateLimit: 7, status: 'active', user: u.id, tier: 'free' });
      assert.equal(await t.app.parts.keys.lookupByHash('0'.repeat(64)), undefined);
    });

    test('the list shows the full key, usage {daily, monthly}, lastUsedAt null until first use, status and expiresAt', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'listed' })).json().data;
      const [item] = await list(u.auth);
      assert.ok(item);
      assert.equal(item.key, k.key);
      assert.deepEqual(item.usage, { daily: 0, monthly: 0 });
      assert.equal(item.lastUsedAt, null);
      assert.equal(item.status, 'active');
      assert.equal(item.expiresAt, null);
    });

    test('C16: a free key with no networks gets native-mainnet and native-testnet; a paid one gets all', async () => {
      const u = await registerUser(t.app);
      assert.deepEqual((await create(u.auth, { name: 'a' })).json().data.networks, ['native-mainnet', 'native-testnet']);
      assert.deepEqual((await create(u.auth, { name: 'b', networks: [] })).json().data.networks, ['native-mainnet', 'native-testnet']);
      const p = await registerUser(t.app);
      assert.equal((await setTier(p.id, 'pro')).statusCode, 200);
      const all = (await create(p.auth, { name: 'c' })).json().data.networks;
      assert.equal(all.length, 16);
    });

    test('C16: unknown slugs are 400; free keys together may name at most 5 distinct networks (403 PLAN_LIMIT)', async () => {
      const u = await registerUser(t.app);
      const bad = await create(u.auth, { name: 'x', networks: ['native-mainnet', 'no-such-chain'] });
      assert.equal(bad.statusCode, 400);
      assert.match(bad.json().error.message, /no-such-chain/);
      assert.equal((await create(u.auth, { name: 'a', networks: ['ethereum', 'polygon', 'bsc'] })).statusCode, 200);
      assert.equal((await create(u.auth, { name: 'b', networks: ['ethereum', 'base', 'arbitrum'] })).statusCode, 200);
      const over = await create(u.auth, { name: 'c', networks: ['optimism'] });
      assert.equal(over.statusCode, 403);
      assert.equal(over.json().error.code, 'PLAN_LIMIT');
      assert.equal((await create(u.auth, { name: 'd', networks: ['polygon', 'base'] })).statusCode, 200, 'reusing networks is fine');
    });

    test('C15: a free account has 3 keys; the 4th is 403 PLAN_LIMIT; pro allows 10', async () => {
      const u = await registerUser(t.app);
      for (const i of [1, 2, 3]) assert.equal((await create(u.auth, { name: `k${i}` })).statusCode, 200);
      const fourth = await create(u.auth, { name: 'k4' });
      assert.equal(fourth.statusCode, 403);
      assert.equal(fourth.json().error.code, 'PLAN_LIMIT');
      assert.equal((await list(u.auth)).length, 3, 'the refused key was not stored');
      await setTier(u.id, 'pro');
      assert.equal((await create(u.auth, { name: 'k4' })).statusCode, 200);
    });

    test('C15: concurrent creates never pass the key limit', async () => {
      const u = await registerUser(t.app);
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => create(u.auth, { name: `c${i}` })));
      assert.equal(results.filter((r) => r.statusCode === 200).length, 3);
      assert.equal((await list(u.auth)).length, 3);
    });

    test('C14: rateLimit is 1..plan rate; omitted means the plan rate', async () => {
      const u = await registerUser(t.app);
      for (const rateLimit of [0, -1, 101, 1.5, '10']) {
        const res = await create(u.auth, { name: 'r', rateLimit });
        assert.equal(res.statusCode, 400, String(rateLimit));
      }
      assert.equal((await create(u.auth, { name: 'r', rateLimit: 100 })).json().data.rateLimit, 100);
      assert.equal((await create(u.auth, { name: 'r2' })).json().data.rateLimit, 100, 'free plan rate');
      await setTier(u.id, 'enterprise');
      assert.equal((await create(u.auth, { name: 'r3', rateLimit: 1_000_000 })).statusCode, 200, 'enterprise: any >= 1');
      // ... that storage can keep (a 4-byte integer): beyond it a 400 naming the field, not a failed write.
      assert.equal((await create(u.auth, { name: 'r4', rateLimit: 2 ** 31 - 1 })).statusCode, 200);
      const before = (await list(u.auth)).length;
      for (const rateLimit of [2 ** 31, 1e12]) {
        const res = await create(u.auth, { name: 'r5', rateLimit });
        assert.equal(res.statusCode, 400, String(rateLimit));
        assert.equal(res.json().error.code, 'VALIDATION_ERROR');
        assert.match(res.json().error.message + JSON.stringify(res.json().error.details), /rateLimit/);
      }
      assert.equal((await list(u.auth)).length, before, 'no key made');
      const id = String((await list(u.auth))[0]?.id);
      const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: u.auth, payload: { rateLimit: 2 ** 31 } });
      assert.equal(patched.statusCode, 400);
    });

    test("ownRateLimit tells a key's own rate from the plan's that rateLimit shows; PATCH rateLimit: null clears it", async () => {
      const u = await registerUser(t.app);
      const own = (await create(u.auth, { name: 'own', rateLimit: 40 })).json().data;
      const plan = (await create(u.auth, { name: 'plan' })).json().data;
      assert.deepEqual([own.rateLimit, own.ownRateLimit], [40, 40]);
      assert.deepEqual([plan.rateLimit, plan.ownRateLimit], [100, null], "the plan's rate applies; none is set on the key");
      const listed = await list(u.auth);
      assert.deepEqual(
        listed.map((k) => [k.name, k.rateLimit, k.ownRateLimit]),
        [
          ['own', 40, 40],
          ['plan', 100, null],
        ],
      );
      const cleared = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${own.id}`, headers: u.auth, payload: { rateLimit: null } });
      assert.equal(cleared.statusCode, 200);
      assert.deepEqual([cleared.json().data.rateLimit, cleared.json().data.ownRateLimit], [100, null]);
      await setTier(u.id, 'pro');
      const after = await list(u.auth);
      assert.deepEqual(
        after.map((k) => [k.rateLimit, k.ownRateLimit]),
        [
          [1000, null],
          [1000, null],
        ],
        "keys without a rate of their own follow the new plan's",
      );
    });

    test('PATCH changes name, networks, rateLimit, status and expiresAt; expired and inactive show in the list', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'before' })).json().data;
      const patch = (payload: Record<string, unknown>) =>
        t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: u.auth, payload });
      const r1 = await patch({ name: 'after', networks: ['native-testnet'], rateLimit: 7, status: 'inactive' });
      assert.equal(r1.statusCode, 200);
      assert.equal(r1.json().data.name, 'after');
      assert.deepEqual(r1.json().data.networks, ['native-testnet']);
      assert.equal(r1.json().data.rateLimit, 7);
      assert.equal(r1.json().data.status, 'inactive');
      assert.equal(r1.json().data.key, k.key, 'PATCH does not change the key value');
      const past = new Date(Date.now() - 1000).toISOString();
      assert.equal((await patch({ status: 'active', expiresAt: past })).json().data.status, 'expired');
      const [item] = await list(u.auth);
      assert.equal(item?.status, 'expired');
      assert.equal(item?.expiresAt, past);
      assert.equal((await patch({ expiresAt: null })).json().data.status, 'active');
      assert.equal((await patch({ rateLimit: 500 })).statusCode, 400);
      assert.equal((await patch({ status: 'revoked' })).statusCode, 400, 'revoking is its own route');
      assert.equal((await patch({ key: 'mine' })).statusCode, 400);
      assert.equal((await patch({})).statusCode, 400);
    });

    test('revoke keeps the key listed as revoked, permanently', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'r' })).json().data;
      const res = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/revoke`, headers: u.auth });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().data.status, 'revoked');
      assert.equal((await list(u.auth))[0]?.status, 'revoked');
      const reactivate = await t.app.inject({
        method: 'PATCH',
        url: `/api/v1/api-keys/${k.id}`,
        headers: u.auth,
        payload: { status: 'active' },
      });
      assert.equal(reactivate.statusCode, 409);
    });

    test('a revoke racing PATCH {status: "active"} always ends revoked; PATCH of a revoked key is 409 CONFLICT', async () => {
      const u = await registerUser(t.app);
      const rounds = 30;
      for (let i = 0; i < rounds; i++) {
        const k = (await create(u.auth, { name: `race${i}` })).json().data;
        await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: u.auth, payload: { status: 'inactive' } });
        const [patched, revoked] = await Promise.all([
          t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: u.auth, payload: { status: 'active' } }),
          t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/revoke`, headers: u.auth }),
        ]);
        assert.equal(revoked.statusCode, 200);
        // Either the PATCH came first (200) or it found the key revoked (409, C7 envelope).
        if (patched.statusCode !== 200) {
          assert.equal(patched.statusCode, 409, patched.body);
          assert.equal(patched.json().success, false);
          assert.equal(patched.json().error.code, 'CONFLICT');
        }
        const [row] = (await rawRows()).filter((r) => r.id === k.id);
        assert.equal(row?.status, 'revoked', `round ${i}: the key came back to life`);
        // Free plan: 3 keys; revoked ones do not count, so the loop can go on.
      }
    });

    test('rotate gives a new key value under the same id; the old hash is gone', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'rot' })).json().data;
      const res = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/rotate`, headers: u.auth });
      assert.equal(res.statusCode, 200);
      const r = res.json().data;
      assert.equal(r.id, k.id);
      assert.notEqual(r.key, k.key);
      const hashes = (await rawRows()).map((row) => row.key_hash);
      assert.ok(!hashes.includes(createHash('sha256').update(k.key).digest('hex')));
      assert.ok(hashes.includes(createHash('sha256').update(r.key).digest('hex')));
    });

    test('delete is permanent: the key disappears and a second delete is 404', async () => {
      const u = await registerUser(t.app);
      const k = (await create(u.auth, { name: 'del' })).json().data;
      const del = () => t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${k.id}`, headers: u.auth });
      assert.equal((await del()).statusCode, 200);
      assert.equal((await list(u.auth)).length, 0);
      assert.equal((await del()).statusCode, 404);
    });

    test('every change publishes the stale key hash, so key caches can drop it (C20)', async () => {
      const seen: KeyChange[] = [];
      const off = t.app.parts.keys.changes.on((c) => seen.push(c));
      try {
        const u = await registerUser(t.app);
        const k = (await create(u.auth, { name: 'ev' })).json().data;
        const h = createHash('sha256').update(k.key).digest('hex');
        await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: u.auth, payload: { status: 'inactive' } });
        await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/rotate`, headers: u.auth });
        await setTier(u.id, 'pro');
        await t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${k.id}`, headers: u.auth });
        assert.deepEqual(
          seen.map((c) => c.type),
          ['created', 'updated', 'rotated', 'account', 'deleted'],
        );
        assert.deepEqual(seen[1]?.keyHashes, [h]);
        assert.deepEqual(seen[2]?.keyHashes, [h], 'rotation invalidates the old value');
      } finally {
        off();
      }
    });

    test("one account never sees or touches another's keys (404)", async () => {
      const a = await registerUser(t.app);
      const b = await registerUser(t.app);
      const k = (await create(a.auth, { name: 'mine' })).json().data;
      assert.equal((await list(b.auth)).length, 0);
      for (const [method, url, payload] of [
        ['PATCH', `/api/v1/api-keys/${k.id}`, { name: 'stolen' }],
        ['POST', `/api/v1/api-keys/${k.id}/revoke`, undefined],
        ['POST', `/api/v1/api-keys/${k.id}/rotate`, undefined],
        ['DELETE', `/api/v1/api-keys/${k.id}`, undefined],
      ] as const) {
        const res = await t.app.inject({ method, url, headers: b.auth, ...(payload ? { payload } : {}) });
        assert.equal(res.statusCode, 404, `${method} ${url}`);
        assert.equal(res.json().error.code, 'NOT_FOUND');
      }
      const [still] = await list(a.auth);
      assert.equal(still?.name, 'mine');
      assert.equal(still?.key, k.key);
      assert.equal(still?.status, 'active');
    });

    test('every key route needs a bearer token (C6)', async () => {
      for (const [method, url] of [
        ['GET', '/api/v1/api-keys'],
        ['POST', '/api/v1/api-keys'],
        ['PATCH', '/api/v1/api-keys/x'],
        ['DELETE', '/api/v1/api-keys/x'],
        ['POST', '/api/v1/api-keys/x/revoke'],
        ['POST', '/api/v1/api-keys/x/rotate'],
      ] as const) {
        const res = await t.app.inject({ method, url, payload: method === 'GET' || method === 'DELETE' ? undefined : {} });
        assert.equal(res.statusCode, 401, `${method} ${url}`);
        assert.equal(res.json().error.code, 'UNAUTHORIZED');
      }
    });
  });
}
