// The dashboard's sign-in (C43, C5): with "session": "cookie" the refresh token goes into an
// HttpOnly, SameSite=Strict cookie for /api/v1/auth and out of the answer; /auth/refresh reads and
// rotates it (reuse detection as before), /auth/logout clears it. Without the option, API clients
// get the JSON refresh token exactly as before.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp, uniqueEmail } from '../support/app.ts';

const cookieOf = (setCookie: string | string[] | undefined) => {
  const c = Array.isArray(setCookie) ? setCookie[0] : setCookie;
  assert.ok(c, 'a Set-Cookie header');
  return { header: c, value: /^junction_refresh=([^;]*)/.exec(c)?.[1] ?? '' };
};

describe('refresh token in a cookie for the dashboard (C43, C5)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t?.close());

  const register = (extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: '/api/v1/auth/register', headers, payload: { email: uniqueEmail('cookie'), password: 'a long password here', name: 'C', ...extra } });

  test('register with session "cookie": HttpOnly SameSite=Strict cookie on /api/v1/auth, no refresh token in the body', async () => {
    const res = await register({ session: 'cookie' });
    assert.equal(res.statusCode, 200);
    const { header, value } = cookieOf(res.headers['set-cookie']);
    assert.match(header, /; Path=\/api\/v1\/auth;/);
    assert.match(header, /; HttpOnly/);
    assert.match(header, /; SameSite=Strict/);
    assert.doesNotMatch(header, /; Secure/, 'plain http: not Secure');
    const maxAge = Number(/Max-Age=(\d+)/.exec(header)?.[1]);
    assert.ok(maxAge > 29 * 86400 && maxAge <= 30 * 86400, `30 days (C5): ${maxAge}`);
    assert.match(value, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    const tokens = res.json().data.tokens;
    assert.deepEqual(Object.keys(tokens), ['accessToken']);
    assert.ok(!res.body.includes(value));
    assert.equal(res.headers['cache-control'], 'no-store');
  });

  test('over https behind a trusted proxy (X-Forwarded-Proto: https) the cookie is Secure', async () => {
    const p = await startTestApp({ env: { TRUSTED_PROXIES: '127.0.0.1' } });
    try {
      const res = await p.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        remoteAddress: '127.0.0.1',
        headers: { 'x-forwarded-proto': 'https' },
        payload: { email: uniqueEmail('secure'), password: 'a long password here', name: 'S', session: 'cookie' },
      });
      assert.equal(res.statusCode, 200);
      assert.match(cookieOf(res.headers['set-cookie']).header, /; Secure/);
    } finally {
      await p.close();
    }
  });

  test('with an https public address (PUBLIC_URL) the cookie is Secure though the gateway sees plain http: register, login, refresh and the clearing at logout', async () => {
    // A TLS-terminating proxy in front, not configured as trusted and sending no X-Forwarded-Proto.
    const p = await startTestApp({ env: { PUBLIC_URL: 'https://rpc.example.com' } });
    try {
      const email = uniqueEmail('public-https');
      const password = 'a long password here';
      const reg = await p.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email, password, name: 'P', session: 'cookie' } });
      assert.equal(reg.statusCode, 200);
      assert.match(cookieOf(reg.headers['set-cookie']).header, /; Secure$/);
      const login = await p.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password, session: 'cookie' } });
      assert.equal(login.statusCode, 200);
      const cookie = cookieOf(login.headers['set-cookie']);
      assert.match(cookie.header, /; Secure$/);
      const refresh = await p.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', headers: { cookie: `junction_refresh=${cookie.value}` }, payload: { session: 'cookie' } });
      assert.equal(refresh.statusCode, 200);
      const rotated = cookieOf(refresh.headers['set-cookie']);
      assert.match(rotated.header, /; Secure$/);
      const out = await p.app.inject({
        method: 'POST',
        url: '/api/v1/auth/logout',
        headers: { authorization: `Bearer ${refresh.json().data.accessToken}`, cookie: `junction_refresh=${rotated.value}` },
      });
      assert.equal(out.statusCode, 200);
      assert.match(cookieOf(out.headers['set-cookie']).header, /Max-Age=0;.*; Secure$/);
    } finally {
      await p.close();
    }
  });

  test('X-Forwarded-Proto from a peer that is not a trusted proxy leaves a plain-http cookie without Secure', async () => {
    const forwarded = { 'x-forwarded-proto': 'https' };
    // No trusted proxy at all: the header is nobody's word.
    const none = await register({ session: 'cookie' }, forwarded);
    assert.equal(none.statusCode, 200);
    assert.doesNotMatch(cookieOf(none.headers['set-cookie']).header, /; Secure/);
    // A trusted proxy elsewhere: this peer is not it.
    const p = await startTestApp({ env: { TRUSTED_PROXIES: '10.9.8.7' } });
    try {
      const res = await p.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        remoteAddress: '127.0.0.1',
        headers: forwarded,
        payload: { email: uniqueEmail('untrusted'), password: 'a long password here', name: 'U', session: 'cookie' },
      });
      assert.equal(res.statusCode, 200);
      assert.doesNotMatch(cookieOf(res.headers['set-cookie']).header, /; Secure/);
    } finally {
      await p.close();
    }
  });

  test('without the option nothing changes: the JSON refresh token, no cookie', async () => {
    const res = await register();
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['set-cookie'], undefined);
    const { refreshToken } = res.json().data.tokens;
    const again = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken } });
    assert.equal(again.statusCode, 200);
    assert.equal(again.headers['set-cookie'], undefined);
    assert.ok(again.json().data.refreshToken);
  });

  test('refresh reads the cookie, rotates it, and a reused cookie ends the login (C5)', async () => {
    const first = cookieOf((await register({ session: 'cookie' })).headers['set-cookie']).value;
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', headers: { cookie: `other=1; junction_refresh=${first}` }, payload: { session: 'cookie' } });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(Object.keys(res.json().data), ['accessToken']);
    const second = cookieOf(res.headers['set-cookie']).value;
    assert.notEqual(second, first);
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: { authorization: `Bearer ${res.json().data.accessToken}` } });
    assert.equal(me.statusCode, 200);
    // The old cookie again: reuse, the whole family is revoked and the dead cookie cleared.
    const reuse = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', headers: { cookie: `junction_refresh=${first}` }, payload: { session: 'cookie' } });
    assert.equal(reuse.statusCode, 401);
    assert.match(cookieOf(reuse.headers['set-cookie']).header, /Max-Age=0/);
    const after = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', headers: { cookie: `junction_refresh=${second}` }, payload: { session: 'cookie' } });
    assert.equal(after.statusCode, 401);
  });

  test('refresh with neither body token nor cookie: 401 in cookie mode, 400 naming the field otherwise', async () => {
    const cookieMode = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { session: 'cookie' } });
    assert.equal(cookieMode.statusCode, 401);
    assert.equal(cookieMode.json().success, false);
    const plain = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: {} });
    assert.equal(plain.statusCode, 400);
    assert.equal(plain.json().error.details[0].field, 'body.refreshToken');
    const junk = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', payload: { session: 'jar' } });
    assert.equal(junk.statusCode, 400);
  });

  test('login with session "cookie" sets it too; logout revokes the login and clears the cookie', async () => {
    const email = uniqueEmail('out');
    await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email, password: 'a long password here', name: 'O' } });
    const login = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password: 'a long password here', session: 'cookie' } });
    assert.equal(login.statusCode, 200);
    const cookie = cookieOf(login.headers['set-cookie']).value;
    const out = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { authorization: `Bearer ${login.json().data.tokens.accessToken}`, cookie: `junction_refresh=${cookie}` },
    });
    assert.equal(out.statusCode, 200);
    const cleared = cookieOf(out.headers['set-cookie']).header;
    assert.match(cleared, /^junction_refresh=; Path=\/api\/v1\/auth; Max-Age=0/);
    const refresh = await t.app.inject({ method: 'POST', url: '/api/v1/auth/refresh', headers: { cookie: `junction_refresh=${cookie}` }, payload: { session: 'cookie' } });
    assert.equal(refresh.statusCode, 401);
  });
});
