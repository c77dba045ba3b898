import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';

// A key's allowlists and JWT option through the REST API (create, PATCH, the
// key list), validated with 400 VALIDATION_ERROR naming the field (C7), on both storage kinds.

const backends = await storageBackends();
const ADDRESS = '0x1111111111111111111111111111111111111111';
const pem = (type: 'ec' | 'ed25519') =>
  (type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : generateKeyPairSync('ed25519')).publicKey.export({ type: 'spki', format: 'pem' }).toString();

for (const backend of backends) {
  describe(`key allowlists through the REST API, ${backend.name}`, { skip: backend.skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({ backend: backend.name });
    });
    after(() => t?.close());

    const patch = (auth: { authorization: string }, id: string, payload: unknown) =>
      t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: auth, payload: payload as object });
    const listed = async (auth: { authorization: string }, id: string) => {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth });
      assert.equal(res.statusCode, 200);
      return (res.json().data as Array<Record<string, unknown>>).find((k) => k.id === id) as Record<string, unknown>;
    };

    test('a new key has no allowlists: empty lists, requireOrigin true, requireJwt false', async () => {
      const k = await createKey(t.app);
      const view = await listed(k.user.auth, k.id);
      assert.deepEqual(
        { o: view.allowedOrigins, ro: view.requireOrigin, i: view.allowedIps, m: view.allowedMethods, c: view.allowedContracts, j: view.requireJwt, jk: view.jwtPublicKeys },
        { o: [], ro: true, i: [], m: [], c: [], j: false, jk: [] },
      );
    });

    test('create and PATCH set the lists; they are stored normalised and listed', async () => {
      const u = await createKey(t.app);
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/api-keys',
        headers: u.user.auth,
        payload: { name: 'locked', allowedOrigins: ['HTTPS://App.Example.com:443/'], allowedMethods: ['eth_call'] },
      });
      assert.equal(res.statusCode, 200, res.body);
      const created = res.json().data;
      assert.deepEqual(created.allowedOrigins, ['https://app.example.com']);
      assert.deepEqual(created.allowedMethods, ['eth_call']);

      const key = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
      const p = await patch(u.user.auth, created.id, {
        allowedOrigins: ['https://*.example.org', 'http://localhost:3000', 'http://[0:0:0:0:0:0:0:1]:8080', 'https://[2001:DB8::0001]'],
        requireOrigin: false,
        allowedIps: ['203.0.113.7', '10.0.0.0/8', '2001:DB8::/32'],
        allowedContracts: [`xdc${'AB'.repeat(20)}`, ADDRESS],
        requireJwt: true,
        jwtPublicKeys: [{ name: 'web', publicKey: key.export({ type: 'spki', format: 'pem' }).toString() }],
      });
      assert.equal(p.statusCode, 200, p.body);
      const view = await listed(u.user.auth, created.id);
      // An IPv6 host as browsers write it in Origin: compressed, lower case.
      assert.deepEqual(view.allowedOrigins, ['https://*.example.org', 'http://localhost:3000', 'http://[::1]:8080', 'https://[2001:db8::1]']);
      assert.equal(view.requireOrigin, false);
      assert.deepEqual(view.allowedIps, ['203.0.113.7', '10.0.0.0/8', '2001:db8::/32']);
      assert.deepEqual(view.allowedMethods, ['eth_call'], 'a list not named in the PATCH is kept');
      assert.deepEqual(view.allowedContracts, [`0x${'ab'.repeat(20)}`, ADDRESS]);
      assert.equal(view.requireJwt, true);
      const jwtKeys = view.jwtPublicKeys as Array<Record<string, string>>;
      assert.equal(jwtKeys.length, 1);
      assert.equal(jwtKeys[0]?.alg, 'ES256');
      assert.match(jwtKeys[0]?.id ?? '', /^[0-9a-f]{16}$/);
      assert.match(jwtKeys[0]?.publicKey ?? '', /BEGIN PUBLIC KEY/);

      // Empty lists lift the restrictions.
      const cleared = await patch(u.user.auth, created.id, { allowedOrigins: [], allowedMethods: [], allowedIps: [], allowedContracts: [], requireJwt: false });
      assert.equal(cleared.statusCode, 200, cleared.body);
      const after = await listed(u.user.auth, created.id);
      assert.deepEqual([after.allowedOrigins, after.allowedMethods, after.allowedIps, after.allowedContracts, after.requireJwt], [[], [], [], [], false]);
    });

    test('bad values are 400 VALIDATION_ERROR naming the field, and change nothing', async () => {
      const k = await createKey(t.app);
      assert.equal((await patch(k.user.auth, k.id, { allowedMethods: ['eth_chainId'] })).statusCode, 200);
      const before = await listed(k.user.auth, k.id);
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ allowedIps: ['10.0.0.0/33'] }, 'body.allowedIps.0'],
        [{ allowedIps: ['10.0.0.1', 'not-an-ip'] }, 'body.allowedIps.1'],
        [{ allowedIps: ['2001:db8::/129'] }, 'body.allowedIps.0'],
        [{ allowedOrigins: ['app.example.com'] }, 'body.allowedOrigins.0'],
        [{ allowedOrigins: ['https://app.example.com/path'] }, 'body.allowedOrigins.0'],
        [{ allowedOrigins: ['https://*'] }, 'body.allowedOrigins.0'],
        [{ allowedOrigins: ['https://a\u0000.example.com'] }, 'body.allowedOrigins.0'],
        [{ allowedOrigins: ['https://[:::::]'] }, 'body.allowedOrigins.0'],
        [{ allowedOrigins: ['https://example.com', 'http://[1.2.3.4]'] }, 'body.allowedOrigins.1'],
        [{ allowedIps: ['fe80::1%eth0'] }, 'body.allowedIps.0'],
        [{ allowedIps: ['fe80::1%1/64'] }, 'body.allowedIps.0'],
        [{ allowedOrigins: Array.from({ length: 101 }, (_, i) => `https://a${i}.example.com`) }, 'allowedOrigins'],
        [{ allowedMethods: ['eth_*'] }, 'body.allowedMethods.0'],
        [{ allowedMethods: ['debug_traceTransaction'] }, 'body.allowedMethods.0'],
        [{ allowedContracts: ['0x1234'] }, 'body.allowedContracts.0'],
        [{ requireJwt: true }, 'body.requireJwt'],
        [{ jwtPublicKeys: [{ name: 'x', publicKey: 'not a key' }] }, 'body.jwtPublicKeys.0.publicKey'],
        [{ jwtPublicKeys: [{ name: 'p256k', publicKey: generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey.export({ type: 'spki', format: 'pem' }).toString() }] }, 'body.jwtPublicKeys.0.publicKey'],
        [{ jwtPublicKeys: [{ name: 'private', publicKey: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }] }, 'body.jwtPublicKeys.0.publicKey'],
        [{ jwtPublicKeys: Array.from({ length: 6 }, () => ({ name: 'k', publicKey: pem('ed25519') })) }, 'jwtPublicKeys'],
        [{ allowedIps: '10.0.0.1' }, 'allowedIps'],
        [{ requireOrigin: 'yes' }, 'requireOrigin'],
      ];
      for (const [payload, field] of cases) {
        const res = await patch(k.user.auth, k.id, { ...payload, name: 'renamed' });
        assert.equal(res.statusCode, 400, `${JSON.stringify(payload).slice(0, 80)}: ${res.body}`);
        const err = res.json().error;
        assert.equal(err.code, 'VALIDATION_ERROR');
        assert.ok(JSON.stringify(err).includes(field), `${field} named in ${JSON.stringify(err)}`);
      }
      assert.deepEqual(await listed(k.user.auth, k.id), before, 'nothing changed, the name neither');
    });

    test('the same public key registered twice is kept once; a JWK is accepted and listed as PEM', async () => {
      const k = await createKey(t.app);
      const pair = generateKeyPairSync('ed25519');
      const p = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const res = await patch(k.user.auth, k.id, {
        jwtPublicKeys: [
          { name: 'a', publicKey: p },
          { name: 'b', publicKey: pair.publicKey.export({ format: 'jwk' }) },
          { name: 'c', publicKey: pem('ec') },
        ],
      });
      assert.equal(res.statusCode, 200, res.body);
      const keys = res.json().data.jwtPublicKeys as Array<{ alg: string; publicKey: string }>;
      assert.deepEqual(keys.map((x) => x.alg), ['EdDSA', 'ES256']);
      assert.equal(keys[0]?.publicKey, p);
    });
  });
}
