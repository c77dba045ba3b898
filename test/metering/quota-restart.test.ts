// Daily and monthly quotas (C10, C11) survive a restart: the in-process counters are seeded from
// stored usage at start; with Redis the counters survived already and are not counted twice.
// (The seeding of an in-process counter on its own: test/metering/limiter-seed.test.ts.)
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { serviceSkip } from '../support/services.ts';

const ADMIN = 'admin-token-for-quota-restart-tests';
const redisSkip = await serviceSkip('Redis');
const call = (method: string, id = 1) => ({ jsonrpc: '2.0', id, method, params: method === 'eth_getLogs' ? [{}] : [] });

for (const store of [
  { name: 'in-process', redis: false, skip: false as const },
  { name: 'Redis', redis: true, skip: redisSkip },
]) {
  describe(`quotas across a restart on one PGlite directory, ${store.name} limits`, { skip: store.skip }, () => {
    let fake: FakeNode;
    let dir: string;
    let t: TestApp | undefined;
    const start = () => startTestApp({ dataDir: dir, redis: store.redis, env: { ADMIN_TOKEN: ADMIN, UPSTREAM_NATIVE_MAINNET: fake.url } });
    before(async () => {
      fake = await startFakeNode();
      dir = await mkdtemp(path.join(tmpdir(), 'junction-quota-'));
    });
    after(async () => {
      await t?.close();
      await fake?.close();
      await rm(dir, { recursive: true, force: true });
    });

    test('after a restart the day’s requests and the month’s compute units are still spent: X-CU-Remaining goes on, the daily limit answers 429', async () => {
      t = await start();
      const app = t.app;
      const u = await registerUser(app);
      const set = await app.inject({
        method: 'PATCH',
        url: `/api/v1/admin/users/${u.id}`,
        headers: { 'x-admin-token': ADMIN },
        payload: { limits: { dailyLimit: 5, monthlyLimit: 1000 } },
      });
      assert.equal(set.statusCode, 200, set.body);
      const { key } = await createKey(app, { name: 'q' }, u);
      const rpc = (method: string) => (t as TestApp).app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call(method) });

      // 3 requests of 10 compute units each (eth_getLogs).
      for (let i = 1; i <= 3; i++) {
        const res = await rpc('eth_getLogs');
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.headers['x-cu-remaining'], String(1000 - 10 * i));
      }
      await t.close(); // a graceful stop: the usage reaches storage (C27)
      t = undefined;

      t = await start();
      const after1 = await rpc('eth_chainId');
      assert.equal(after1.statusCode, 200, after1.body);
      assert.equal(after1.headers['x-cu-remaining'], String(1000 - 30 - 1), 'the month’s compute units are still spent, and counted once');
      assert.equal((await rpc('eth_chainId')).statusCode, 200, 'the 5th request of the day');
      const over = await rpc('eth_chainId');
      assert.equal(over.statusCode, 429, over.body);
      assert.equal(over.json().error.code, -32006);
      assert.equal(over.json().error.data.limit, 'daily');
    });
  });
}
