import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { createPublicClient, http } from 'viem';
import WebSocket from 'ws';
import { createKey, type registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { storageBackends } from '../support/services.ts';

// A key's allowlists (origins, client IPs, methods, contracts) and its JWT
// option, on the RPC addresses and the WebSocket upgrade. A refusal is -32003 with HTTP 403 and
// data.reason naming the list (C22), made before metering: counted nowhere (C10, C27).

const backends = await storageBackends();
type User = Awaited<ReturnType<typeof registerUser>>;
interface Answer {
  id: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: { reason?: string } };
}
interface Served {
  status: number;
  json: Answer & Answer[];
  headers: Headers;
}

const ALLOWED = '0x1111111111111111111111111111111111111111';
const OTHER = '0x2222222222222222222222222222222222222222';
const call = (method = 'eth_chainId', params: unknown[] = [], id: unknown = 1) => ({ jsonrpc: '2.0', id, method, params });

for (const backend of backends) {
  describe(`key allowlists on the RPC path, ${backend.name}`, { skip: backend.skip }, () => {
    let t: TestApp;
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode();
      // Loopback is a trusted proxy here, so a test can be any client address through X-Forwarded-For.
      t = await startTestApp({
        backend: backend.name,
        listen: true,
        env: { UPSTREAM_NATIVE_MAINNET: fake.url, UPSTREAM_NATIVE_TESTNET: fake.url, TRUSTED_PROXIES: 'loopback' },
      });
    });
    after(async () => {
      await t?.close();
      await fake?.close();
    });

    async function rpc(key: string, body: unknown, headers: Record<string, string> = {}): Promise<Served> {
      const res = await fetch(`${t.url}/v1/native-mainnet`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, 'x-forwarded-for': '198.51.100.7', ...headers },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
    }
    const patch = async (user: User, id: string, payload: Record<string, unknown>) => {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: user.auth, payload });
      assert.equal(res.statusCode, 200, res.body);
      return res.json().data as Record<string, unknown>;
    };
    function served(res: Served, what: string): void {
      assert.equal(res.status, 200, `${what}: ${JSON.stringify(res.json)}`);
      assert.ok(res.json.result !== undefined, `${what}: ${JSON.stringify(res.json)}`);
    }
    function refused(res: Served, reason: string, what: string): void {
      assert.equal(res.status, 403, `${what}: ${JSON.stringify(res.json)}`);
      assert.equal(res.json.error?.code, -32003, what);
      assert.equal(res.json.error?.data?.reason, reason, what);
    }
    /** A key used once, so its lookup is in the cache before the PATCH under test (C20: in force at once). */
    async function usedKey() {
      const k = await createKey(t.app);
      served(await rpc(k.key, call()), 'first use');
      return k;
    }

    test('allowedOrigins: a listed origin and a subdomain of a wildcard pass; another origin and a missing one are refused', async () => {
      const k = await usedKey();
      await patch(k.user, k.id, { allowedOrigins: ['https://app.example.com', 'https://*.example.org'] });
      served(await rpc(k.key, call(), { origin: 'https://app.example.com' }), 'exact');
      served(await rpc(k.key, call(), { origin: 'https://a.b.example.org' }), 'wildcard subdomain');
      refused(await rpc(k.key, call(), { origin: 'https://example.org' }), 'origin', 'wildcard does not cover the domain itself');
      refused(await rpc(k.key, call(), { origin: 'https://evil.example' }), 'origin', 'other origin');
      refused(await rpc(k.key, call(), { origin: 'http://app.example.com' }), 'origin', 'other scheme');
      refused(await rpc(k.key, call()), 'origin', 'no Origin (requireOrigin defaults to true)');
      await patch(k.user, k.id, { requireOrigin: false });
      served(await rpc(k.key, call()), 'no Origin with requireOrigin false');
      refused(await rpc(k.key, call(), { origin: 'https://evil.example' }), 'origin', 'other origin still');
    });

    test('allowedOrigins with viem: a dapp at an allowed origin reads, one elsewhere gets the 403', async () => {
      const k = await createKey(t.app);
      await patch(k.user, k.id, { allowedOrigins: ['https://dapp.example.com'] });
      const client = (origin: string) =>
        createPublicClient({ transport: http(`${t.url}/v1/native-mainnet/${k.key}`, { retryCount: 0, fetchOptions: { headers: { origin } } }) });
      assert.equal(await client('https://dapp.example.com').getBlockNumber({ cacheTime: 0 }), 100n);
      // viem reads -32003 by EIP-1474 as a rejected transaction; the status and message are ours.
      await assert.rejects(client('https://phish.example.com').getBlockNumber({ cacheTime: 0 }), (err: Error) => {
        assert.match(err.message, /Status: 403/);
        assert.match(err.message, /Origin not allowed for this API key/);
        return true;
      });
    });

    test('allowedIps: an address and a CIDR (v4 and v6) pass, other clients are refused; the client IP follows the trusted proxy rule', async () => {
      const k = await usedKey();
      await patch(k.user, k.id, { allowedIps: ['203.0.113.9', '10.20.0.0/16', '2001:db8::/32'] });
      served(await rpc(k.key, call(), { 'x-forwarded-for': '203.0.113.9' }), 'exact address');
      served(await rpc(k.key, call(), { 'x-forwarded-for': '10.20.255.1' }), 'in the v4 range');
      served(await rpc(k.key, call(), { 'x-forwarded-for': '2001:db8:1::5' }), 'in the v6 range');
      refused(await rpc(k.key, call(), { 'x-forwarded-for': '10.21.0.1' }), 'ip', 'outside the range');
      refused(await rpc(k.key, call(), { 'x-forwarded-for': '198.51.100.7' }), 'ip', 'another address');
      // The nearest untrusted address counts, not one a client wrote further left.
      refused(await rpc(k.key, call(), { 'x-forwarded-for': '203.0.113.9, 198.51.100.7' }), 'ip', 'spoofed left entry');
    });

    test('allowedMethods: exact names only; a batch is answered item by item', async () => {
      const k = await usedKey();
      await patch(k.user, k.id, { allowedMethods: ['eth_chainId', 'eth_blockNumber'] });
      served(await rpc(k.key, call('eth_chainId')), 'listed');
      const before = fake.callCount('eth_gasPrice');
      const res = await rpc(k.key, call('eth_gasPrice'));
      refused(res, 'method', 'not listed');
      assert.match(res.json.error?.message ?? '', /eth_gasPrice/);
      const batch = await rpc(k.key, [call('eth_chainId', [], 'a'), call('eth_gasPrice', [], 'b'), call('eth_blockNumber', [], 'c')]);
      assert.equal(batch.status, 200);
      assert.deepEqual(
        batch.json.map((a) => [a.id, a.error?.code ?? 'result', a.error?.data?.reason]),
        [
          ['a', 'result', undefined],
          ['b', -32003, 'method'],
          ['c', 'result', undefined],
        ],
      );
      assert.equal(fake.callCount('eth_gasPrice'), before, 'a refused method never reaches the node');
    });

    test('allowedContracts: eth_call, eth_estimateGas and eth_getLogs targets; xdc and any case accepted; no target is refused', async () => {
      const k = await usedKey();
      const data = await patch(k.user, k.id, { allowedContracts: [`xdc${ALLOWED.slice(2)}`] });
      assert.deepEqual(data.allowedContracts, [ALLOWED]);
      const upper = `0x${ALLOWED.slice(2).toUpperCase()}`;
      served(await rpc(k.key, call('eth_call', [{ to: upper, data: '0x' }, 'latest'])), 'eth_call to an allowed contract');
      served(await rpc(k.key, call('eth_estimateGas', [{ to: ALLOWED }])), 'eth_estimateGas');
      served(await rpc(k.key, call('eth_getLogs', [{ address: [ALLOWED], fromBlock: '0x1', toBlock: '0x1' }])), 'eth_getLogs with a list');
      refused(await rpc(k.key, call('eth_call', [{ to: OTHER, data: '0x' }, 'latest'])), 'contract', 'eth_call elsewhere');
      refused(await rpc(k.key, call('eth_estimateGas', [{ data: '0x60' }])), 'contract', 'no target (a deployment)');
      refused(await rpc(k.key, call('eth_getLogs', [{ address: [ALLOWED, OTHER], fromBlock: '0x1', toBlock: '0x1' }])), 'contract', 'one address not allowed');
      refused(await rpc(k.key, call('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x1' }])), 'contract', 'logs of every contract');
      refused(await rpc(k.key, call('eth_newFilter', [{ address: OTHER }])), 'contract', 'eth_newFilter elsewhere');
      served(await rpc(k.key, call('eth_getBalance', [OTHER, 'latest'])), 'methods without a contract target are not limited');
    });

    test('a refusal is counted nowhere: no usage recorded, no rate-limit place taken, nothing sent to the node', async () => {
      const k = await usedKey();
      await patch(k.user, k.id, { allowedMethods: ['eth_chainId'] });
      const usage = t.app.parts.usage;
      const stats = async () => {
        await usage.flush();
        const res = await t.app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: k.user.auth });
        return res.json().data.totalRequests as number;
      };
      const first = await rpc(k.key, call('eth_chainId'));
      const remaining = Number(first.headers.get('x-ratelimit-remaining'));
      const total = await stats();
      // The refused method's own count: background reads of the app (probes, followers) may reach the node meanwhile.
      const nodeCalls = fake.callCount('eth_gasPrice');
      for (let i = 0; i < 5; i++) refused(await rpc(k.key, call('eth_gasPrice')), 'method', `refusal ${i}`);
      const last = await rpc(k.key, [call('eth_gasPrice', [], 1), call('eth_gasPrice', [], 2)]);
      assert.equal(last.status, 200);
      assert.equal(Number(last.headers.get('x-ratelimit-remaining')), remaining, 'the refusals took no place in the per-minute window');
      assert.equal(await stats(), total, 'usage unchanged');
      assert.equal(fake.callCount('eth_gasPrice'), nodeCalls, 'nothing reached the node');
    });

    test('a PATCH is in force at once, and clearing a list lifts the restriction', async () => {
      const k = await usedKey();
      await patch(k.user, k.id, { allowedIps: ['192.0.2.1'] });
      refused(await rpc(k.key, call()), 'ip', 'right after the PATCH');
      await patch(k.user, k.id, { allowedIps: [] });
      served(await rpc(k.key, call()), 'list cleared');
    });

    test('a bad Origin is refused at the WebSocket upgrade with 403 and the reason; an allowed one connects', async () => {
      const k = await createKey(t.app);
      await patch(k.user, k.id, { allowedOrigins: ['https://app.example.com'] });
      const wsUrl = `${t.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${k.key}`;
      const refusedUpgrade = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const ws = new WebSocket(wsUrl, { origin: 'https://evil.example' });
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        ws.on('open', () => reject(new Error('connected with a bad Origin')));
        ws.on('error', () => {});
      });
      assert.equal(refusedUpgrade.status, 403);
      const err = JSON.parse(refusedUpgrade.body).error;
      assert.equal(err.code, -32003);
      assert.equal(err.data.reason, 'origin');

      const ws = new WebSocket(wsUrl, { origin: 'https://app.example.com' });
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      const answer = new Promise<Answer>((resolve) => ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString()) as Answer)));
      ws.send(JSON.stringify(call('eth_blockNumber', [], 7)));
      assert.equal((await answer).result, '0x64');
      // The owner narrows the list: the open connection is refused now too, and closed (C20).
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      await patch(k.user, k.id, { allowedOrigins: ['https://other.example.com'] });
      assert.equal(await closed, 1008);
    });

    test('a subscription the contract list refuses takes no subscription slot', async () => {
      const k = await createKey(t.app);
      await patch(k.user, k.id, { allowedContracts: [ALLOWED] });
      const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${k.key}`);
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      const next = () => new Promise<Answer & Answer[]>((resolve) => ws.once('message', (d: Buffer) => resolve(JSON.parse(d.toString()) as Answer & Answer[])));
      // As many as a free connection may hold (ws.plans.free.subscriptionsPerConnection, 20).
      const batch = Array.from({ length: 20 }, (_, i) => call('eth_subscribe', ['logs', { address: OTHER }], i));
      let answer = next();
      ws.send(JSON.stringify(batch));
      const answers = await answer;
      assert.equal(answers.length, 20);
      for (const a of answers) assert.equal(a.error?.data?.reason, 'contract', JSON.stringify(a));
      answer = next();
      ws.send(JSON.stringify(call('eth_subscribe', ['logs', { address: ALLOWED }], 'ok')));
      const last = await answer;
      assert.notEqual(last.error?.code, -32005, `no slot left: ${JSON.stringify(last)}`);
      ws.close();
    });

    describe('JWT option', () => {
      const pair = (type: 'ec' | 'ed25519' | 'rsa') =>
        type === 'ec'
          ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
          : type === 'rsa'
            ? generateKeyPairSync('rsa', { modulusLength: 2048 })
            : generateKeyPairSync('ed25519');
      const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }).toString();
      const sign = (priv: KeyObject, alg: string, claims: { exp?: number; iat?: number; aud?: string; kid?: string } = {}) => {
        const now = Math.floor(Date.now() / 1000);
        const jwt = new SignJWT({ sub: 'dapp-user' }).setProtectedHeader({ alg, ...(claims.kid ? { kid: claims.kid } : {}) }).setIssuedAt(claims.iat ?? now);
        if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
        if (claims.aud !== undefined) jwt.setAudience(claims.aud);
        return jwt.sign(priv);
      };

      test('requireJwt: a valid token passes; missing, expired, wrong key, too long-lived and another audience are refused with reason jwt', async () => {
        const es = pair('ec');
        const ed = pair('ed25519');
        const stranger = pair('ec');
        const k = await usedKey();
        const data = await patch(k.user, k.id, {
          requireJwt: true,
          jwtPublicKeys: [
            { name: 'web', publicKey: pem(es.publicKey) },
            { name: 'edge', publicKey: ed.publicKey.export({ format: 'jwk' }) },
          ],
        });
        const keys = data.jwtPublicKeys as Array<{ id: string; alg: string }>;
        assert.deepEqual(keys.map((x) => x.alg), ['ES256', 'EdDSA']);
        const now = Math.floor(Date.now() / 1000);
        const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });

        refused(await rpc(k.key, call()), 'jwt', 'no token');
        served(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 600 }))), 'ES256, valid');
        served(await rpc(k.key, call(), bearer(await sign(ed.privateKey, 'EdDSA', { exp: now + 600, kid: keys[1]?.id, aud: k.id }))), 'EdDSA with kid and aud = key id');
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { iat: now - 7200, exp: now - 3600 }))), 'jwt', 'expired');
        refused(await rpc(k.key, call(), bearer(await sign(stranger.privateKey, 'ES256', { exp: now + 600 }))), 'jwt', 'signed by an unregistered key');
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', {}))), 'jwt', 'no exp');
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 3 * 86_400 }))), 'jwt', 'lives longer than a day');
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 600, aud: 'another-key' }))), 'jwt', 'another audience');
        refused(await rpc(k.key, call(), bearer('not.a.jwt')), 'jwt', 'garbage');

        // With viem, as a dapp would send it.
        const token = await sign(es.privateKey, 'ES256', { exp: now + 600 });
        const client = createPublicClient({ transport: http(`${t.url}/v1/native-mainnet/${k.key}`, { retryCount: 0, fetchOptions: { headers: bearer(token) } }) });
        assert.equal(await client.getBlockNumber({ cacheTime: 0 }), 100n);

        // RS256 too; switching requireJwt off lets requests without a token through again.
        const rsa = pair('rsa');
        await patch(k.user, k.id, { jwtPublicKeys: [{ name: 'server', publicKey: pem(rsa.publicKey) }] });
        served(await rpc(k.key, call(), bearer(await sign(rsa.privateKey, 'RS256', { exp: now + 600 }))), 'RS256');
        refused(await rpc(k.key, call(), bearer(token)), 'jwt', 'the ES256 key was replaced');
        await patch(k.user, k.id, { requireJwt: false });
        served(await rpc(k.key, call()), 'requireJwt off');
      });

      test('a kid naming no public key of this key is refused, not tried against the others; an iat more than 60 s ahead is refused', async () => {
        const es = pair('ec');
        const k = await usedKey();
        const data = await patch(k.user, k.id, { requireJwt: true, jwtPublicKeys: [{ name: 'web', publicKey: pem(es.publicKey) }] });
        const id = (data.jwtPublicKeys as Array<{ id: string }>)[0]?.id;
        const now = Math.floor(Date.now() / 1000);
        const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });
        served(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 600, kid: id }))), 'kid of the signing key');
        served(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 601 }))), 'no kid: every key of the alg is tried');
        // Signed by the registered key, but naming another: the header is not what the key's owner set up.
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { exp: now + 602, kid: 'a-key-of-someone-else' }))), 'jwt', 'unknown kid');
        // A clock a little ahead passes; a token made to be valid later is refused.
        served(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { iat: now + 20, exp: now + 600 }))), 'iat 20 s ahead');
        refused(await rpc(k.key, call(), bearer(await sign(es.privateKey, 'ES256', { iat: now + 3600, exp: now + 7200 }))), 'jwt', 'iat an hour ahead');
      });

      test('on a WebSocket the token comes as Authorization or ?jwt= at the upgrade', async () => {
        const es = pair('ec');
        const k = await createKey(t.app);
        await patch(k.user, k.id, { requireJwt: true, jwtPublicKeys: [{ name: 'web', publicKey: pem(es.publicKey) }] });
        const base = `${t.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${k.key}`;
        const status = (url: string, headers: Record<string, string> = {}) =>
          new Promise<number>((resolve) => {
            const ws = new WebSocket(url, { headers });
            ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
            ws.on('open', () => {
              ws.close();
              resolve(101);
            });
            ws.on('error', () => {});
          });
        const token = await sign(es.privateKey, 'ES256', { exp: Math.floor(Date.now() / 1000) + 600 });
        assert.equal(await status(base), 403, 'no token');
        assert.equal(await status(`${base}&jwt=${token}`), 101, 'query parameter');
        assert.equal(await status(base, { authorization: `Bearer ${token}` }), 101, 'header');
      });
    });
  });
}
