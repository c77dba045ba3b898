import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { configureHashSlots } from '../../src/auth/passwords.ts';
import { registerUser, startTestApp, type TestApp, uniqueEmail } from '../support/app.ts';
import { serviceSkip } from '../support/services.ts';

const redisSkip = await serviceSkip('Redis');

/** C17 with the in-process limiter and with Redis: the same behaviour. */
for (const store of [
  { name: 'in-process', redis: false, skip: false as const },
  { name: 'Redis', redis: true, skip: redisSkip },
]) {
  describe(`failed logins per (client IP, e-mail), ${store.name} (C17)`, { skip: store.skip }, () => {
    let t: TestApp;
    before(async () => {
      // A long wait for a hash slot: on a busy machine no attempt should be refused as 503 here.
      t = await startTestApp({
        redis: store.redis,
        overrides: { limits: { failedLoginsPerMinute: 10 }, auth: { hashWaitMs: 120_000 } },
      });
    });
    after(() => t?.close());

    const login = (email: string, password: string) =>
      t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });

    test('40 wrong passwords sent at once: exactly 10 are checked (401), the other 30 are 429 with Retry-After', async () => {
      const u = await registerUser(t.app);
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => login(u.email, `wrong password ${i}`)));
      const statuses = results.map((r) => r.statusCode);
      assert.equal(statuses.filter((s) => s === 401).length, 10, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 429).length, 30, statuses.join(','));
      for (const r of results.filter((x) => x.statusCode === 429)) {
        assert.equal(r.json().success, false);
        assert.equal(r.json().error.code, 'RATE_LIMITED');
        const retry = Number(r.headers['retry-after']);
        assert.ok(retry >= 1 && retry <= 60, `Retry-After ${r.headers['retry-after']}`);
      }
      // The window is full: even the right password is not checked now.
      assert.equal((await login(u.email, u.password)).statusCode, 429);
      // Another e-mail from the same address has its own allowance.
      const other = await registerUser(t.app);
      assert.equal((await login(other.email, other.password)).statusCode, 200);
    });

    test('a right password gives its place back: successful logins never use up the failed-login allowance', async () => {
      const u = await registerUser(t.app);
      for (let i = 0; i < 9; i++) assert.equal((await login(u.email, 'wrong password')).statusCode, 401);
      for (let i = 0; i < 3; i++) assert.equal((await login(u.email, u.password)).statusCode, 200, `right login ${i + 1}`);
      assert.equal((await login(u.email, 'wrong password')).statusCode, 401, 'the 10th failure is still checked');
      assert.equal((await login(u.email, 'wrong password')).statusCode, 429);
    });

    test('right passwords sent at once alongside wrong ones: each right one succeeds unless the window is full', async () => {
      const u = await registerUser(t.app);
      const results = await Promise.all([
        ...Array.from({ length: 5 }, () => login(u.email, u.password)),
        ...Array.from({ length: 5 }, () => login(u.email, 'wrong password')),
      ]);
      assert.deepEqual(
        results.map((r) => r.statusCode),
        [200, 200, 200, 200, 200, 401, 401, 401, 401, 401],
      );
      // Five failures counted, the five successes given back: five more wrong guesses are checked.
      for (let i = 0; i < 5; i++) assert.equal((await login(u.email, 'wrong password')).statusCode, 401);
      assert.equal((await login(u.email, 'wrong password')).statusCode, 429);
    });

    test('wrong current passwords at /auth/password count as failed logins of the account', async () => {
      const u = await registerUser(t.app);
      const change = (currentPassword: string) =>
        t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/password',
          headers: u.auth,
          payload: { currentPassword, newPassword: 'a brand new passphrase' },
        });
      const results = await Promise.all(Array.from({ length: 15 }, (_, i) => change(`guess number ${i}`)));
      assert.equal(results.filter((r) => r.statusCode === 400).length, 10);
      assert.equal(results.filter((r) => r.statusCode === 429).length, 5);
      assert.equal((await login(u.email, 'yet another guess')).statusCode, 429, 'shared with /auth/login');
    });
  });
}

// C5: the bound on its own (HashSlots): test/auth/passwords.test.ts.
describe('password hashes at once are bounded (C5)', () => {
  test('registrations beyond the bound that wait too long answer 503 in the C7 envelope; the rest succeed', async () => {
    const t = await startTestApp({
      overrides: { auth: { maxConcurrentHashes: 1, hashWaitMs: 1 }, limits: { failedLoginsPerMinute: 3 } },
    });
    try {
      const results = await Promise.all(
        Array.from({ length: 6 }, () =>
          t.app.inject({
            method: 'POST',
            url: '/api/v1/auth/register',
            payload: { email: uniqueEmail('busy'), password: 'a fine long passphrase', name: 'Busy' },
          }),
        ),
      );
      const busy = results.filter((r) => r.statusCode === 503);
      assert.ok(results.some((r) => r.statusCode === 200), results.map((r) => r.statusCode).join(','));
      assert.ok(busy.length >= 1, results.map((r) => r.statusCode).join(','));
      for (const r of busy) {
        assert.deepEqual(Object.keys(r.json()).sort(), ['error', 'success']);
        assert.equal(r.json().error.code, 'SERVICE_UNAVAILABLE');
        assert.equal(r.headers['retry-after'], '1');
      }
      // A login refused for want of a slot was never checked: it does not count as a failure.
      const u = await registerUser(t.app);
      const wrong = () => t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: 'wrong password' } });
      const logins = await Promise.all(Array.from({ length: 3 }, wrong));
      const checked = logins.filter((r) => r.statusCode === 401).length;
      assert.ok(logins.some((r) => r.statusCode === 503), logins.map((r) => r.statusCode).join(','));
      for (let i = checked; i < 3; i++) assert.equal((await wrong()).statusCode, 401, `failure ${i + 1} of 3 is checked`);
      assert.equal((await wrong()).statusCode, 429);
    } finally {
      await t.close();
      configureHashSlots({ maxConcurrentHashes: null, hashWaitMs: 3000 });
    }
  });
});
