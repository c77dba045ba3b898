// How the gateway serves the dashboard (C43): at `/` with a strict CSP and the other security
// headers, hashed assets cached for a year and index.html revalidated, a reload of one of its
// pages answered with the dashboard, and every API, RPC and operations path left to its own
// answer (C1, C7). In process (app.inject); the build is made first when missing.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ROOT } from '../support/process.ts';

describe('the dashboard at / (C43)', () => {
  let t: TestApp;
  let asset: string;
  before(async () => {
    const build = (await import(pathToFileURL(path.join(ROOT, 'scripts/build.mjs')).href)) as { buildWeb(): Promise<boolean> };
    await build.buildWeb();
    asset = readdirSync(path.join(ROOT, 'web/dist/assets')).find((f) => f.endsWith('.js')) as string;
    t = await startTestApp();
  });
  after(() => t?.close());

  test('/ answers the dashboard with a strict Content-Security-Policy and no-cache', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/', headers: { host: 'gw.example:8080' } });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/html/);
    assert.match(res.body, /<div id="app"><\/div>/);
    const csp = String(res.headers['content-security-policy']);
    for (const part of [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      "connect-src 'self' ws://gw.example:8080 wss://gw.example:8080",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
    ]) {
      assert.ok(csp.split('; ').includes(part), `CSP has ${part}: ${csp}`);
    }
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['referrer-policy'], 'no-referrer');
    assert.equal(res.headers['cache-control'], 'no-cache');
    assert.ok(res.headers.etag);
    // Nothing inline for the CSP to refuse, nothing from elsewhere.
    assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)[^>]*>/);
    assert.doesNotMatch(res.body, /style=|<style|https?:\/\//);
    const again = await t.app.inject({ method: 'GET', url: '/', headers: { 'if-none-match': String(res.headers.etag) } });
    assert.equal(again.statusCode, 304);
  });

  test('a hostile Host header is not repeated in the CSP', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/', headers: { host: "evil.example; script-src 'unsafe-inline'" } });
    assert.equal(res.statusCode, 200);
    assert.doesNotMatch(String(res.headers['content-security-policy']), /evil|unsafe/);
  });

  test('hashed assets are cached for a year (immutable) and sent gzipped when asked', async () => {
    const res = await t.app.inject({ method: 'GET', url: `/assets/${asset}`, headers: { 'accept-encoding': 'gzip, br' } });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/javascript/);
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(res.headers['content-encoding'], 'gzip');
    assert.ok(res.headers['content-security-policy']);
  });

  test('a reload of a dashboard page answers the dashboard; unknown paths keep the JSON 404', async () => {
    for (const page of ['/keys', '/endpoints', '/usage', '/signin', '/keys/']) {
      const res = await t.app.inject({ method: 'GET', url: `${page}?x=1` });
      assert.equal(res.statusCode, 200, page);
      assert.match(res.body, /<div id="app">/, page);
    }
    for (const url of ['/nothing-here', '/assets/missing.js', '/routes.json', '/.build.json', '/assets/..%2F..%2Fpackage.json', '/%2e%2e/package.json']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error.code, 'NOT_FOUND', url);
    }
  });

  test('never the dashboard for /api, /v1, /rpc, /public, /ws, /health, /docs, /metrics', async () => {
    const api = await t.app.inject({ method: 'GET', url: '/api/v1/keys' });
    assert.equal(api.statusCode, 404);
    assert.equal(api.json().success, false);
    for (const url of ['/api/v1/nope', '/v1/native-mainnet', '/rpc/main/evm/50', '/public/main', '/health/nope', '/metrics/x', '/docs/nope.html']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.doesNotMatch(res.body, /<div id="app">/, url);
      assert.notEqual(res.statusCode, 200, url);
    }
    assert.equal((await t.app.inject({ method: 'GET', url: '/health/live' })).statusCode, 200);
    assert.match((await t.app.inject({ method: 'GET', url: '/docs/json' })).body, /"openapi"/);
    const ws = await t.app.inject({ method: 'GET', url: '/ws' });
    assert.equal(ws.statusCode, 426);
  });

  test('without a build, / says how to build it (503) and the API is unaffected', async () => {
    const { dashboardRoutes } = await import('../../src/http/dashboard.ts');
    const { default: Fastify } = await import('fastify');
    const app = Fastify();
    dashboardRoutes(app, { dir: path.join(ROOT, 'web/no-such-dist') });
    const res = await app.inject({ method: 'GET', url: '/' });
    assert.equal(res.statusCode, 503);
    assert.match(res.body, /npm run build/);
    await app.close();
  });
});
