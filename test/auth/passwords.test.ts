import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { AccountService } from '../../src/auth/accounts.ts';
import { DEFAULT_HASH_COST, hashPassword, verifyPassword } from '../../src/auth/passwords.ts';
import { users } from '../../src/auth/schema.ts';
import { loadConfig } from '../../src/config/load.ts';
import { startTestApp, type TestApp, TEST_PASSWORD_HASH_COST, uniqueEmail } from '../support/app.ts';

/** The N written in a stored `scrypt$N$r$p$salt$hash`. */
const storedN = (hash: string) => Number(hash.split('$')[1]);

describe('password hash cost (auth.passwordHashCost)', () => {
  test('new hashes use 2^cost as N; the shipped default is 2^15 (C5)', async () => {
    assert.equal(DEFAULT_HASH_COST, 15);
    assert.equal(loadConfig({ env: {} }).auth.passwordHashCost, 15);
    assert.equal(storedN(await hashPassword('correct horse battery')), 2 ** 15);
    assert.equal(storedN(await hashPassword('correct horse battery', 10)), 2 ** 10);
  });

  test('verification reads N from the stored hash, whatever the cost of new hashes', async () => {
    const strong = await hashPassword('correct horse battery', 15);
    const cheap = await hashPassword('correct horse battery', 10);
    for (const stored of [strong, cheap]) {
      assert.equal(await verifyPassword('correct horse battery', stored), true);
      assert.equal(await verifyPassword('correct horse batterY', stored), false);
    }
  });

  describe('in the app', () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp();
    });
    after(() => t.close());

    const storedHash = async (email: string) =>
      (await t.storage.db.select().from(users).where(eq(users.email, email)))[0]?.passwordHash ?? '';
    const login = (email: string, password: string) =>
      t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });

    test('registration hashes with the configured cost', async () => {
      assert.equal(t.config.auth.passwordHashCost, TEST_PASSWORD_HASH_COST);
      const email = uniqueEmail('cost');
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email, password: 'correct horse battery', name: 'C' } });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(storedN(await storedHash(email)), 2 ** TEST_PASSWORD_HASH_COST);
    });

    test('an account hashed at another cost still logs in, and a wrong password is still refused', async () => {
      const email = uniqueEmail('old-cost');
      await new AccountService(t.storage.db, { passwordHashCost: 15 }).register({ email, password: 'correct horse battery', name: 'Old' });
      assert.equal(storedN(await storedHash(email)), 2 ** 15);
      assert.equal((await login(email, 'correct horse battery')).statusCode, 200);
      assert.equal((await login(email, 'wrong horse battery')).statusCode, 401);
    });
  });
});
