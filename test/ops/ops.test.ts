import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

describe('operations: logs, metrics, health, docs (C3)', () => {
  let t: TestApp;
  before(async () => {
    // RPC access lines on, so the redaction of keys in URLs is exercised.
    t = await startTestApp({ env: { LOG_LEVEL: 'trace' }, overrides: { rpc: { accessLog: true } } });
  });
  after(() => t.close());

  test('logs are JSON lines with request ids', async () => {
    await t.app.inject({ method: 'GET', url: '/api/v1/networks', headers: { 'x-request-id': 'log-check-1' } });
    const lines = t.logs.map((l) => JSON.parse(l));
    const mine = lines.filter((l) => l.reqId === 'log-check-1');
    assert.ok(mine.length >= 2, 'incoming and completed lines carry the request id');
    assert.ok(mine.some((l) => l.req?.url === '/api/v1/networks'));
    assert.ok(mine.some((l) => l.res?.statusCode === 200));
  });

  test('registering, logging in, creating a key and using it leave neither the key nor the password in the logs', async () => {
    const password = 'pa55word-that-must-not-leak';
    const u = await registerUser(t.app, { password });
    await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password } });
    await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: `${password}-wrong` } });
    const created = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'logged?' } });
    const key = created.json().data.key as string;
    await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: u.auth });
    const rpc = { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] };
    // Every way a key travels: path segment, header, query parameter.
    await t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: rpc });
    await t.app.inject({ method: 'POST', url: '/rpc/main/evm/50', headers: { 'x-api-key': key }, payload: rpc });
    await t.app.inject({ method: 'GET', url: `/ws?apiKey=${key}` });
    await t.app.inject({ method: 'GET', url: `/ws/ethereum?foo=1&apiKey=${key}` });
    const all = t.logs.join('');
    const secret = key.slice(key.indexOf('_live_') + 14);
    assert.ok(!all.includes(secret), 'the key secret is not logged');
    assert.ok(!all.includes(password), 'the password is not logged');
    assert.ok(!all.includes(u.accessToken.split('.')[2] as string), 'the bearer token is not logged');
    assert.ok(all.includes('/v1/native-mainnet/[redacted]'), 'the path form is logged redacted');
  });

  test('GET /metrics serves Prometheus text with request counters by route', async () => {
    await t.app.inject({ method: 'GET', url: '/api/v1/networks' });
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    assert.match(res.body, /# TYPE junction_http_requests_total counter/);
    assert.match(res.body, /junction_http_requests_total\{method="GET",route="\/api\/v1\/networks",status="200"\} \d+/);
    assert.match(res.body, /junction_process_resident_memory_bytes/);
  });

  test('GET /health/live is 200; /health/ready is 200 with storage checked and each network reported', async () => {
    const live = await t.app.inject({ method: 'GET', url: '/health/live' });
    assert.equal(live.statusCode, 200);
    const ready = await t.app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(ready.statusCode, 200);
    const body = ready.json();
    assert.equal(body.checks.storage.ok, true);
    assert.equal(Object.keys(body.networks).length, 16);
  });

  test('GET /docs serves a browsable page and the OpenAPI document built from the route schemas', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/docs/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /text\/html/);
    // Under the dashboard's Content-Security-Policy, the page and its files alike; Swagger UI's one
    // inline style is admitted by its hash, nothing else inline (test/web/shell.test.ts renders it).
    for (const url of ['/docs/', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js', '/docs/json']) {
      const csp = String((await t.app.inject({ method: 'GET', url })).headers['content-security-policy']);
      for (const part of ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"]) {
        assert.ok(csp.split('; ').includes(part), `${url}: CSP has ${part}: ${csp}`);
      }
      assert.match(csp, /(^|; )style-src 'self'( 'sha256-[A-Za-z0-9+/]+=')*(;|$)/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    }
    const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
    assert.match(doc.openapi, /^3\./);
    for (const p of ['/api/v1/auth/register', '/api/v1/auth/login', '/api/v1/auth/refresh', '/api/v1/networks', '/api/v1/networks/{slug}', '/api/v1/api-keys', '/api/v1/api-keys/{id}', '/api/v1/api-keys/{id}/rotate', '/api/v1/api-keys/{id}/revoke']) {
      assert.ok(doc.paths[p], `documents ${p}`);
    }
    // Generated from the schemas: the register body lists exactly the fields the route validates.
    const reg = doc.paths['/api/v1/auth/register'].post.requestBody.content['application/json'].schema;
    assert.deepEqual(Object.keys(reg.properties).sort(), ['email', 'name', 'password', 'session']);
    assert.equal(reg.additionalProperties, false);
  });
});

describe('readiness when storage is down (C3)', () => {
  test('/health/ready answers 503 naming the failed check, /health/live stays 200', async () => {
    const t = await startTestApp();
    await t.storage.close();
    const ready = await t.app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(ready.statusCode, 503);
    assert.equal(ready.json().checks.storage.ok, false);
    assert.equal((await t.app.inject({ method: 'GET', url: '/health/live' })).statusCode, 200);
    await t.app.close();
  });
});
