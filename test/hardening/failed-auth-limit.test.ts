import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp, uniqueEmail } from '../support/app.ts';
import { serviceSkip } from '../support/services.ts';

const FAILED_AUTH_LIMIT = 5;
const REST_LIMIT = 5;
const EXTRA = 3;
const PASSWORD = 'Quartz-Meadow-Lantern-42';

/** A client address of its own per test: limits are per IP, and Redis is shared with other suites. */
const someIp = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`;

type Res = Awaited<ReturnType<TestApp['app']['inject']>>;

function count(results: Res[]): Record<number, number> {
  const by: Record<number, number> = {};
  for (const r of results) by[r.statusCode] = (by[r.statusCode] ?? 0) + 1;
  return by;
}

/** C7 + C13: 429 RATE_LIMITED with an integer Retry-After in the header and the details. */
function assertThrottled(r: Res): void {
  assert.equal(r.statusCode, 429);
  const body = r.json();
  assert.equal(body.success, false);
  assert.equal(body.error.code, 'RATE_LIMITED');
  assert.match(String(r.headers['retry-after']), /^[1-9]\d*$/);
  assert.equal(body.error.details.retryAfter, Number(r.headers['retry-after']));
}

for (const limiter of ['memory', 'redis'] as const) {
  const skip = limiter === 'redis' ? await serviceSkip('Redis') : false;

  describe(`protected REST routes are limited when authentication or validation fails (C17, ${limiter} limiter)`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp({
        redis: limiter === 'redis',
        overrides: { limits: { failedAuthPerMinute: FAILED_AUTH_LIMIT, restPerMinute: REST_LIMIT } },
      });
    });
    after(() => t?.close());

    async function signUp(ip: string): Promise<{ authorization: string }> {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        remoteAddress: ip,
        payload: { email: uniqueEmail('limits'), password: PASSWORD, name: 'Limits' },
      });
      assert.equal(res.statusCode, 200, res.body);
      return { authorization: `Bearer ${res.json().data.tokens.accessToken}` };
    }

    test(`${FAILED_AUTH_LIMIT}+${EXTRA} failed bearer authentications sent at once from one address: ${FAILED_AUTH_LIMIT} are 401, the rest 429 with Retry-After`, async () => {
      const ip = someIp();
      const forged = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLW5vdC12YWxpZA';
      const bad: Array<Record<string, string>> = [{}, { authorization: 'Bearer' }, { authorization: `Bearer ${forged}` }, { authorization: 'Basic dXNlcjpwYXNz' }];
      const results = await Promise.all(
        Array.from({ length: FAILED_AUTH_LIMIT + EXTRA }, (_, i) =>
          t.app.inject({ method: 'GET', url: '/api/v1/api-keys', remoteAddress: ip, headers: bad[i % bad.length] }),
        ),
      );
      assert.deepEqual(count(results), { 401: FAILED_AUTH_LIMIT, 429: EXTRA });
      for (const r of results.filter((x) => x.statusCode === 429)) assertThrottled(r);

      // Per address: another one still gets its 401s...
      const elsewhere = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', remoteAddress: someIp(), payload: { name: 'x' } });
      assert.equal(elsewhere.statusCode, 401);
      // ...and a valid token from the throttled address is served: only failures are refused.
      const auth = await signUp(someIp());
      const ok = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', remoteAddress: ip, headers: auth });
      assert.equal(ok.statusCode, 200, ok.body);
    });

    test(`C13: each failed bearer authentication's 401, and the 429 past ${FAILED_AUTH_LIMIT}, carry the failed-authentication window's headers`, async () => {
      const ip = someIp();
      const nowS = () => Math.floor(Date.now() / 1000);
      const bad: Array<Record<string, string>> = [{}, { authorization: 'Bearer not-a-token' }, { authorization: 'Basic dXNlcjpwYXNz' }];
      for (let i = 0; i < FAILED_AUTH_LIMIT; i++) {
        const r = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', remoteAddress: ip, headers: bad[i % bad.length] });
        assert.equal(r.statusCode, 401, r.body);
        assert.equal(r.headers['x-ratelimit-limit'], String(FAILED_AUTH_LIMIT));
        assert.equal(r.headers['x-ratelimit-remaining'], String(FAILED_AUTH_LIMIT - 1 - i), 'one less per failure');
        assert.match(String(r.headers['x-ratelimit-reset']), /^\d+$/);
        assert.ok(Number(r.headers['x-ratelimit-reset']) >= nowS());
        assert.equal(r.headers['x-cu-remaining'], '-1', 'no account is signed in');
        assert.equal(r.headers['retry-after'], undefined);
      }
      const refused = await t.app.inject({ method: 'POST', url: '/api/v1/api-keys', remoteAddress: ip, payload: { name: 'x' } });
      assertThrottled(refused);
      assert.equal(refused.headers['x-ratelimit-limit'], String(FAILED_AUTH_LIMIT));
      assert.equal(refused.headers['x-ratelimit-remaining'], '0');
      assert.ok(Number(refused.headers['x-ratelimit-reset']) >= nowS() + 1, 'when one more is allowed again');
      assert.equal(refused.headers['x-cu-remaining'], '-1');
    });

    test(`${REST_LIMIT}+${EXTRA} requests failing validation sent at once by one account: ${REST_LIMIT} are 400, the rest 429`, async () => {
      const auth = await signUp(someIp());
      const results = await Promise.all(
        Array.from({ length: REST_LIMIT + EXTRA }, () =>
          t.app.inject({ method: 'POST', url: '/api/v1/api-keys', remoteAddress: someIp(), headers: auth, payload: { unknownField: true } }),
        ),
      );
      assert.deepEqual(count(results), { 400: REST_LIMIT, 429: EXTRA });
      for (const r of results.filter((x) => x.statusCode === 429)) assertThrottled(r);
    });
  });
}
