// Addresses easy to find: create and rotate answer ready-to-paste URLs that work as pasted, the
// key may travel in X-API-Key on /v1/{slug}, rotate and revoke take an empty JSON body, and no
// 404 repeats a key.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';

const call = { jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] };

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { result?: string; error?: { code: number } } };
}

/** One JSON-RPC call over a new WebSocket connection to `url`. */
function overWebSocket(url: string): Promise<{ result?: string; error?: { code: number } }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('open', () => ws.send(JSON.stringify(call)));
    ws.on('message', (data: WebSocket.RawData) => {
      const text = Array.isArray(data) ? Buffer.concat(data).toString() : Buffer.from(data as ArrayBuffer).toString();
      resolve(JSON.parse(text) as { result?: string });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', reject);
  });
}

interface Endpoint {
  network: string;
  http: string;
  ws: string;
}

describe('ready-to-paste addresses (C1, C2)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], listen: true });
  });
  after(() => t?.close());

  test('GET /networks gives wsUrl beside rpcUrl, both on the address users see', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/networks' });
    const base = t.url.replace('127.0.0.1', 'localhost');
    for (const n of res.json().data as Array<{ slug: string; rpcUrl: string; wsUrl: string }>) {
      assert.equal(n.rpcUrl, `${base}/v1/${n.slug}`);
      assert.equal(n.wsUrl, `${base.replace(/^http/, 'ws')}/ws/${n.slug}`);
    }
  });

  test('creating a key answers the HTTP and WebSocket addresses of its networks, and both work as pasted', async () => {
    const u = await registerUser(t.app);
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'paste', networks: ['native-mainnet'] } });
    assert.equal(res.statusCode, 200);
    const k = res.json().data as { key: string; endpoints: Endpoint[] };
    assert.equal(k.endpoints.length, 1);
    const [e] = k.endpoints as [Endpoint];
    assert.equal(e.network, 'native-mainnet');
    assert.ok(e.http.endsWith(`/v1/native-mainnet/${k.key}`));
    assert.ok(e.ws.endsWith(`/ws/native-mainnet?apiKey=${k.key}`));
    assert.equal((await post(e.http, call)).json.result, '0x32', 'the HTTP address answers');
    assert.equal((await overWebSocket(e.ws)).result, '0x32', 'the WebSocket address answers');
  });

  test("a free key made without networks lists the plan's networks (native mainnet and testnet)", async () => {
    const u = await registerUser(t.app);
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'default' } });
    assert.deepEqual(
      (res.json().data.endpoints as Endpoint[]).map((e) => e.network),
      ['native-mainnet', 'native-testnet'],
    );
  });

  test('rotating answers the new addresses; the old ones stop', async () => {
    const { key, id, user } = await createKey(t.app, { networks: ['native-mainnet'] });
    const res = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${id}/rotate`, headers: user.auth });
    assert.equal(res.statusCode, 200);
    const data = res.json().data as { key: string; endpoints: Endpoint[] };
    assert.notEqual(data.key, key);
    const [e] = data.endpoints as [Endpoint];
    assert.ok(e.http.endsWith(`/${data.key}`) && e.ws.endsWith(`apiKey=${data.key}`));
    assert.equal((await post(e.http, call)).json.result, '0x32');
    assert.equal((await post(e.http.replace(data.key, key), call)).status, 401, 'the old address stops');
  });

  test('/v1/{slug} takes the key in X-API-Key', async () => {
    const { key } = await createKey(t.app, { networks: ['native-mainnet'] });
    const ok = await post(`${t.url}/v1/native-mainnet`, call, { 'x-api-key': key });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.result, '0x32');
    const none = await post(`${t.url}/v1/native-mainnet`, call);
    assert.equal(none.status, 401);
    assert.equal(none.json.error?.code, -32001);
  });
});

describe('rotate and revoke take an empty body', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ listen: true });
  });
  after(() => t?.close());

  for (const action of ['rotate', 'revoke'] as const) {
    test(`${action}: no body, an empty body sent as JSON, and {} all work; an unknown field is 400`, async () => {
      const user = await registerUser(t.app);
      const bodies: Array<[string, RequestInit]> = [
        ['no body', {}],
        ['empty JSON', { headers: { 'content-type': 'application/json' }, body: '' }],
        ['{}', { headers: { 'content-type': 'application/json' }, body: '{}' }],
      ];
      for (const [what, init] of bodies) {
        const { id } = await createKey(t.app, {}, user);
        // A real client over HTTP: app.inject would not send an empty body the same way.
        const res = await fetch(`${t.url}/api/v1/api-keys/${id}/${action}`, {
          ...init,
          method: 'POST',
          headers: { ...user.auth, ...(init.headers as Record<string, string> | undefined) },
        });
        assert.equal(res.status, 200, `${action} with ${what}: ${await res.clone().text()}`);
        const data = ((await res.json()) as { data: { status: string } }).data;
        assert.equal(data.status, action === 'revoke' ? 'revoked' : 'active');
        // Delete it so the plan's 3 keys are never reached.
        await t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: user.auth });
      }
      const { id } = await createKey(t.app, {}, user);
      const bad = await fetch(`${t.url}/api/v1/api-keys/${id}/${action}`, {
        method: 'POST',
        headers: { ...user.auth, 'content-type': 'application/json' },
        body: '{"force":true}',
      });
      assert.equal(bad.status, 400);
      assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'VALIDATION_ERROR');
      const list = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: user.auth });
      assert.equal(list.json().data[0].status, 'active', 'a refused call changes nothing');
    });
  }
});

describe('no 404 repeats an API key', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ listen: true });
  });
  after(() => t?.close());

  test('unknown networks, unknown REST and RPC paths with the key in them, and a key where an id belongs', async () => {
    const { key, user } = await createKey(t.app);
    const secret = key.slice('jk_live_'.length + 8);
    const tries: Array<[string, string, Record<string, string>?]> = [
      ['POST', `/v1/atlantis/${key}`],
      ['POST', `/v1/${key}`],
      ['POST', `/v1/${key}/${key}`],
      ['POST', `/rpc/main/evm/${key}`],
      ['POST', `/rpc/${key}/evm/50`],
      ['POST', `/public/${key}`],
      ['GET', `/api/v1/networks/${key}`],
      ['GET', `/api/v1/${key}`],
      ['POST', `/api/v1/api-keys/${key}/rotate`, user.auth],
      ['PATCH', `/api/v1/api-keys/${key}`, user.auth],
      ['DELETE', `/api/v1/api-keys/${key}`, user.auth],
      ['GET', `/health/${key}`],
      ['GET', `/docs/${key}`],
      ['GET', `/metrics/${key}`],
      ['GET', `/${key}`],
      ['GET', `/ws/${key}/x`],
    ];
    for (const [method, path, headers] of tries) {
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { 'content-type': 'application/json', ...headers },
        ...(method === 'GET' || method === 'DELETE' ? {} : { body: JSON.stringify(method === 'PATCH' ? { name: 'x' } : call) }),
      });
      const body = await res.text();
      assert.ok(res.status >= 400, `${method} ${path.replaceAll(key, '<key>')}: refused (${res.status})`);
      assert.ok(!body.includes(secret), `${method} ${path.replaceAll(key, '<key>')} (${res.status}) does not repeat the key: ${body.replaceAll(secret, '<secret>')}`);
    }
  });
});
