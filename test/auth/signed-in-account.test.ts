// The signed-in account's row (src/auth/bearer.ts signedInAccount, AccountService.signedIn): one
// per request for the REST limits' X-CU-Remaining (C13) and a route's plan check (C36, C37, C46),
// shared by the account's requests and read again at most once a second, at once after a tier
// change (C20), on the app's real storage.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AccountService, SIGNED_IN_TTL_MS } from '../../src/auth/accounts.ts';
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
    // Free: the plan checks refuse (403), after at most one read; the limits' headers are the account's.
    for (const url of ['/usage/analytics', '/whale-alerts', '/webhooks']) {
      t.app.parts.accounts.forget(user.id);
      const { res, reads: n } = await get(url);
      assert.equal(res.statusCode, 403, `${url}: ${res.body}`);
      assert.equal(res.json().error.code, 'PLAN_FEATURE');
      assert.deepEqual(n, [user.id], `${url}: one read of the account`);
      assert.match(String(res.headers['x-cu-remaining']), /^[0-9]+$/);
    }
    // Max: every one answers, each after one read.
    await setTier(t.app, user.id, 'max', ADMIN_TOKEN);
    for (const url of ['/usage/analytics', '/whale-alerts', '/webhooks', '/usage/stats']) {
      t.app.parts.accounts.forget(user.id);
      const { res, reads: n } = await get(url);
      assert.equal(res.statusCode, 200, `${url}: ${res.body}`);
      assert.deepEqual(n, [user.id], `${url}: one read of the account`);
      assert.match(String(res.headers['x-cu-remaining']), /^[0-9]+$/);
    }
  });

  test('requests of one account at once share one read, and the next ones use it for a second at most', async () => {
    const user = await registerUser(t.app);
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    reads.length = 0;
    const started = Date.now();
    const many = await Promise.all(Array.from({ length: 12 }, () => t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth })));
    assert.deepEqual(many.map((r) => r.statusCode), Array(12).fill(200));
    assert.deepEqual(reads, [user.id], 'twelve requests at once, one read');
    const next = await t.app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: user.auth });
    assert.equal(next.statusCode, 200);
    // Read again only when the second has passed (a slow machine may have let it pass already).
    assert.equal(reads.length, Date.now() - started < SIGNED_IN_TTL_MS ? 1 : 2);
    await new Promise((r) => setTimeout(r, SIGNED_IN_TTL_MS + 50));
    reads.length = 0;
    const later = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    assert.equal(later.statusCode, 200);
    assert.deepEqual(reads, [user.id], 'after the second, read again');
  });

  test('a failed read is not kept: the next request reads again', async () => {
    const user = await registerUser(t.app);
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    t.app.parts.accounts.forget(user.id);
    const accounts = t.app.parts.accounts;
    const real = accounts.findById.bind(accounts);
    accounts.findById = async () => {
      throw new Error('storage went away');
    };
    const failed = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    accounts.findById = real;
    assert.equal(failed.statusCode, 500);
    reads.length = 0;
    const again = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
    assert.equal(again.statusCode, 200, again.body);
    assert.deepEqual(reads, [user.id]);
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

  test('at most the bound of accounts are kept, the one read longest ago out first; a kept one read again is not moved', async () => {
    // Kept a minute here, so that only the bound decides what is read again, however slow the machine.
    const accounts = new AccountService(t.storage.db, { passwordHashCost: 10, signedIn: { max: 2, ttlMs: 60_000 } });
    const made = [];
    for (const n of ['a', 'b', 'c']) made.push(await accounts.register({ email: `kept-${n}-${Date.now()}@example.com`, password: 'long enough password', name: n }));
    const [a, b, c] = made.map((u) => u.id) as [string, string, string];
    const readOf: string[] = [];
    const findById = accounts.findById.bind(accounts);
    accounts.findById = (id: string) => {
      readOf.push(id);
      return findById(id);
    };
    const names = new Map([[a, 'a'], [b, 'b'], [c, 'c']]);
    const signIn = async (...ids: string[]) => {
      for (const id of ids) assert.equal((await accounts.signedIn(id))?.id, id);
    };
    await signIn(a, b); // both kept
    await signIn(c); // a third: a, read first, goes
    await signIn(b, c); // kept: no read
    assert.deepEqual(readOf.map((id) => names.get(id)), ['a', 'b', 'c']);
    await signIn(a); // read again; b, now the one read longest ago (a hit does not move it), goes
    await signIn(c); // still kept
    await signIn(b); // read again
    assert.deepEqual(readOf.map((id) => names.get(id)), ['a', 'b', 'c', 'a', 'b']);
  });
});
