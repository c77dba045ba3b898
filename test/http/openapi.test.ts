// The OpenAPI document (/docs/json) is complete enough for a generated client: every operation has
// an operationId, the JSON-RPC and WebSocket addresses and their key schemes are in it, errors share
// one component, every limited route says 429 with Retry-After; and types generated from it by
// openapi-typescript type-check (and run) a small client.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ROOT } from '../support/process.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON document walked freely
type Obj = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head'];

function operations(doc: Obj): Array<{ method: string; url: string; op: Obj }> {
  return Object.entries(doc.paths as Obj).flatMap(([url, item]) =>
    Object.entries(item as Obj)
      .filter(([m]) => METHODS.includes(m))
      .map(([method, op]) => ({ method, url, op: op as Obj })),
  );
}

/** Follows a local `$ref` (`#/components/...`). */
function deref(doc: Obj, v: Obj): Obj {
  if (typeof v.$ref !== 'string') return v;
  return (v.$ref)
    .slice(2)
    .split('/')
    .reduce<Obj>((o, k) => o[k] as Obj, doc);
}

describe('the OpenAPI document', () => {
  let t: TestApp;
  let doc: Obj;
  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN: 'admin-token-for-openapi-0123' }, listen: true });
    const res = await t.app.inject({ method: 'GET', url: '/docs/json' });
    assert.equal(res.statusCode, 200);
    doc = res.json();
  });
  after(() => t?.close());

  test('every operation has a unique operationId', () => {
    const ops = operations(doc);
    assert.ok(ops.length > 30);
    const missing = ops.filter((o) => typeof o.op.operationId !== 'string' || o.op.operationId === '').map((o) => `${o.method.toUpperCase()} ${o.url}`);
    assert.deepEqual(missing, [], `operations without an operationId: ${missing.join(', ')}`);
    const ids = ops.map((o) => o.op.operationId as string);
    assert.equal(new Set(ids).size, ids.length, `duplicate operationIds: ${ids.filter((id, i) => ids.indexOf(id) !== i).join(', ')}`);
  });

  test('info.version is the package version; no internal contract ids in the text', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.equal(doc.info.version, pkg.version);
    const ids = JSON.stringify(doc).match(/\bC\d{1,2}\b/g);
    assert.equal(ids, null, `contract ids in the document: ${[...new Set(ids)].join(', ')}`);
  });

  test('the JSON-RPC addresses are documented with their request, answers, errors and key schemes', () => {
    const schemes = doc.components.securitySchemes as Obj;
    assert.deepEqual(schemes.apiKey, { ...schemes.apiKey, type: 'apiKey', in: 'header', name: 'X-API-Key' });
    assert.equal(schemes.apiKeyQuery.in, 'query');
    assert.match(schemes.apiKey.description, /\/v1\/\{network\}\/\{apiKey\}/, 'the path-key form is named');
    const rpc: Array<[string, unknown]> = [
      ['/rpc/main/evm/{chainId}', [{ apiKey: [] }]],
      ['/v1/{network}', [{ apiKey: [] }]],
      ['/v1/{network}/{apiKey}', []],
      ['/public/main', []],
    ];
    for (const [url, security] of rpc) {
      const op = doc.paths[url]?.post as Obj;
      assert.ok(op, `POST ${url}`);
      assert.deepEqual(op.security, security, `${url} security`);
      assert.equal(op.requestBody.content['application/json'].schema.$ref, '#/components/schemas/JsonRpcBody');
      for (const status of ['200', '400', '401', '403', '404', '429', '502']) assert.ok(op.responses[status], `${url} answers ${status}`);
      assert.ok(op.responses['429'].headers['Retry-After'], `${url}: 429 with Retry-After`);
      assert.equal(op['x-protocol'], 'JSON-RPC 2.0');
    }
    assert.ok(doc.paths['/v1/{network}/{apiKey}'].post.parameters.some((p: Obj) => p.name === 'apiKey' && p.in === 'path'));
    const codes = doc.components.schemas.JsonRpcError.properties.error.properties.code.description as string;
    for (const code of ['-32700', '-32600', '-32601', '-32001', '-32002', '-32003', '-32004', '-32005', '-32006', '-32000']) assert.ok(codes.includes(code), code);
  });

  test('the WebSocket addresses are documented with the query and header key schemes', () => {
    for (const url of ['/ws', '/ws/{network}']) {
      const op = doc.paths[url]?.get as Obj;
      assert.ok(op, `GET ${url}`);
      assert.deepEqual(op.security, [{ apiKeyQuery: [] }, { apiKey: [] }]);
      assert.ok(op.responses['101']);
    }
  });

  test('errors share one component, and every REST route answers 429 with Retry-After', () => {
    assert.ok(doc.components.schemas.ErrorResponse);
    let refs = 0;
    for (const { method, url, op } of operations(doc)) {
      for (const [status, r] of Object.entries(op.responses as Obj)) {
        const response = deref(doc, r as Obj);
        const schema = response.content?.['application/json']?.schema as Obj | undefined;
        if (!schema) continue;
        if (schema.$ref === '#/components/schemas/ErrorResponse') refs++;
        assert.ok(!(schema.properties?.success?.enum?.[0] === false), `${method} ${url} ${status}: the error envelope is the shared component`);
      }
      if (!url.startsWith('/api/v1/')) continue;
      const tooMany = deref(doc, op.responses['429'] as Obj);
      assert.ok(tooMany?.headers?.['Retry-After'], `${method.toUpperCase()} ${url}: 429 with Retry-After`);
      const okStatus = Object.keys(op.responses as Obj).find((s) => s.startsWith('2')) as string;
      assert.ok(op.responses[okStatus].headers?.['X-RateLimit-Remaining'], `${method.toUpperCase()} ${url}: rate-limit headers`);
    }
    assert.ok(refs > 20, `the component is referenced (${refs})`);
  });

  test('the /health bodies are documented', () => {
    const ready = doc.paths['/health/ready'].get as Obj;
    for (const status of ['200', '503']) {
      const schema = deref(doc, ready.responses[status].content['application/json'].schema as Obj);
      assert.ok(schema.properties.networks && schema.properties.checks && schema.properties.status, `ready ${status}`);
    }
    assert.ok(doc.paths['/health/live'].get.responses['200'].content['application/json'].schema.properties.status);
  });

  test('types generated by openapi-typescript type-check a small client, which then works against the gateway', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-openapi-'));
    try {
      writeFileSync(path.join(dir, 'api.d.ts'), astToString(await openapiTS(doc as Parameters<typeof openapiTS>[0])));
      writeFileSync(path.join(dir, 'client.ts'), CLIENT);
      writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: [], skipLibCheck: false },
          files: ['client.ts', 'api.d.ts'],
        }),
      );
      const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
      const checked = await promisify(execFile)(process.execPath, [tsc, '-p', dir], { cwd: dir }).then(
        () => '',
        (err: Error & { stdout?: string }) => err.stdout || err.message,
      );
      assert.equal(checked, '', `tsc on the client:\n${checked}`);
      // The same client, run: its typed calls are the real API.
      const client = (await import(pathToFileURL(path.join(dir, 'client.ts')).href)) as { run(base: string): Promise<{ http: string; rpcUrl: string }> };
      const out = await client.run(t.url);
      assert.match(out.http, /\/v1\/native-mainnet\/jk_live_/);
      assert.match(out.rpcUrl, /\/v1\/native-mainnet$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A client written against the generated types only. `@ts-expect-error` lines prove the types are not `any`. */
const CLIENT = `
import type { components, paths } from './api';

type Json<P extends keyof paths, M extends 'get' | 'post'> = paths[P][M] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type Ok<P extends keyof paths, M extends 'get' | 'post'> = paths[P][M] extends { responses: { 200: { content: { 'application/json': infer R } } } } ? R : never;

async function call<P extends keyof paths, M extends 'get' | 'post'>(base: string, path: P, method: M, body?: Json<P, M>, token?: string): Promise<Ok<P, M>> {
  const res = await fetch(base + path, {
    method: method.toUpperCase(),
    headers: { 'content-type': 'application/json', ...(token ? { authorization: 'Bearer ' + token } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) {
    const failure = (await res.json()) as components['schemas']['ErrorResponse'];
    throw new Error(failure.error.code + ': ' + failure.error.message);
  }
  return (await res.json()) as Ok<P, M>;
}

export async function run(base: string): Promise<{ http: string; rpcUrl: string }> {
  const registration: Json<'/api/v1/auth/register', 'post'> = { email: 'typed.' + Date.now() + '@example.com', password: 'a long enough password', name: 'Typed' };
  // @ts-expect-error: the password is required
  const incomplete: Json<'/api/v1/auth/register', 'post'> = { email: 'x@example.com', name: 'X' };
  void incomplete;
  const session = await call(base, '/api/v1/auth/register', 'post', registration);
  const token: string = session.data.tokens.accessToken;
  const login: Json<'/api/v1/auth/login', 'post'> = { email: registration.email, password: registration.password };
  await call(base, '/api/v1/auth/login', 'post', login);
  const keyBody: Json<'/api/v1/api-keys', 'post'> = { name: 'typed client', networks: ['native-mainnet'], rateLimit: 10 };
  // @ts-expect-error: rateLimit is a number
  const wrong: Json<'/api/v1/api-keys', 'post'> = { name: 'x', rateLimit: 'fast' };
  void wrong;
  const created = await call(base, '/api/v1/api-keys', 'post', keyBody, token);
  const status: 'active' | 'inactive' | 'revoked' | 'expired' = created.data.status;
  void status;
  const first = created.data.endpoints[0];
  if (!first) throw new Error('no endpoint');
  const networks = await call(base, '/api/v1/networks', 'get');
  const native = networks.data.find((n) => n.slug === 'native-mainnet');
  const rpc: components['schemas']['JsonRpcRequest'] = { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] };
  void rpc;
  return { http: first.http, rpcUrl: native ? native.rpcUrl : '' };
}
`;
