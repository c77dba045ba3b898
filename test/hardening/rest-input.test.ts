import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import type { InjectOptions } from 'fastify';
import { users } from '../../src/auth/schema.ts';
import { apiKeys } from '../../src/keys/schema.ts';
import { createKey, registerUser, startTestApp, type TestApp, uniqueEmail } from '../support/app.ts';

const ADMIN_TOKEN = 'admin-token-for-hardening-tests';
const PASSWORD = 'Quartz-Meadow-Lantern-42';
const ADDRESS = '0x00000000000000000000000000000000000000aa';


/** C7: 400 VALIDATION_ERROR whose details name `field`. */
function assertFieldRefused(res: { statusCode: number; json(): unknown; body: string }, field: string, what: string): void {
  assert.equal(res.statusCode, 400, `${what}: ${res.body}`);
  const body = res.json() as { success: boolean; error: { code: string; details: Array<{ field: string }> } };
  assert.equal(body.success, false, what);
  assert.equal(body.error.code, 'VALIDATION_ERROR', what);
  assert.ok(Array.isArray(body.error.details), `${what}: details listed`);
  assert.ok(
    body.error.details.some((d: { field: string }) => d.field === field),
    `${what}: details name ${field}: ${JSON.stringify(body.error.details)}`,
  );
}

describe('REST input PostgreSQL text cannot hold (NUL) is refused, never a failed query (C7)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { ADMIN_TOKEN, LOG_LEVEL: 'trace' } });
  });
  after(() => t.close());

  test('a NUL byte in any body field, path id or query parameter is 400 naming the field, and no secret reaches the logs', async () => {
    const u = await registerUser(t.app, { password: PASSWORD });
    const { key, id } = await createKey(t.app, { name: 'kept' }, u);
    const admin = { 'x-admin-token': ADMIN_TOKEN };
    const cases: Array<[string, InjectOptions, string]> = [
      ['register name', { method: 'POST', url: '/api/v1/auth/register', payload: { email: uniqueEmail(), password: PASSWORD, name: 'a\u0000b' } }, 'body.name'],
      ['register password', { method: 'POST', url: '/api/v1/auth/register', payload: { email: uniqueEmail(), password: `${PASSWORD}\u0000`, name: 'N' } }, 'body.password'],
      ['register e-mail', { method: 'POST', url: '/api/v1/auth/register', payload: { email: `a\u0000${uniqueEmail()}`, password: PASSWORD, name: 'N' } }, 'body.email'],
      ['login password', { method: 'POST', url: '/api/v1/auth/login', payload: { email: u.email, password: `\u0000${PASSWORD}` } }, 'body.password'],
      ['refresh token', { method: 'POST', url: '/api/v1/auth/refresh', payload: { refreshToken: `${u.refreshToken}\u0000` } }, 'body.refreshToken'],
      ['key name on create', { method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'a\u0000b' } }, 'body.name'],
      ['key network on create', { method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'n', networks: ['native-mainnet', 'native\u0000'] } }, 'body.networks.1'],
      ['key name on PATCH', { method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: u.auth, payload: { name: '\u0000' } }, 'body.name'],
      ['key id on PATCH', { method: 'PATCH', url: `/api/v1/api-keys/${id}%00`, headers: u.auth, payload: { name: 'x' } }, 'params.id'],
      ['key id on revoke', { method: 'POST', url: `/api/v1/api-keys/${id}%00/revoke`, headers: u.auth }, 'params.id'],
      ['key id on rotate', { method: 'POST', url: `/api/v1/api-keys/${id}%00/rotate`, headers: u.auth }, 'params.id'],
      ['key id on DELETE', { method: 'DELETE', url: `/api/v1/api-keys/a%00${id}`, headers: u.auth }, 'params.id'],
      ['usage apiKeyId', { method: 'GET', url: `/api/v1/usage/stats?apiKeyId=${id}%00`, headers: u.auth }, 'querystring.apiKeyId'],
      ['network slug', { method: 'GET', url: '/api/v1/networks/native-mainnet%00' }, 'params.slug'],
      ['faucet network', { method: 'POST', url: '/api/v1/faucet/request', headers: u.auth, payload: { network: 'native-testnet\u0000', address: ADDRESS } }, 'body.network'],
      ['admin e-mail query', { method: 'GET', url: `/api/v1/admin/users?email=${encodeURIComponent(u.email)}%00`, headers: admin }, 'querystring.email'],
      ['admin account id', { method: 'PATCH', url: `/api/v1/admin/users/${u.id}%00`, headers: admin, payload: { tier: 'pro' } }, 'params.id'],
      // An unpaired surrogate cannot be written as UTF-8 either: it would be stored altered.
      ['unpaired surrogate in a key name', { method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'a\ud800b' } }, 'body.name'],
    ];
    for (const [what, req, field] of cases) assertFieldRefused(await t.app.inject(req), field, what);

    // Nothing was changed: the key keeps its name, the account its tier.
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: u.auth });
    assert.deepEqual(list.json().data.map((k: { name: string }) => k.name), ['kept']);
    const [user] = await t.storage.db.select().from(users).where(eq(users.id, u.id));
    const [row] = await t.storage.db.select().from(apiKeys).where(eq(apiKeys.id, id));
    assert.equal(user?.tier, 'free');

    const logs = t.logs.join('');
    for (const [name, secret] of [
      ['password hash', user?.passwordHash],
      ['key hash', row?.keyHash],
      ['key ciphertext', row?.keyCiphertext],
      ['key', key],
      ['password', PASSWORD],
    ] as const) {
      assert.ok(secret && secret.length > 20, `${name} read from storage`);
      assert.ok(!logs.includes(secret), `the ${name} is not in the logs`);
    }
    assert.ok(!t.logs.some((l) => JSON.parse(l).level >= 50), 'no request failed with an error');
  });
});

describe('a failed query is logged as class, code and a short message, never its SQL or parameters', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
    // Real storage refusing every new account and key, as a constraint or a full disk would.
    await t.storage.db.execute(sql`
      create function hardening_refuse() returns trigger language plpgsql as $$
      begin raise exception 'refused by the storage'; end $$`);
    const u = await registerUser(t.app, { password: PASSWORD });
    await t.storage.db.execute(sql`create trigger refuse_users before insert on users for each row execute function hardening_refuse()`);
    await t.storage.db.execute(sql`create trigger refuse_keys before insert on api_keys for each row execute function hardening_refuse()`);
    signedIn = u.auth;
  });
  after(() => t.close());
  let signedIn: { authorization: string };

  test('a refused insert of an account or key answers 500 and the log holds no password hash, key hash, ciphertext or SQL', async () => {
    const reg = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', payload: { email: uniqueEmail(), password: PASSWORD, name: 'N' } });
    assert.equal(reg.statusCode, 500);
    assert.equal(reg.json().error.code, 'INTERNAL_ERROR');
    const key = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: signedIn, payload: { name: 'never stored' } });
    assert.equal(key.statusCode, 500);
    for (const body of [reg.body, key.body]) assert.doesNotMatch(body, /insert|params|scrypt/i, 'the answer says nothing of the query');

    const logs = t.logs.join('\n');
    assert.doesNotMatch(logs, /scrypt\$/, 'no password hash');
    assert.doesNotMatch(logs, /\bv1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\./, 'no key ciphertext');
    assert.doesNotMatch(logs, /[0-9a-f]{64}/, 'no key hash');
    assert.doesNotMatch(logs, /insert into|params:|Failed query/i, 'no SQL text or parameter list');
    const failures = t.logs.map((l) => JSON.parse(l)).filter((l) => l.level >= 50);
    assert.equal(failures.length, 2, 'one error line per failed request');
    for (const line of failures) {
      assert.equal(line.err.type, 'DrizzleQueryError', 'the error class is logged');
      assert.equal(line.err.code, 'P0001', 'the database error code is logged');
      assert.equal(line.err.cause.message, 'refused by the storage', "the database's own short message is logged");
    }
  });
});

describe('dates that pass RFC 3339 but not storage are 400 with details (C7)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a leap second, year 0000, a year storage would give back altered or one an offset moves past 9999 is refused on key create and PATCH, never a 500', async () => {
    const u = await registerUser(t.app, { password: PASSWORD });
    const { id } = await createKey(t.app, {}, u);
    for (const expiresAt of [
      '9999-12-31T23:59:60Z',
      '2030-06-30T23:59:60Z',
      '0000-01-01T00:00:00Z',
      '0001-01-01T00:00:00+01:00',
      // Read back as 1901-1999 (new Date('0050-01-01 00:00:00+00') is 1950).
      '0001-01-01T00:00:00Z',
      '0050-06-01T00:00:00Z',
      '9999-12-31T23:00:00-05:00',
    ]) {
      const created = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'd', expiresAt } });
      assertFieldRefused(created, 'body.expiresAt', `create with ${expiresAt}`);
      const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: u.auth, payload: { expiresAt } });
      assertFieldRefused(patched, 'body.expiresAt', `PATCH with ${expiresAt}`);
    }
    // The ends of the range still work, and come back as given.
    for (const expiresAt of ['1000-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z']) {
      const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${id}`, headers: u.auth, payload: { expiresAt } });
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().data.expiresAt, expiresAt);
    }
  });

  test('usage startDate and endDate outside years 0001-9999 are 400 naming the field', async () => {
    const u = await registerUser(t.app, { password: PASSWORD });
    for (const [query, field] of [
      ['startDate=0000-01-01', 'querystring.startDate'],
      ['endDate=0000-12-31', 'querystring.endDate'],
      ['startDate=0000-02-29&endDate=0001-01-01', 'querystring.startDate'],
    ]) {
      assertFieldRefused(await t.app.inject({ method: 'GET', url: `/api/v1/usage/stats?${query}`, headers: u.auth }), field as string, query as string);
    }
  });
});

describe('bodies and paths the REST parser itself refuses answer in the C7 envelope', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('a body that is not UTF-8 is 400 INVALID_JSON and stores nothing (it would be stored with U+FFFD)', async () => {
    const email = uniqueEmail();
    const name = (bytes: number[]) => Buffer.concat([Buffer.from(`{"email":"${email}","password":"${PASSWORD}","name":"a`), Buffer.from(bytes), Buffer.from('"}')]);
    for (const bytes of [[0xff, 0xfe], [0xc3], [0xed, 0xa0, 0x80] /* an encoded surrogate */, [0xc0, 0xaf] /* overlong '/' */]) {
      for (const type of ['application/json', 'application/json; charset=utf-8']) {
        const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', headers: { 'content-type': type }, payload: name(bytes) });
        assert.equal(res.statusCode, 400, `${bytes.join(',')}: ${res.body}`);
        assert.deepEqual(res.json(), { success: false, error: { code: 'INVALID_JSON', message: 'Request body is not valid UTF-8' } });
      }
    }
    const [row] = await t.storage.db.select({ id: users.id }).from(users).where(eq(users.email, email));
    assert.equal(row, undefined, 'no account made');
    // Real UTF-8 (two, three and four bytes) is accepted and kept exactly.
    const ok = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', headers: { 'content-type': 'application/json' }, payload: name([...Buffer.from('é€😀')]) });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().data.user.name, 'aé€😀');
  });

  test('a __proto__ or constructor.prototype member is 400 INVALID_JSON saying so; broken JSON and an empty body keep their message', async () => {
    const base = `"email":"${uniqueEmail()}","password":"${PASSWORD}","name":"N"`;
    const cases: Array<[string, string]> = [
      [`{"__proto__":{"isAdmin":true},${base}}`, 'Request body has a member named __proto__ or constructor.prototype, which is not accepted'],
      [`{"constructor":{"prototype":{"isAdmin":true}},${base}}`, 'Request body has a member named __proto__ or constructor.prototype, which is not accepted'],
      [`{${base}`, 'Request body is not valid JSON'],
      ['', 'Request body is not valid JSON'],
    ];
    for (const [payload, message] of cases) {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/auth/register', headers: { 'content-type': 'application/json' }, payload });
      assert.equal(res.statusCode, 400, payload.slice(0, 40));
      assert.deepEqual(res.json(), { success: false, error: { code: 'INVALID_JSON', message } }, payload.slice(0, 40));
    }
  });

  test('a path with a bad percent-escape is 400 BAD_REQUEST in the envelope, with a request id, the path not repeated', async () => {
    for (const url of ['/api/v1/networks/%ud800', '/api/v1/chain-abstraction/balance/%ED%A0%80?networks=native-mainnet', '/api/v1/api-keys/jk_live_%E0%A4%A']) {
      const res = await t.app.inject({ method: 'GET', url });
      assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
      assert.deepEqual(res.json(), { success: false, error: { code: 'BAD_REQUEST', message: 'The request path holds an invalid percent-escape' } });
      assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    }
  });
});
