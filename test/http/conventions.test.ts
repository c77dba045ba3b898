import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

// C7: every failure, unknown routes included, is {success:false, error:{code, message, details?}}.
function assertEnvelope(body: unknown, code: string) {
  const b = body as { success: boolean; error: { code: string; message: string } };
  assert.equal(b.success, false);
  assert.equal(b.error.code, code);
  assert.equal(typeof b.error.message, 'string');
  assert.ok(b.error.message.length > 0);
}

describe('REST conventions (spec 4.1, C7)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ overrides: { server: { bodyLimitBytes: 4096 } } });
  });
  after(() => t.close());

  test('a success is {success: true, data}', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/networks' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().success, true);
    assert.ok(Array.isArray(res.json().data));
  });

  test('a delete answers {success: true, message}', async () => {
    const u = await registerUser(t.app);
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'k' } });
    const res = await t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${created.json().data.id}`, headers: u.auth });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(Object.keys(res.json()).sort(), ['message', 'success']);
    assert.equal(res.json().success, true);
  });

  test('an unknown route is 404 in the error envelope', async () => {
    for (const url of ['/nope', '/api/v1/nope', '/api/v1/networks/x/y']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assertEnvelope(res.json(), 'NOT_FOUND');
    }
  });

  test('malformed JSON is 400 INVALID_JSON', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: '{"email": "a@b.c", ',
    });
    assert.equal(res.statusCode, 400);
    assertEnvelope(res.json(), 'INVALID_JSON');
  });

  test('unknown body fields are rejected with 400 listing each of them, and nothing is stored', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/register',
      payload: { email: 'extra@example.com', password: 'long enough pw', name: 'X', tier: 'enterprise', isAdmin: true },
    });
    assert.equal(res.statusCode, 400);
    assertEnvelope(res.json(), 'VALIDATION_ERROR');
    const fields = res.json().error.details.map((d: { field: string }) => d.field).sort();
    assert.deepEqual(fields, ['body.isAdmin', 'body.tier']);
    const login = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email: 'extra@example.com', password: 'long enough pw' },
    });
    assert.equal(login.statusCode, 401, 'the rejected registration created no account');
  });

  test('missing and mistyped fields are listed in details', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email: 12, name: 'x' } });
    assert.equal(res.statusCode, 400);
    const fields = res.json().error.details.map((d: { field: string }) => d.field);
    assert.ok(fields.includes('body.password'), JSON.stringify(fields));
    assert.ok(fields.includes('body.email'), JSON.stringify(fields));
  });

  test('a body over the limit is 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/register',
      payload: { email: 'big@example.com', password: 'x'.repeat(5000), name: 'Big' },
    });
    assert.equal(res.statusCode, 413);
    assertEnvelope(res.json(), 'PAYLOAD_TOO_LARGE');
  });

  test('every response carries a request id, and a sane X-Request-Id is kept', async () => {
    const a = await t.app.inject({ method: 'GET', url: '/health/live' });
    assert.match(String(a.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const b = await t.app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': 'trace-123' } });
    assert.equal(b.headers['x-request-id'], 'trace-123');
    const c = await t.app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': 'bad id\n' } });
    assert.notEqual(c.headers['x-request-id'], 'bad id\n');
  });
});
