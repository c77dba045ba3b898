// The /webhooks resource (C37): plan gate, validation (C38 filters, C39 targets), the endpoint
// allowance under concurrency, the secret shown once, other accounts' endpoints, OpenAPI.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { webhookEndpoints } from '../../src/webhooks/schema.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ADMIN_TOKEN, createWebhook, type User, userOn } from './helpers.ts';

const PUBLIC_URL = 'https://93.184.215.14/hook';
const A = '0x00000000000000000000000000000000000000a1';

describe('webhook routes (C37, C38)', () => {
  let t: TestApp;
  let max: User;

  before(async () => {
    // Private targets refused (the shipped default), a small allowance to test the limit.
    t = await startTestApp({ env: { ADMIN_TOKEN }, overrides: { webhooks: { allowPrivateTargets: false, maxEndpoints: { max: 3, enterprise: 100 } } } });
    max = await userOn(t.app);
  });
  after(async () => {
    await t?.close();
  });

  const post = (user: User, payload: unknown) => t.app.inject({ method: 'POST', url: '/api/v1/webhooks', headers: user.auth, payload: payload as object });

  test('free and pro accounts get 403 PLAN_FEATURE naming the plans that have webhooks', async () => {
    for (const tier of ['free', 'pro']) {
      const u = await userOn(t.app, tier);
      for (const [method, url] of [
        ['POST', '/api/v1/webhooks'],
        ['GET', '/api/v1/webhooks'],
        ['GET', '/api/v1/webhooks/x'],
        ['POST', '/api/v1/webhooks/x/test'],
      ] as const) {
        const res = await t.app.inject({ method, url, headers: u.auth, ...(method === 'POST' ? { payload: { url: PUBLIC_URL, events: ['whale.alert'] } } : {}) });
        assert.equal(res.statusCode, 403, `${tier} ${method} ${url}`);
        assert.equal(res.json().error.code, 'PLAN_FEATURE');
        assert.match(res.json().error.message, /max and enterprise/);
      }
    }
    const noToken = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks' });
    assert.equal(noToken.statusCode, 401);
  });

  test('create answers the secret once; GET and the list never show it; it is stored encrypted', async () => {
    const u = await userOn(t.app, 'enterprise');
    const created = await createWebhook(t.app, u, { url: PUBLIC_URL, events: ['whale.alert'], filters: { networks: ['native-mainnet'], minValue: '0500.50' }, description: 'whales' });
    assert.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(created.secret.slice(6), 'base64').length, 32);
    assert.deepEqual(created.filters, { networks: ['native-mainnet'], minValue: '500.5' });
    assert.equal(created.status, 'enabled');
    const one = await t.app.inject({ method: 'GET', url: `/api/v1/webhooks/${created.id}`, headers: u.auth });
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: u.auth });
    assert.equal(one.statusCode, 200);
    assert.equal(one.json().data.secret, undefined);
    assert.equal(list.json().data.length, 1);
    for (const body of [one.body, list.body]) assert.ok(!body.includes(created.secret) && !body.includes('secret'));
    const [row] = await t.storage.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, created.id));
    assert.ok(row && !row.secretCiphertext.includes(created.secret.slice(6)), 'not stored in plain text');
    assert.ok(!t.logs.join('').includes(created.secret.slice(6)), 'never logged');
  });

  test('bad input is 400 VALIDATION_ERROR and stores nothing', async () => {
    const u = await userOn(t.app);
    const cases: Array<[string, unknown]> = [
      ['ftp scheme', { url: 'ftp://example.com/x', events: ['whale.alert'] }],
      ['not a URL', { url: 'not a url at all', events: ['whale.alert'] }],
      ['credentials in URL', { url: 'https://user:pw@93.184.215.14/x', events: ['whale.alert'] }],
      ['too long', { url: `https://93.184.215.14/${'a'.repeat(2100)}`, events: ['whale.alert'] }],
      ['unknown event', { url: PUBLIC_URL, events: ['block.mined'] }],
      ['no events', { url: PUBLIC_URL, events: [] }],
      ['repeated event', { url: PUBLIC_URL, events: ['whale.alert', 'whale.alert'] }],
      ['unknown network', { url: PUBLIC_URL, events: ['whale.alert'], filters: { networks: ['nope-net'] } }],
      ['minValue not decimal', { url: PUBLIC_URL, events: ['whale.alert'], filters: { minValue: '1e5' } }],
      ['negative minValue', { url: PUBLIC_URL, events: ['whale.alert'], filters: { minValue: '-1' } }],
      ['bad address', { url: PUBLIC_URL, events: ['address.activity'], filters: { networks: ['native-mainnet'], addresses: ['0x1234'] } }],
      [
        'bad checksum',
        { url: PUBLIC_URL, events: ['address.activity'], filters: { networks: ['native-mainnet'], addresses: ['0x52908400098527886E0F7030069857D2E4169Ee7'] } },
      ],
      [
        'too many addresses',
        {
          url: PUBLIC_URL,
          events: ['address.activity'],
          filters: { networks: ['native-mainnet'], addresses: Array.from({ length: 1001 }, (_, i) => `0x${i.toString(16).padStart(40, '0')}`) },
        },
      ],
      ['address.activity without addresses', { url: PUBLIC_URL, events: ['address.activity'], filters: { networks: ['native-mainnet'] } }],
      ['address.activity without networks', { url: PUBLIC_URL, events: ['address.activity'], filters: { addresses: [A] } }],
      ['unknown filter', { url: PUBLIC_URL, events: ['whale.alert'], filters: { chains: ['x'] } }],
      ['unknown field', { url: PUBLIC_URL, events: ['whale.alert'], secret: 'whsec_mine' }],
      ['NUL in description', { url: PUBLIC_URL, events: ['whale.alert'], description: 'a\u0000b' }],
      ['NUL in url', { url: 'https://93.184.215.14/a\u0000b', events: ['whale.alert'] }],
      // Port 0 is dialled as the default port; tabs, newlines and spaces are dropped by the URL
      // parser: the stored text would not be the address called.
      ['port 0', { url: 'https://93.184.215.14:0/x', events: ['whale.alert'] }],
      ['port 0, IPv6', { url: 'https://[2606:4700:4700::1111]:0/x', events: ['whale.alert'] }],
      ['tab and newline in url', { url: 'https://93.184.215.14/\t\n', events: ['whale.alert'] }],
      ['leading space', { url: ' https://93.184.215.14/x', events: ['whale.alert'] }],
      ['space in the path', { url: 'https://93.184.215.14/a b', events: ['whale.alert'] }],
    ];
    for (const [name, body] of cases) {
      const res = await post(u, body);
      assert.equal(res.statusCode, 400, `${name}: ${res.body}`);
      assert.equal(res.json().error.code, 'VALIDATION_ERROR', name);
    }
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: u.auth });
    assert.deepEqual(list.json().data, []);
  });

  test('1,000 addresses are accepted, normalised to lower case, xdc prefix too', async () => {
    const u = await userOn(t.app);
    const addresses = Array.from({ length: 999 }, (_, i) => `0x${(i + 1).toString(16).padStart(40, '0')}`);
    addresses.push('xdc52908400098527886E0F7030069857D2E4169EE7');
    const created = await createWebhook(t.app, u, { url: PUBLIC_URL, events: ['address.activity'], filters: { networks: ['native-mainnet'], addresses } });
    const stored = (created.filters as { addresses: string[] }).addresses;
    assert.equal(stored.length, 1000);
    assert.equal(stored.at(-1), '0x52908400098527886e0f7030069857d2e4169ee7');
  });

  test('targets that are or resolve to loopback, private, link-local or metadata addresses are refused (C39)', async () => {
    const u = await userOn(t.app);
    for (const url of [
      'http://127.0.0.1:8080/x',
      'http://10.1.2.3/x',
      'http://172.16.0.5/x',
      'http://192.168.1.1/x',
      'http://169.254.169.254/latest/meta-data/',
      'http://100.64.0.1/x',
      'http://0.0.0.0/x',
      'http://[::1]/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://[fd00:ec2::254]/x',
      'http://[fe80::1]/x',
      'http://224.0.0.1/x',
      'http://localhost:3000/x',
      'http://api.localhost/x',
      'http://2130706433/x', // 127.0.0.1 as one number
    ]) {
      const res = await post(u, { url, events: ['whale.alert'] });
      assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
      assert.equal(res.json().error.details[0].field, 'body.url');
      // The refusal names the setting that would allow the target.
      assert.match(res.json().error.message, /webhooks\.allowPrivateTargets/, url);
    }
    const created = await createWebhook(t.app, u, { url: PUBLIC_URL, events: ['whale.alert'] });
    const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/webhooks/${created.id}`, headers: u.auth, payload: { url: 'http://10.0.0.1/x' } });
    assert.equal(patched.statusCode, 400, 'PATCH checks the target too');
  });

  test('N+k creates at once leave exactly N endpoints (C37 allowance)', async () => {
    const u = await userOn(t.app);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post(u, { url: `${PUBLIC_URL}/${i}`, events: ['whale.alert'] })));
    const codes = results.map((r) => r.statusCode).sort();
    assert.deepEqual(codes, [200, 200, 200, 403, 403, 403, 403, 403]);
    for (const r of results.filter((x) => x.statusCode === 403)) assert.equal(r.json().error.code, 'PLAN_LIMIT');
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: u.auth });
    assert.equal(list.json().data.length, 3);
  });

  test('PATCH changes fields and status; rotate answers a new secret; DELETE removes it', async () => {
    const created = await createWebhook(t.app, max, { url: PUBLIC_URL, events: ['whale.alert'] });
    const url = `/api/v1/webhooks/${created.id}`;
    const patched = await t.app.inject({
      method: 'PATCH',
      url,
      headers: max.auth,
      payload: { events: ['whale.alert', 'usage.quota'], description: 'both', status: 'disabled', filters: { minValue: '10' } },
    });
    assert.equal(patched.statusCode, 200, patched.body);
    const d = patched.json().data;
    assert.deepEqual([d.events, d.description, d.status, d.disabledReason, d.filters], [['whale.alert', 'usage.quota'], 'both', 'disabled', 'owner', { minValue: '10' }]);
    const enabled = await t.app.inject({ method: 'PATCH', url, headers: max.auth, payload: { status: 'enabled', description: null } });
    assert.deepEqual([enabled.json().data.status, enabled.json().data.disabledReason, enabled.json().data.description], ['enabled', null, null]);
    const empty = await t.app.inject({ method: 'PATCH', url, headers: max.auth, payload: {} });
    assert.equal(empty.statusCode, 400);
    const badEvents = await t.app.inject({ method: 'PATCH', url, headers: max.auth, payload: { events: ['address.activity'] } });
    assert.equal(badEvents.statusCode, 400, 'address.activity needs addresses and networks');
    for (const bad of ['https://93.184.215.14:0/x', 'https://93.184.215.14/x\n']) {
      const res = await t.app.inject({ method: 'PATCH', url, headers: max.auth, payload: { url: bad } });
      assert.equal(res.statusCode, 400, bad);
      assert.equal(res.json().error.details[0].field, 'body.url');
    }
    assert.equal((await t.app.inject({ method: 'GET', url, headers: max.auth })).json().data.url, PUBLIC_URL, 'the url is unchanged');

    const rotated = await t.app.inject({ method: 'POST', url: `${url}/rotate-secret`, headers: max.auth });
    assert.equal(rotated.statusCode, 200);
    assert.match(rotated.json().data.secret, /^whsec_/);
    assert.notEqual(rotated.json().data.secret, created.secret);

    const del = await t.app.inject({ method: 'DELETE', url, headers: max.auth });
    assert.deepEqual(del.json(), { success: true, message: 'Webhook deleted' });
    assert.equal((await t.app.inject({ method: 'GET', url, headers: max.auth })).statusCode, 404);
  });

  test("another account's webhook is 404 on every route", async () => {
    const created = await createWebhook(t.app, max, { url: PUBLIC_URL, events: ['whale.alert'] });
    const other = await userOn(t.app);
    const url = `/api/v1/webhooks/${created.id}`;
    for (const [method, path, payload] of [
      ['GET', url, undefined],
      ['PATCH', url, { description: 'mine now' }],
      ['DELETE', url, undefined],
      ['POST', `${url}/rotate-secret`, undefined],
      ['POST', `${url}/test`, undefined],
      ['GET', `${url}/deliveries`, undefined],
    ] as const) {
      const res = await t.app.inject({ method, url: path, headers: other.auth, ...(payload ? { payload } : {}) });
      assert.equal(res.statusCode, 404, `${method} ${path}`);
      assert.equal(res.json().error.code, 'NOT_FOUND');
    }
    const still = await t.app.inject({ method: 'GET', url, headers: max.auth });
    assert.equal(still.json().data.description, null);
  });

  test('every route is in the OpenAPI document with an operationId and bearer security', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
    const ops = [
      ['/api/v1/webhooks', 'post'],
      ['/api/v1/webhooks', 'get'],
      ['/api/v1/webhooks/{id}', 'get'],
      ['/api/v1/webhooks/{id}', 'patch'],
      ['/api/v1/webhooks/{id}', 'delete'],
      ['/api/v1/webhooks/{id}/rotate-secret', 'post'],
      ['/api/v1/webhooks/{id}/test', 'post'],
      ['/api/v1/webhooks/{id}/deliveries', 'get'],
    ];
    for (const [path, method] of ops) {
      const op = doc.paths[path as string]?.[method as string];
      assert.ok(op, `${method} ${path}`);
      assert.ok(op.operationId);
      assert.deepEqual(op.security, [{ bearerAuth: [] }]);
    }
  });
});
