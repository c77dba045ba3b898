// C46a: analytics count each refusal once under its real reason. The key's own allowlists
// (origin, IP, JWT, method list, contract list) answer -32003 as a network refusal does, and are
// counted under `access`, never `network`: a known number of each kind over HTTP (single calls
// and batches, item by item) and WebSocket (an open connection's messages, a refused upgrade).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Analytics } from '../../src/analytics/store.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';
import { connect, tryUpgrade, wsAddress } from '../support/ws.ts';

const backends = await storageBackends();
const ADMIN_TOKEN = 'refusal-reasons-admin-token-0123456789';
const ALLOWED = '0x1111111111111111111111111111111111111111';
const OTHER = '0x2222222222222222222222222222222222222222';
const EVIL = 'https://evil.example.net';
const call = (method: string, id: number, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });
const ethCall = (to: string, id: number) => call('eth_call', id, [{ to, data: '0x' }, 'latest']);
type Refused = Analytics['series'][number]['refused'];

for (const backend of backends) {
  describe(`analytics refusal reasons on ${backend.name} (C46a)`, { skip: backend.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ backend: backend.name, devnet: true, devnetNetworks: ['ethereum'], listen: true, env: { ADMIN_TOKEN } });
    });
    after(async () => {
      await t?.close();
    });

    const post = async (key: string, payload: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}/v1/ethereum/${key}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(payload) });
      return { status: res.status, body: (await res.json()) as unknown };
    };
    const codes = (body: unknown) => (Array.isArray(body) ? body : [body]).map((a: { error?: { code: number } }) => a.error?.code ?? 0);
    const refusedOf = async (auth: { authorization: string }, keyId: string): Promise<{ refused: Refused; requests: number }> => {
      await t.app.parts.usage.flush();
      const res = await t.app.inject({ method: 'GET', url: `/api/v1/usage/analytics?apiKeyId=${keyId}`, headers: auth });
      assert.equal(res.statusCode, 200, res.body);
      const day = (res.json().data as Analytics).series.at(-1)!;
      return { refused: day.refused, requests: day.requests };
    };
    const none: Refused = { rate: 0, quota: 0, key: 0, network: 0, method: 0, access: 0 };
    const proKey = async (payload: object) => {
      const user = await registerUser(t.app);
      await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
      const k = await createKey(t.app, { name: 'limited', networks: ['ethereum'] }, user);
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${k.id}`, headers: user.auth, payload });
      assert.equal(res.statusCode, 200, res.body);
      return k;
    };

    test('origin refusals: 2 single calls, a batch of 3 and a refused upgrade are 6 under access, none under network', async () => {
      const k = await proKey({ allowedOrigins: ['https://app.example.com'] });
      const origin = { origin: EVIL };
      for (let i = 0; i < 2; i++) assert.deepEqual(codes((await post(k.key, call('eth_chainId', i), origin)).body), [-32003]);
      const batch = await post(k.key, [call('eth_chainId', 1), call('eth_chainId', 2), call('eth_blockNumber', 3)], origin);
      assert.equal(batch.status, 403);
      const upgrade = await tryUpgrade(wsAddress(t, `/ws/ethereum?apiKey=${k.key}`), origin);
      assert.equal(upgrade.status, 403);
      // One allowed call, so that requests and refusals are told apart.
      assert.deepEqual(codes((await post(k.key, call('eth_chainId', 9), { origin: 'https://app.example.com' })).body), [0]);
      const day = await refusedOf(k.user.auth, k.id);
      assert.deepEqual(day.refused, { ...none, access: 6 });
      assert.equal(day.requests, 1);
    });

    test('IP refusals count under access', async () => {
      const k = await proKey({ allowedIps: ['192.0.2.1'] });
      for (let i = 0; i < 3; i++) assert.deepEqual(codes((await post(k.key, call('eth_chainId', i))).body), [-32003]);
      assert.deepEqual((await refusedOf(k.user.auth, k.id)).refused, { ...none, access: 3 });
    });

    test('JWT refusals count under access', async () => {
      const { publicKey } = await import('node:crypto').then((c) => c.generateKeyPairSync('ed25519'));
      const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const k = await proKey({ requireJwt: true, jwtPublicKeys: [{ name: 'dapp', publicKey: pem }] });
      assert.deepEqual(codes((await post(k.key, call('eth_chainId', 1))).body), [-32003]);
      assert.deepEqual(codes((await post(k.key, call('eth_chainId', 2), { authorization: 'Bearer not.a.jwt' })).body), [-32003]);
      assert.deepEqual((await refusedOf(k.user.auth, k.id)).refused, { ...none, access: 2 });
    });

    test('method-list refusals: single, batch items and WebSocket messages are under access, an unsupported method under method', async () => {
      const k = await proKey({ allowedMethods: ['eth_chainId', 'eth_blockNumber'] });
      assert.deepEqual(codes((await post(k.key, call('eth_gasPrice', 1))).body), [-32003]);
      const batch = await post(k.key, [call('eth_chainId', 1), call('eth_gasPrice', 2), call('eth_getBalance', 3, [ALLOWED, 'latest']), call('eth_blockNumber', 4)]);
      assert.deepEqual(codes(batch.body), [0, -32003, -32003, 0]);
      // Not a method the gateway supports at all: the method policy's refusal (C46a `method`), first.
      assert.deepEqual(codes((await post(k.key, call('foo_bar', 5))).body), [-32601]);
      const ws = await connect(wsAddress(t, `/ws/ethereum?apiKey=${k.key}`));
      try {
        assert.equal((await ws.call('eth_gasPrice')).error?.code, -32003);
        assert.equal((await ws.call('eth_gasPrice')).error?.code, -32003);
        assert.equal((await ws.call('eth_chainId')).error, undefined);
      } finally {
        await ws.close();
      }
      const day = await refusedOf(k.user.auth, k.id);
      assert.deepEqual(day.refused, { ...none, access: 5, method: 1 });
      assert.equal(day.requests, 3);
    });

    test('contract-list refusals count under access, item by item in a batch', async () => {
      const k = await proKey({ allowedContracts: [ALLOWED] });
      assert.deepEqual(codes((await post(k.key, ethCall(OTHER, 1))).body), [-32003]);
      const batch = await post(k.key, [ethCall(ALLOWED, 1), ethCall(OTHER, 2), ethCall(OTHER, 3)]);
      assert.deepEqual(codes(batch.body).slice(1), [-32003, -32003]);
      const day = await refusedOf(k.user.auth, k.id);
      assert.deepEqual(day.refused, { ...none, access: 3 });
      assert.equal(day.requests, 1);
    });

    test('a network the key does not cover is still `network`, and the metrics tell the two apart', async () => {
      const k = await proKey({ allowedOrigins: ['https://app.example.com'] });
      const res = await fetch(`${t.url}/v1/native-testnet/${k.key}`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'https://app.example.com' }, body: JSON.stringify(call('eth_chainId', 1)) });
      assert.equal(res.status, 403);
      await post(k.key, call('eth_chainId', 2), { origin: EVIL });
      assert.deepEqual((await refusedOf(k.user.auth, k.id)).refused, { ...none, network: 1, access: 1 });
      const metrics = await (await fetch(`${t.url}/metrics`)).text();
      assert.match(metrics, /junction_rpc_requests_total\{[^}]*network="ethereum"[^}]*outcome="refused_access"[^}]*\} [1-9]/);
    });
  });
}
