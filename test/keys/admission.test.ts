// One admission decision (src/keys/admission.ts) for the HTTP pipeline, the
// WebSocket upgrade and the WebSocket's recheck after a key change. The same cases go through
// the three paths and get the same JSON-RPC code from each (C16, C20, the key's allowlists).
// A refusal happens before any node is asked, so no upstream is needed here.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { connect, tryUpgrade, wsAddress } from '../support/ws.ts';

const ADMIN = 'admin-token-for-admission-tests';
const OTHER_ORIGIN = 'https://elsewhere.example.net';
/** A well-formed JWT signed by a key the API key does not list. */
const FOREIGN_JWT = await new SignJWT({}).setProtectedHeader({ alg: 'EdDSA' }).setExpirationTime('10m').sign(generateKeyPairSync('ed25519').privateKey);

type User = Awaited<ReturnType<typeof registerUser>>;

/** A key that is fine on `network` until `change()` puts it in the state the case is about. */
interface Prepared {
  key: string;
  network: string;
  /** Headers the client sends on every path (Origin, Authorization). */
  headers?: Record<string, string>;
  change(): Promise<void>;
}

let t: TestApp;

before(async () => {
  t = await startTestApp({ listen: true, env: { ADMIN_TOKEN: ADMIN } });
});

after(async () => {
  await t?.close();
});

const rest = async (method: 'PATCH' | 'POST' | 'DELETE', url: string, headers: Record<string, string>, payload?: object) => {
  const res = await t.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  assert.equal(res.statusCode, 200, `${method} ${url}: ${res.body}`);
};
const patchKey = (u: User, id: string, payload: object) => rest('PATCH', `/api/v1/api-keys/${id}`, u.auth, payload);
const setTier = (u: User, tier: string) => rest('PATCH', `/api/v1/admin/users/${u.id}`, { 'x-admin-token': ADMIN }, { tier });

/** A key on the two native networks (a free account's default), changed by a key PATCH. */
const patched = async (payload: object, headers: Record<string, string> = {}): Promise<Prepared> => {
  const k = await createKey(t.app);
  return { key: k.key, network: 'native-mainnet', headers, change: () => patchKey(k.user, k.id, payload) };
};

const cases: Array<{ name: string; code: number; prepare(): Promise<Prepared> }> = [
  {
    name: 'an unknown (deleted) key',
    code: -32001,
    async prepare() {
      const k = await createKey(t.app);
      return { key: k.key, network: 'native-mainnet', change: () => rest('DELETE', `/api/v1/api-keys/${k.id}`, k.user.auth) };
    },
  },
  {
    name: 'a revoked key',
    code: -32002,
    async prepare() {
      const k = await createKey(t.app);
      return { key: k.key, network: 'native-mainnet', change: () => rest('POST', `/api/v1/api-keys/${k.id}/revoke`, k.user.auth) };
    },
  },
  { name: 'an inactive key', code: -32001, prepare: () => patched({ status: 'inactive' }) },
  { name: 'an expired key', code: -32002, prepare: () => patched({ expiresAt: new Date(Date.now() - 60_000).toISOString() }) },
  { name: 'a network the key does not cover', code: -32003, prepare: () => patched({ networks: ['native-testnet'] }) },
  { name: 'an origin the key does not allow', code: -32003, prepare: () => patched({ allowedOrigins: ['https://app.example.com'] }, { origin: OTHER_ORIGIN }) },
  {
    name: 'a JWT the key does not accept',
    code: -32003,
    prepare: () =>
      patched(
        { requireJwt: true, jwtPublicKeys: [{ name: 'web', publicKey: generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString() }] },
        { authorization: `Bearer ${FOREIGN_JWT}` },
      ),
  },
  { name: 'a client address the key does not allow', code: -32003, prepare: () => patched({ allowedIps: ['203.0.113.0/24', '10.0.0.1'] }) },
  {
    name: 'a network lost to a plan downgrade',
    code: -32003,
    async prepare() {
      const u = await registerUser(t.app);
      await setTier(u, 'pro');
      // Seven non-default networks named in the configured order: a free plan keeps 5 (C16), the
      // last one named is the one called, and goes.
      const named = t.config.networks.filter((n) => n.native !== true).slice(0, 7).map((n) => n.slug);
      assert.equal(named.length, 7);
      const k = await createKey(t.app, { networks: named }, u);
      return { key: k.key, network: named[6] as string, change: () => setTier(u, 'free') };
    },
  },
];

const chainIdOf = (slug: string) => {
  const n = t.config.networks.find((x) => x.slug === slug);
  assert.ok(n, slug);
  return n.chainId;
};

/** The key is admitted before the change: the upgrade answers 101. */
const admittedBefore = async (p: Prepared) => {
  const r = await tryUpgrade(wsAddress(t, `/ws/${p.network}?apiKey=${p.key}`), p.headers ?? {});
  r.ws?.close();
  assert.equal(r.status, 101, `admitted before the change: ${r.body}`);
};

describe('one admission decision answers the same code over HTTP, at the WebSocket upgrade and on the WebSocket after a key change', () => {
  for (const c of cases) {
    test(`${c.name}: ${c.code} from POST /rpc/main/evm/{chainId}`, async () => {
      const p = await c.prepare();
      await admittedBefore(p);
      await p.change();
      const res = await fetch(`${t.url}/rpc/main/evm/${chainIdOf(p.network)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': p.key, ...p.headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      });
      const body = (await res.json()) as { error?: { code: number } };
      assert.equal(body.error?.code, c.code, JSON.stringify(body));
      assert.ok(res.status >= 400, `refused with an HTTP error status, not ${res.status}`);
    });

    test(`${c.name}: ${c.code} from the WebSocket upgrade, which is refused`, async () => {
      const p = await c.prepare();
      await admittedBefore(p);
      await p.change();
      const r = await tryUpgrade(wsAddress(t, `/ws/${p.network}?apiKey=${p.key}`), p.headers ?? {});
      r.ws?.close();
      assert.ok(r.status >= 400, `upgrade refused, not ${r.status}`);
      const body = JSON.parse(r.body) as { jsonrpc: string; error: { code: number } };
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.error.code, c.code, r.body);
    });

    test(`${c.name}: ${c.code} on an open WebSocket once the key changes (id null), then close 1008`, async () => {
      const p = await c.prepare();
      const client = await connect(wsAddress(t, `/ws/${p.network}?apiKey=${p.key}`), { headers: p.headers ?? {} });
      await p.change();
      const frame = await client.next((m) => m.error !== undefined);
      assert.equal(frame.id, null);
      assert.equal(frame.error?.code, c.code, JSON.stringify(frame));
      assert.equal((await client.closed).code, 1008);
    });
  }
});
