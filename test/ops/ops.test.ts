import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';

const chainId = { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] };

/** Whether `text` holds any 12 consecutive characters of `secret` (a partial leak counts too). */
function holdsPartOf(text: string, secret: string): boolean {
  for (let i = 0; i + 12 <= secret.length; i++) if (text.includes(secret.slice(i, i + 12))) return true;
  return false;
}

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

  // C19: API keys in mistyped URLs reach neither the logs nor a 404 body (how a URL is redacted:
  // test/ops/logging.test.ts).
  test('a key in a slightly wrong address is logged as its prefix only, and no answer repeats its secret', async () => {
    const { key } = await createKey(t.app, { name: 'odd urls' });
    const prefix = key.slice(0, 'jk_live_'.length + 8);
    const secret = key.slice(prefix.length);
    const odd: Array<['GET' | 'POST', string]> = [
      ['POST', `//v1/native-mainnet/${key}`],
      ['POST', `/V1/native-mainnet/${key}`],
      ['POST', `/v1//native-mainnet/${key}`],
      ['POST', `/v1/native-mainnet//${key}`],
      ['POST', `/v1/native-mainnet/${key}/`],
      ['POST', `/v1/native-mainnet/${key}/extra`],
      ['GET', `/v1/native-mainnet/${key}`],
      ['POST', `/rpc/main/evm/50?key=${key}`],
      ['POST', `/rpc/main/evm/50?apiKey=${key}`],
      ['POST', `/rpc/main/evm/50?x=1&api_key=${key}`],
      ['POST', `/public/main?token=${key}`],
      ['POST', `/ws/native-mainnet/${key}`],
      ['GET', `/ws/native-mainnet/${key}`],
      ['POST', `/rpc/${key}`],
      ['POST', `/rpc/main/evm/50/${key}`],
      ['POST', `/api/v1/${key}`],
      ['GET', `/somewhere/else?q=${key}`],
      // Percent-encoding one character of the secret must not split it past the redaction.
      ['POST', `/ws/native-mainnet/${prefix}${secret.slice(0, 20)}%${secret.charCodeAt(20).toString(16)}${secret.slice(21)}`],
    ];
    for (const [method, url] of odd) {
      const before = t.logs.length;
      const res = await t.app.inject({ method, url, ...(method === 'POST' ? { payload: chainId } : {}) });
      assert.ok(!holdsPartOf(res.body, secret), `${method} ${url.replace(secret, '<secret>')}: the answer does not repeat the key (${res.statusCode})`);
      const lines = t.logs.slice(before).join('');
      assert.ok(lines.length > 0, `${method} ${url.replace(secret, '<secret>')} is logged`);
      assert.ok(!holdsPartOf(lines, secret), `${method} ${url.replace(secret, '<secret>')}: the log does not hold the secret`);
      if (res.statusCode === 404 && String(res.headers['content-type']).includes('json') && res.json().success === false) {
        assert.equal(res.json().error.code, 'NOT_FOUND', 'a 404 is in the C7 envelope');
      }
    }
    // The prefix is kept: a log still says which key it was (C19: the prefix is not secret).
    assert.ok(t.logs.join('').includes(`/ws/native-mainnet/${prefix}[redacted]`), 'the prefix stays in the log');
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
