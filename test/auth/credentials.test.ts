import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { registerUser, startTestApp, type TestApp, TEST_SECRETS, uniqueEmail } from '../support/app.ts';

describe('access tokens carry every claim the gateway issues (C5)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t?.close());

  // Signed exactly as the gateway signs (the real secret, its key derivation), with chosen claims.
  const sign = (claims: { exp?: boolean; iat?: boolean; jti?: boolean; fam?: boolean; sub: string }) => {
    const key = createHash('sha256').update(`junction-jwt:${TEST_SECRETS.jwtSecret}`).digest();
    const now = Math.floor(Date.now() / 1000);
    const jwt = new SignJWT({ typ: 'access', ...(claims.fam === false ? {} : { fam: randomUUID() }) })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(claims.sub)
      .setIssuer(t.config.auth.issuer);
    if (claims.iat !== false) jwt.setIssuedAt(now);
    if (claims.exp !== false) jwt.setExpirationTime(now + 600);
    if (claims.jti !== false) jwt.setJti(randomUUID());
    return jwt.sign(key);
  };
  const me = (token: string) => t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: { authorization: `Bearer ${token}` } });

  test('a token signed with the real secret but without exp is 401', async () => {
    const u = await registerUser(t.app);
    assert.equal((await me(await sign({ sub: u.id }))).statusCode, 200, 'the same token with exp is accepted');
    const res = await me(await sign({ sub: u.id, exp: false }));
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'UNAUTHORIZED');
  });

  test('a token without iat, jti or the login it belongs to is 401', async () => {
    const u = await registerUser(t.app);
    for (const missing of ['iat', 'jti', 'fam'] as const) {
      const res = await me(await sign({ sub: u.id, [missing]: false }));
      assert.equal(res.statusCode, 401, `without ${missing}`);
    }
  });
});

describe('new passwords: blank and common ones are refused (C5)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t?.close());

  const register = (password: string) =>
    t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email: uniqueEmail('pw'), password, name: 'Pat' } });

  test('registration refuses all-blank and common passwords with 400 naming body.password, never echoing it', async () => {
    for (const password of ['12345678', '        ', '\t\t\t\t \u00a0   ', 'password', 'PassWord1', 'iloveyou', 'qwertyuiop', 'aaaaaaaaaa']) {
      const res = await register(password);
      assert.equal(res.statusCode, 400, JSON.stringify(password));
      const body = res.json();
      assert.equal(body.error.code, 'VALIDATION_ERROR');
      assert.deepEqual(
        body.error.details.map((d: { field: string }) => d.field),
        ['body.password'],
      );
      // ('password' itself is a word of the message.)
      if (password.trim() && password !== 'password') assert.ok(!res.body.includes(password), 'the password is not echoed');
    }
  });

  test('a common password with spaces around or inside it is still refused', async () => {
    for (const password of ['1234567 ', ' 12345678 ', '12345678\t', 'pass word', 'PASSWORD  ', 'i love you', 'qwerty   uiop']) {
      const res = await register(password);
      assert.equal(res.statusCode, 400, JSON.stringify(password));
      assert.equal(res.json().error.details[0].field, 'body.password');
    }
  });

  test('an uncommon password of 8+ characters, spaces inside included, is accepted', async () => {
    for (const password of ['correct horse battery', 'Tr0ub4dor&3x', ' padded passphrase ']) {
      assert.equal((await register(password)).statusCode, 200, password);
    }
  });

  test('a password change to a common password is 400 naming body.newPassword and changes nothing', async () => {
    const u = await registerUser(t.app);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/password',
      headers: u.auth,
      payload: { currentPassword: u.password, newPassword: '12345678' },
    });
    assert.equal(res.statusCode, 400);
    assert.deepEqual(
      res.json().error.details.map((d: { field: string }) => d.field),
      ['body.newPassword'],
    );
    const login = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: u.password } });
    assert.equal(login.statusCode, 200, 'the old password still works');
  });
});
