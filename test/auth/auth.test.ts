import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { SignJWT } from 'jose';
import { AccountService } from '../../src/auth/accounts.ts';
import { users } from '../../src/auth/schema.ts';
import { createTestDatabase, registerUser, startTestApp, type TestApp, TEST_PASSWORD_HASH_COST, uniqueEmail } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { storageBackends } from '../support/services.ts';

const backends = await storageBackends();

for (const backend of backends) {
  describe(`accounts and tokens on ${backend.name} (C4–C6)`, { skip: backend.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ backend: backend.name });
    });
    after(() => t?.close());

    test('register answers the user (free tier) and a token pair, never the password', async () => {
      const email = uniqueEmail('reg');
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        payload: { email, password: 'hunter2hunter2', name: 'Ada' },
      });
      assert.equal(res.statusCode, 200);
      const { user, tokens } = res.json().data;
      assert.deepEqual(Object.keys(user).sort(), ['email', 'id', 'name', 'tier']);
      assert.equal(user.email, email);
      assert.equal(user.name, 'Ada');
      assert.equal(user.tier, 'free');
      assert.match(tokens.accessToken, /^[\w-]+\.[\w-]+\.[\w-]+$/);
      assert.match(tokens.refreshToken, /^[\w-]+\.[\w-]+\.[\w-]+$/);
      assert.ok(!res.body.includes('hunter2hunter2'));
    });

    test('the password is stored as a scrypt hash, not in plain text', async () => {
      const u = await registerUser(t.app, { password: 'plain text never stored' });
      const res = (await t.storage.db.execute(sql`select password_hash from users where id = ${u.id}`)) as {
        rows: Array<{ password_hash: string }>;
      };
      const stored = String((res.rows[0] as { password_hash: string }).password_hash);
      assert.match(stored, /^scrypt\$/);
      assert.ok(!stored.includes('plain text never stored'));
    });

    // auth.passwordHashCost in the app (the hashing itself: test/auth/passwords.test.ts).
    /** The N written in a stored `scrypt$N$r$p$salt$hash`. */
    const storedN = (hash: string) => Number(hash.split('$')[1]);
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

    test('e-mail is case-insensitively unique: a duplicate is 409', async () => {
      const email = uniqueEmail('Dup');
      await registerUser(t.app, { email });
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        payload: { email: email.toUpperCase(), password: 'another password', name: 'Other' },
      });
      assert.equal(res.statusCode, 409);
      assert.equal(res.json().error.code, 'EMAIL_TAKEN');
    });

    test('a bad e-mail or a short password is 400', async () => {
      for (const payload of [
        { email: 'not-an-email', password: 'long enough', name: 'x' },
        { email: uniqueEmail(), password: 'short', name: 'x' },
        { email: uniqueEmail(), password: 'long enough', name: '   ' },
      ]) {
        const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload });
        assert.equal(res.statusCode, 400, JSON.stringify(payload));
        assert.equal(res.json().error.code, 'VALIDATION_ERROR');
      }
    });

    test('login with the right password (any e-mail case) works; a wrong one or unknown e-mail is 401 alike', async () => {
      const u = await registerUser(t.app);
      const ok = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        payload: { email: u.email.toUpperCase(), password: u.password },
      });
      assert.equal(ok.statusCode, 200);
      assert.equal(ok.json().data.user.id, u.id);
      const wrong = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: 'wrong password' } });
      const unknown = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        payload: { email: uniqueEmail('ghost'), password: 'whatever1' },
      });
      assert.equal(wrong.statusCode, 401);
      assert.equal(unknown.statusCode, 401);
      assert.equal(wrong.json().error.message, unknown.json().error.message);
    });

    test('refresh answers {accessToken, refreshToken} directly in data and the new access token works', async () => {
      const u = await registerUser(t.app);
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
      assert.equal(res.statusCode, 200);
      assert.deepEqual(Object.keys(res.json().data).sort(), ['accessToken', 'refreshToken']);
      const list = await t.app.inject({
        method: 'GET',
        url: '/api/v1/api-keys',
        headers: { authorization: `Bearer ${res.json().data.accessToken}` },
      });
      assert.equal(list.statusCode, 200);
    });

    test('refresh rotates: reusing a used refresh token is 401 and revokes the whole family', async () => {
      const u = await registerUser(t.app);
      const first = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
      const next = first.json().data.refreshToken as string;
      const reuse = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
      assert.equal(reuse.statusCode, 401);
      assert.equal(reuse.json().error.code, 'TOKEN_REUSED');
      // The family is revoked: the token issued by the legitimate rotation stops working too.
      const after = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: next } });
      assert.equal(after.statusCode, 401);
      // Another login (another family) is unaffected.
      const login = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: u.password } });
      const other = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/refresh',
        payload: { refreshToken: login.json().data.tokens.refreshToken },
      });
      assert.equal(other.statusCode, 200);
    });

    test('concurrent refreshes with one token: exactly one succeeds', async () => {
      const u = await registerUser(t.app);
      const results = await Promise.all(
        Array.from({ length: 5 }, () =>
          t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } }),
        ),
      );
      assert.equal(results.filter((r) => r.statusCode === 200).length, 1);
    });

    test('an access token is not accepted as a refresh token, nor the reverse', async () => {
      const u = await registerUser(t.app);
      const r1 = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.accessToken } });
      assert.equal(r1.statusCode, 401);
      const r2 = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: { authorization: `Bearer ${u.refreshToken}` } });
      assert.equal(r2.statusCode, 401);
    });

    test('forged, expired, malformed or missing bearer tokens are 401', async () => {
      const u = await registerUser(t.app);
      const now = Math.floor(Date.now() / 1000);
      const forged = await new SignJWT({ typ: 'access' })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(u.id)
        .setIssuer('junction')
        .setJti('x')
        .setIssuedAt(now)
        .setExpirationTime(now + 600)
        .sign(new TextEncoder().encode('some other secret entirely, 32+ chars'));
      const [h, p] = u.accessToken.split('.');
      const tampered = `${h}.${Buffer.from(JSON.stringify({ typ: 'access', sub: 'someone-else', iss: 'junction', jti: 'y', exp: now + 600 })).toString('base64url')}.${u.accessToken.split('.')[2]}`;
      const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.`;
      for (const authorization of [
        undefined,
        'Bearer',
        'Bearer not.a.jwt',
        `Bearer ${forged}`,
        `Bearer ${tampered}`,
        `Bearer ${unsigned}`,
        `Basic ${u.accessToken}`,
      ]) {
        const res = await t.app.inject({
          method: 'GET',
          url: '/api/v1/api-keys',
          headers: authorization ? { authorization } : {},
        });
        assert.equal(res.statusCode, 401, String(authorization));
        assert.equal(res.json().success, false);
      }
    });
  });
}

describe('token lifetimes (C5)', () => {
  test('an expired access token is 401 TOKEN_EXPIRED; access lives 15 min and refresh 30 days by default', async () => {
    const t = await startTestApp({ overrides: { auth: { accessTokenTtlSeconds: 1 } } });
    try {
      const u = await registerUser(t.app);
      const [, payload] = u.accessToken.split('.');
      const claims = JSON.parse(Buffer.from(payload as string, 'base64url').toString());
      assert.equal(claims.exp - claims.iat, 1);
      // Expiry has a resolution of one second: ask until the token is no longer taken, then see how it was refused.
      const res = await waitFor(async () => {
        const r = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: u.auth });
        return r.statusCode === 200 ? undefined : r;
      }, { timeoutMs: 5_000, intervalMs: 100, what: 'the access token to expire' });
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error.code, 'TOKEN_EXPIRED');
    } finally {
      await t.close();
    }
    const d = await startTestApp();
    try {
      const u = await registerUser(d.app);
      const exp = (tok: string) => {
        const c = JSON.parse(Buffer.from(tok.split('.')[1] as string, 'base64url').toString());
        return c.exp - c.iat;
      };
      assert.equal(exp(u.accessToken), 15 * 60);
      assert.equal(exp(u.refreshToken), 30 * 24 * 3600);
    } finally {
      await d.close();
    }
  });
});

describe('refresh tokens survive a restart (C5)', () => {
  test('on PGlite in DATA_DIR: rotation state and reuse detection hold across a restart', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-restart-'));
    try {
      const first = await startTestApp({ dataDir: dir });
      const u = await registerUser(first.app);
      const rotated = await first.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
      assert.equal(rotated.statusCode, 200);
      await first.close();

      const second = await startTestApp({ dataDir: dir });
      try {
        const reuse = await second.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
        assert.equal(reuse.statusCode, 401, 'the used token stays used after a restart');
        const newer = await second.app.inject({
          method: 'POST',
          url: '/api/v1/auth/refresh',
          payload: { refreshToken: rotated.json().data.refreshToken },
        });
        assert.equal(newer.statusCode, 401, 'reuse revoked the family, persisted');
        const login = await second.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: u.password } });
        assert.equal(login.statusCode, 200, 'the account itself survived');
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const pg = backends.find((b) => b.name === 'postgres');
  test('on PostgreSQL: a refresh token issued before a restart still rotates after it', { skip: pg?.skip ?? false }, async () => {
    const db = await createTestDatabase();
    try {
      const first = await startTestApp({ databaseUrl: db.url });
      const u = await registerUser(first.app);
      await first.close();
      const second = await startTestApp({ databaseUrl: db.url });
      try {
        const res = await second.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: u.refreshToken } });
        assert.equal(res.statusCode, 200);
      } finally {
        await second.close();
      }
    } finally {
      await db.drop();
    }
  });
});
