import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, setTier, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const pgSkip = await serviceSkip('PostgreSQL');
const redisSkip = await serviceSkip('Redis');
const skip = pgSkip || redisSkip;
const ADMIN_TOKEN = 'scale-out-test-admin-token-0123456789';
const call = (method = 'eth_chainId', id = 1) => ({ jsonrpc: '2.0', id, method, params: [] });

describe('two instances on one PostgreSQL and one Redis behave as one (C12, C20, C27)', { skip }, () => {
  let a: TestApp;
  let b: TestApp;
  let fake: FakeNode;
  let scale: ScaleOut | undefined;

  before(async () => {
    fake = await startFakeNode();
    scale = await startScaleOut({ env: { UPSTREAM_NATIVE_MAINNET: fake.url, ADMIN_TOKEN } });
    ({ a, b } = scale);
  });
  after(async () => {
    await scale?.close();
    await fake?.close();
  });

  const rpc = (t: TestApp, key: string, body: unknown = call()) =>
    t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: body as object });

  test('a key made on one instance works on the other, and limits are shared', async () => {
    const { key } = await createKey(a.app, { rateLimit: 4 });
    assert.equal((await rpc(a, key)).statusCode, 200);
    assert.equal((await rpc(b, key)).statusCode, 200);
    assert.equal((await rpc(a, key)).statusCode, 200);
    const fourth = await rpc(b, key);
    assert.equal(fourth.statusCode, 200);
    assert.equal(fourth.headers['x-ratelimit-remaining'], '0', 'both instances drew from one window');
    const fifth = await rpc(a, key);
    assert.equal(fifth.statusCode, 429);
    assert.equal(fifth.json().error.code, -32005);
  });

  test('concurrent requests on both instances never pass a shared limit', async () => {
    const { key } = await createKey(a.app, { rateLimit: 10 });
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => rpc(i % 2 ? a : b, key)));
    assert.equal(results.filter((r) => r.statusCode === 200).length, 10);
  });

  test('a key change on one instance is honoured by the other within 1 s', async () => {
    const { key, id, user } = await createKey(a.app);
    assert.equal((await rpc(b, key)).statusCode, 200, 'b has the key cached now');
    const revoked = await a.app.inject({ method: 'POST', url: `/api/v1/api-keys/${id}/revoke`, headers: user.auth });
    assert.equal(revoked.statusCode, 200);
    const started = Date.now();
    await waitFor(async () => (await rpc(b, key)).statusCode === 401, { timeoutMs: 1000, intervalMs: 25, what: 'b to refuse the key' });
    const elapsedMs = Date.now() - started;
    assert.ok(elapsedMs <= 1000);
    assert.equal((await rpc(b, key)).json().error.code, -32002);
  });

  test('a tier change on one instance reaches the other\'s REST plan checks at once, over the bus (C20)', async () => {
    const user = await registerUser(a.app);
    await setTier(a.app, user.id, 'pro', ADMIN_TOKEN);
    const analytics = () => b.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    assert.equal((await analytics()).statusCode, 200, 'b keeps the account as pro now');
    const forgotten: string[] = [];
    const forget = b.app.parts.accounts.forget.bind(b.app.parts.accounts);
    b.app.parts.accounts.forget = (id: string) => {
      forgotten.push(id);
      forget(id);
    };
    await setTier(a.app, user.id, 'free', ADMIN_TOKEN);
    // The change reaches b over Redis, not b's kept row running out of time.
    await waitFor(async () => forgotten.includes(user.id), { timeoutMs: 1000, intervalMs: 10, what: 'b to drop the account it kept' });
    const refused = await analytics();
    assert.equal(refused.statusCode, 403, refused.body);
    assert.equal(refused.json().error.code, 'PLAN_FEATURE');
  });

  test('usage from both instances shows in one view', async () => {
    const { key, id, user } = await createKey(a.app);
    for (let i = 0; i < 3; i++) await rpc(a, key);
    for (let i = 0; i < 2; i++) await rpc(b, key);
    const value = await waitFor(async () => {
      const res = await b.app.inject({ method: 'GET', url: `/api/v1/usage/stats?apiKeyId=${id}`, headers: user.auth });
      return res.json().data?.totalRequests === 5 ? res.json().data : undefined;
    }, { timeoutMs: 5000, intervalMs: 25, what: 'usage of both instances' });
    assert.equal(value.requestsByMethod.eth_chainId, 5);
  });
});
