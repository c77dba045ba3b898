// The signed-in account is read from storage once per REST request (src/auth/bearer.ts,
// signedInAccount): the REST limits' X-CU-Remaining (C13) and a route's plan check (C36, C37, C46)
// share that read, on the app's real storage.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';

const ADMIN_TOKEN = 'signed-in-account-test-admin-token-012345';

describe('one read of the signed-in account per request', () => {
  let t: TestApp;
  const reads: string[] = [];
  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN } });
    const accounts = t.app.parts.accounts;
    const findById = accounts.findById.bind(accounts);
    accounts.findById = (id: string) => {
      reads.push(id);
      return findById(id);
    };
  });
  after(async () => {
    await t?.close();
  });

  test('a route that checks the plan reads the account once, with X-CU-Remaining and the plan check both from it', async () => {
    const user = await registerUser(t.app);
    const get = async (url: string) => {
      reads.length = 0;
      const res = await t.app.inject({ method: 'GET', url: `/api/v1${url}`, headers: user.auth });
      return { res, reads: [...reads] };
    };
    // Free: the plan checks refuse (403), after one read; the limits' headers are the account's.
    for (const url of ['/usage/analytics', '/whale-alerts', '/webhooks']) {
      const { res, reads: n } = await get(url);
      assert.equal(res.statusCode, 403, `${url}: ${res.body}`);
      assert.equal(res.json().error.code, 'PLAN_FEATURE');
      assert.deepEqual(n, [user.id], `${url}: one read of the account`);
      assert.match(String(res.headers['x-cu-remaining']), /^[0-9]+$/);
    }
    // Max: every one answers, each after one read.
    await setTier(t.app, user.id, 'max', ADMIN_TOKEN);
    for (const url of ['/usage/analytics', '/whale-alerts', '/webhooks', '/usage/stats']) {
      const { res, reads: n } = await get(url);
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
      assert.deepEqual(n, [user.id], `${url}: one read of the account`);
      assert.match(String(res.headers['x-cu-remaining']), /^[0-9]+$/);
    }
    // Two requests at once read it once each: nothing is kept past its request.
    reads.length = 0;
    const both = await Promise.all([1, 2].map(() => t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth })));
    assert.deepEqual(both.map((r) => r.statusCode), [200, 200]);
    assert.deepEqual(reads, [user.id, user.id]);
  });

  test('a plan changed between two requests is what the second one sees', async () => {
    const user = await registerUser(t.app);
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    const first = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    assert.equal(first.statusCode, 200, first.body);
    await setTier(t.app, user.id, 'free', ADMIN_TOKEN);
    const second = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    assert.equal(second.statusCode, 403, second.body);
  });
});
