// C46: GET /usage/analytics on real parts: anvil, a scripted slow and a failing upstream, both storage kinds.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { createPublicClient, http } from 'viem';
import { AnalyticsRecorder, OK } from '../../src/analytics/recorder.ts';
import { RateLimitedError } from '../../src/errors/rpc.ts';
import type { Analytics } from '../../src/analytics/store.ts';
import { AnalyticsStore } from '../../src/analytics/store.ts';
import { bucketOf, bucketValue, encodeLatency } from '../../src/analytics/histogram.ts';
import type { UsageStats } from '../../src/usage/queries.ts';
import { UsageService } from '../../src/usage/service.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { storageBackends } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const backends = await storageBackends();
const ADMIN_TOKEN = 'analytics-test-admin-token-0123456789';
const SLOW_MS = 200;
/** A latency of SLOW_MS is reported as its bucket's value: at least this (bucket precision, C46). */
const SLOW_FLOOR = bucketValue(bucketOf(SLOW_MS));

type Auth = { authorization: string };
const today = () => new Date().toISOString().slice(0, 10);
/** The start of the UTC hour of `ms`, as an answer's bucket names it. */
const hourOf = (ms: number) => new Date(ms - (ms % 3_600_000)).toISOString();
const daysAgo = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);
const call = (method: string, id: number | string = 1, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

for (const backend of backends) {
  describe(`usage analytics on ${backend.name} (C46)`, { skip: backend.skip }, () => {
    let slow: FakeNode;
    let broken: FakeNode;
    let t: TestApp;
    before(async () => {
      slow = await startFakeNode({ delayMs: SLOW_MS });
      broken = await startFakeNode({ mode: 'status500' });
      t = await startTestApp({
        backend: backend.name,
        devnet: true,
        devnetNetworks: ['ethereum'],
        listen: true,
        env: { ADMIN_TOKEN, UPSTREAM_NATIVE_TESTNET: slow.url, UPSTREAM_POLYGON: broken.url },
      });
    });
    after(async () => {
      await t?.close();
      await slow?.close();
      await broken?.close();
    });

    const post = (network: string, key: string, payload: unknown) =>
      fetch(`${t.url}/v1/${network}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    const analytics = (auth: Auth, query = '') => t.app.inject({ method: 'GET', url: `/api/v1/usage/analytics${query}`, headers: auth });
    const analyticsOk = async (auth: Auth, query = ''): Promise<Analytics> => {
      const res = await analytics(auth, query);
      assert.equal(res.statusCode, 200, res.body);
      return res.json().data as Analytics;
    };
    const stats = async (auth: Auth): Promise<UsageStats> => (await t.app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: auth })).json().data as UsageStats;
    const flushNow = () => t.app.parts.usage.flush();
    const proUser = async () => {
      const user = await registerUser(t.app);
      await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
      return user;
    };

    test('calls on the devnet, a slow upstream and a failing one show their counts, errors and percentiles within the flush interval', async () => {
      const user = await proUser();
      const { key, id } = await createKey(t.app, { name: 'analysed' }, user);
      const client = createPublicClient({ transport: http(`${t.url}/v1/ethereum/${key}`, { retryCount: 0 }) });
      // The day of the calls is the day read back; the hour the calls start in: they may end in the
      // next one when the test runs across an hour.
      const firstHour = hourOf(Date.now());
      for (let i = 0; i < 10; i++) assert.match(await client.request({ method: 'eth_blockNumber' }), /^0x/);
      // anvil answers a malformed address with its own error: a node error, answered 200 (C22).
      await assert.rejects(client.request({ method: 'eth_getBalance', params: ['0x12', 'latest'] }));
      for (let i = 0; i < 2; i++) assert.equal((await post('native-testnet', key, call('eth_gasPrice', i))).status, 200);
      const failed = await post('polygon', key, call('eth_blockNumber'));
      assert.ok(failed.status >= 500, `the failing upstream answers ${failed.status}`);
      assert.equal(((await failed.json()) as { error: { code: number } }).error.code, -32000);

      // No flush by hand: the usage flush (2 s) carries the analytics rows.
      const a = await waitFor(
        async () => {
          const r = await analyticsOk(user.auth);
          return r.series.at(-1)?.requests === 14 ? r : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 200, what: 'the calls in the analytics' },
      );
      assert.equal(a.granularity, 'day');
      assert.equal(a.series.length, 30, 'C27 defaults: the 30 days ending today, zeros included');
      assert.equal(a.period.end, today());
      const day = a.series.at(-1)!;
      assert.equal(day.start, `${today()}T00:00:00.000Z`);
      assert.deepEqual(day.errors, { node: 1, upstream: 1 });
      assert.deepEqual(day.refused, { rate: 0, quota: 0, key: 0, network: 0, method: 0, access: 0 });
      assert.equal(day.computeUnits, 14);
      // 12 fast calls and 2 slow ones: the median is fast, the 95th percentile is the slow node's.
      assert.ok(day.latencyMs.p50! < SLOW_FLOOR, `p50 ${day.latencyMs.p50}`);
      assert.ok(day.latencyMs.p95! >= SLOW_FLOOR, `p95 ${day.latencyMs.p95}`);
      assert.ok(day.latencyMs.p99! >= day.latencyMs.p95!);
      for (const empty of a.series.slice(0, -1)) {
        assert.equal(empty.requests, 0);
        assert.deepEqual(empty.latencyMs, { p50: null, p95: null, p99: null });
      }

      const method = (m: string) => a.topMethods.find((x) => x.method === m);
      assert.deepEqual(
        a.topMethods.map((x) => [x.method, x.requests]),
        [
          ['eth_blockNumber', 11],
          ['eth_gasPrice', 2],
          ['eth_getBalance', 1],
        ],
      );
      assert.ok(method('eth_gasPrice')!.p95Ms! >= SLOW_FLOOR, `eth_gasPrice p95 ${method('eth_gasPrice')!.p95Ms}`);
      assert.ok(method('eth_gasPrice')!.p95Ms! < SLOW_MS * 5, 'and not wildly above the scripted delay');
      assert.equal(method('eth_getBalance')!.errorRate, 1);
      assert.equal(method('eth_blockNumber')!.errorRate, Math.round((1 / 11) * 10_000) / 10_000);

      const network = (n: string) => a.byNetwork.find((x) => x.network === n);
      assert.deepEqual(
        a.byNetwork.map((x) => [x.network, x.requests]),
        [
          ['ethereum', 11],
          ['native-testnet', 2],
          ['polygon', 1],
        ],
      );
      assert.ok(network('native-testnet')!.p95Ms! >= SLOW_FLOOR);
      assert.ok(network('ethereum')!.p95Ms !== null);
      assert.equal(network('polygon')!.errorRate, 1);
      assert.deepEqual(a.byKey, [{ apiKeyId: id, name: 'analysed', requests: 14, computeUnits: 14 }]);

      // Hourly: 24 buckets of today, the calls in the hour they were made in (in the two hours, when
      // the test ran across one: then every call in one of them, 14 in all).
      const h = await analyticsOk(user.auth, `?granularity=hour&startDate=${today()}&endDate=${today()}`);
      assert.equal(h.series.length, 24);
      const lastHour = hourOf(Date.now());
      const inHours = h.series.filter((s) => s.requests > 0).map((s) => [s.start, s.requests] as const);
      if (lastHour === firstHour) assert.deepEqual(inHours, [[firstHour, 14]]);
      else {
        assert.ok(inHours.every(([at]) => at === firstHour || at === lastHour), JSON.stringify(inHours));
        assert.equal(inHours.reduce((n, [, r]) => n + r, 0), 14);
      }
      // Filters narrow every figure.
      const slowOnly = await analyticsOk(user.auth, '?network=native-testnet');
      assert.equal(slowOnly.series.at(-1)?.requests, 2);
      assert.ok(slowOnly.series.at(-1)!.latencyMs.p50! >= SLOW_FLOOR, 'the slow node alone: its median is slow');
      assert.equal((await analyticsOk(user.auth, '?method=eth_getBalance')).series.at(-1)?.errors.node, 1);
      assert.equal((await analyticsOk(user.auth, `?apiKeyId=${id}`)).byKey[0]?.requests, 14);
      assert.equal((await stats(user.auth)).totalRequests, 14, 'the usage statistics count the same calls');
    });

    test('refused calls are counted by reason (rate, quota, key: revoked, inactive, expired; network, method) for the key’s account and never show in /usage/stats', async () => {
      const user = await proUser();
      const limited = await createKey(t.app, { name: 'one a minute', rateLimit: 1 }, user);
      const ethOnly = await createKey(t.app, { name: 'ethereum only', networks: ['ethereum'] }, user);
      const revoked = await createKey(t.app, { name: 'revoked' }, user);

      assert.equal((await post('ethereum', limited.key, call('eth_blockNumber'))).status, 200);
      assert.equal((await post('ethereum', limited.key, call('eth_blockNumber'))).status, 429); // rate
      assert.equal((await post('native-testnet', ethOnly.key, call('eth_chainId'))).status, 403); // network
      const unknown = (await (await post('ethereum', ethOnly.key, call('foo_bar'))).json()) as { error: { code: number } };
      assert.equal(unknown.error.code, -32601); // method
      assert.equal((await post('ethereum', revoked.key, call('eth_blockNumber'))).status, 200);
      const rev = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${revoked.id}/revoke`, headers: user.auth });
      assert.equal(rev.statusCode, 200, rev.body);
      const gone = (await (await post('ethereum', revoked.key, call('eth_blockNumber'))).json()) as { error: { code: number } };
      assert.equal(gone.error.code, -32002); // key
      // C46a: an inactive key (its caller hears -32001, as for an unknown key) and an expired one count under key too.
      const off = await createKey(t.app, { name: 'switched off' }, user);
      const patch = await t.app.inject({ method: 'PATCH', url: `/api/v1/api-keys/${off.id}`, headers: user.auth, payload: { status: 'inactive' } });
      assert.equal(patch.statusCode, 200, patch.body);
      const inactive = (await (await post('ethereum', off.key, call('eth_blockNumber'))).json()) as { error: { code: number } };
      assert.equal(inactive.error.code, -32001); // key
      const expired = await createKey(t.app, { name: 'expired', expiresAt: '2020-01-01T00:00:00.000Z' }, user);
      const late = (await (await post('ethereum', expired.key, call('eth_blockNumber'))).json()) as { error: { code: number } };
      assert.equal(late.error.code, -32002); // key
      // A key that does not exist has no account to count for.
      assert.equal((await post('ethereum', `${off.key.slice(0, -4)}AAAA`, call('eth_blockNumber'))).status, 401);

      // Quota: another account whose daily limit is one request.
      const small = await proUser();
      const lim = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${small.id}`, headers: { 'x-admin-token': ADMIN_TOKEN }, payload: { limits: { dailyLimit: 1 } } });
      assert.equal(lim.statusCode, 200, lim.body);
      const smallKey = await createKey(t.app, { name: 'small' }, small);
      assert.equal((await post('ethereum', smallKey.key, call('eth_blockNumber'))).status, 200);
      assert.equal((await post('ethereum', smallKey.key, call('eth_blockNumber'))).status, 429); // quota

      await flushNow();
      const a = await analyticsOk(user.auth);
      const day = a.series.at(-1)!;
      assert.deepEqual(day.refused, { rate: 1, quota: 0, key: 3, network: 1, method: 1, access: 0 });
      assert.equal(day.requests, 2, 'only the admitted calls are requests');
      assert.equal((await stats(user.auth)).totalRequests, 2, 'refused calls are not usage (C27)');
      const perKey = await analyticsOk(user.auth, `?apiKeyId=${ethOnly.id}`);
      assert.deepEqual(perKey.series.at(-1)?.refused, { rate: 0, quota: 0, key: 0, network: 1, method: 1, access: 0 });
      // An unknown method name is counted as `other` (callers can send any name).
      assert.equal((await analyticsOk(user.auth, '?method=other')).series.at(-1)?.refused.method, 1);

      const s = (await analyticsOk(small.auth)).series.at(-1)!;
      assert.deepEqual([s.requests, s.refused.quota], [1, 1]);
      assert.equal((await stats(small.auth)).totalRequests, 1);
    });

    test('calls over a WebSocket are counted with their latency like HTTP ones', async () => {
      const user = await proUser();
      const { key } = await createKey(t.app, { name: 'socket' }, user);
      const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws/ethereum?apiKey=${key}`);
      await once(ws, 'open');
      try {
        for (let i = 1; i <= 3; i++) {
          ws.send(JSON.stringify(call('eth_blockNumber', i)));
          const [data] = (await once(ws, 'message')) as [Buffer];
          assert.match(String(data), /"result":"0x/);
        }
      } finally {
        ws.close();
      }
      await flushNow();
      const day = (await analyticsOk(user.auth)).series.at(-1)!;
      assert.equal(day.requests, 3);
      assert.notEqual(day.latencyMs.p50, null);
    });

    test('free accounts get 403 PLAN_FEATURE; bad input is a 400 naming the field; another account’s key is 404', async () => {
      const free = await registerUser(t.app);
      const denied = await analytics(free.auth);
      assert.equal(denied.statusCode, 403);
      assert.equal(denied.json().error.code, 'PLAN_FEATURE');
      assert.equal((await analytics(free.auth, '?granularity=minute')).statusCode, 403, 'the plan is checked before the input');
      assert.equal((await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics' })).statusCode, 401);

      const user = await proUser();
      const bad = async (query: string, field: string) => {
        const res = await analytics(user.auth, query);
        assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
        const body = res.json();
        assert.equal(body.success, false);
        assert.equal(body.error.code, 'VALIDATION_ERROR');
        assert.ok(JSON.stringify(body.error.details).includes(field), `${query} names ${field}: ${res.body}`);
      };
      await bad('?granularity=minute', 'granularity');
      await bad(`?granularity=hour&startDate=${daysAgo(7)}&endDate=${today()}`, 'querystring.granularity');
      await bad(`?granularity=hour&startDate=${daysAgo(40)}&endDate=${daysAgo(38)}`, 'querystring.startDate');
      await bad(`?startDate=${daysAgo(420)}&endDate=${daysAgo(300)}`, 'querystring.startDate');
      await bad(`?startDate=${today()}&endDate=${daysAgo(1)}`, 'querystring.startDate');
      await bad('?startDate=2026-02-30', 'startDate');
      await bad('?network=nowhere', 'querystring.network');
      await bad('?method=eth%20call', 'method');
      await bad('?extra=1', 'extra');
      // Seven days by the hour are fine; so is the oldest day kept.
      assert.equal((await analyticsOk(user.auth, `?granularity=hour&startDate=${daysAgo(6)}&endDate=${today()}`)).series.length, 7 * 24);
      assert.equal((await analyticsOk(user.auth, `?startDate=${daysAgo(399)}&endDate=${daysAgo(300)}`)).series.length, 100);

      const other = await createKey(t.app, { name: 'not yours' });
      const res = await analytics(user.auth, `?apiKeyId=${other.id}`);
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().error.code, 'NOT_FOUND');
    });

    test('the retention sweep deletes hourly rows past 35 days and daily rows past 400, and keeps the rest', async () => {
      const user = await proUser();
      const { id } = await createKey(t.app, { name: 'old' }, user);
      await t.storage.db.execute(sql`insert into analytics_series (user_id, key_id, network, method) values (${user.id}, ${id}, 'ethereum', 'eth_call')`);
      // Hours are stored as hours since 1970 (UTC), counters NULL for zero, histograms sparse (histogram.ts).
      const period = (table: 'analytics_hours' | 'analytics_days', at: string) =>
        table === 'analytics_hours' ? sql`${Date.parse(at) / 3_600_000}::int` : sql`${at}::date`;
      const insert = (table: 'analytics_hours' | 'analytics_days', at: string) =>
        t.storage.db.execute(
          sql`insert into ${sql.raw(table)} (series, ${sql.raw(table === 'analytics_hours' ? 'hour' : 'day')}, requests, latency)
              select id, ${period(table, at)}, 1, decode(${encodeLatency([0, 1])}, 'hex') from analytics_series where user_id = ${user.id}`,
        );
      await insert('analytics_hours', `${daysAgo(35)}T23:00:00Z`);
      await insert('analytics_hours', `${daysAgo(34)}T00:00:00Z`);
      await insert('analytics_days', daysAgo(400));
      await insert('analytics_days', daysAgo(399));
      await new AnalyticsStore({ db: t.storage.db, logger: pino({ level: 'silent' }) }).sweep();
      const left = async (table: string, at: string) => {
        const res: unknown = await t.storage.db.execute(
          sql`select (${sql.raw(at)})::text as at from ${sql.raw(table)} r join analytics_series s on s.id = r.series where s.user_id = ${user.id} order by 1`,
        );
        return (res as { rows: Array<{ at: string }> }).rows.map((r) => r.at.slice(0, 10));
      };
      assert.deepEqual(await left('analytics_hours', `to_timestamp(hour * 3600) at time zone 'UTC'`), [daysAgo(34)]);
      assert.deepEqual(await left('analytics_days', 'day'), [daysAgo(399)]);
      // The oldest day kept is still answered (asked for the key: rows written here, not by the
      // recorder, are in no account roll-up).
      const a = await analyticsOk(user.auth, `?startDate=${daysAgo(399)}&endDate=${daysAgo(399)}&apiKeyId=${id}`);
      assert.deepEqual(a.series.map((x) => x.requests), [1]);
    });

    test('two recorders flushing the same row into one database merge their histograms and add their counts', async () => {
      const user = await proUser();
      const { id } = await createKey(t.app, { name: 'shared' }, user);
      const logger = pino({ level: 'silent' });
      const make = () => {
        return new UsageService({ db: t.storage.db, settings: t.config.usage, logger, analytics: new AnalyticsRecorder(['eth_call']) });
      };
      const one = make();
      const two = make();
      // Instance one saw 10 fast calls, instance two 10 slow ones and 2 node errors; both in this hour.
      for (let i = 0; i < 10; i++) one.analytics!.call(user.id, id, 'ethereum', 'eth_call', 2, OK, 3);
      for (let i = 0; i < 10; i++) two.analytics!.call(user.id, id, 'ethereum', 'eth_call', 2, i < 2 ? 1 : OK, 400);
      two.analytics!.refused(user.id, id, 'ethereum', 'eth_call', new RateLimitedError('Rate limit exceeded'), 3);
      await Promise.all([one.flush(), two.flush()]);
      // A second round on instance one: merged again into the same stored rows, never overwriting them.
      one.analytics!.call(user.id, id, 'ethereum', 'eth_call', 2, OK, 3);
      await one.flush();

      const store = new AnalyticsStore({ db: t.storage.db, logger });
      for (const granularity of ['hour', 'day']) {
        const a = await store.query({ userId: user.id, start: today(), end: today(), granularity: granularity as 'hour' | 'day' });
        const s = a.series.find((x) => x.requests > 0)!;
        assert.equal(s.requests, 21, granularity);
        assert.equal(s.computeUnits, 42);
        assert.deepEqual(s.errors, { node: 2, upstream: 0 });
        assert.equal(s.refused.rate, 3);
        // 11 of 3 ms and 10 of 400 ms: the median is fast, p95 is slow; from the merged histogram.
        assert.equal(s.latencyMs.p50, bucketValue(bucketOf(3)), granularity);
        assert.equal(s.latencyMs.p95, bucketValue(bucketOf(400)), granularity);
      }
      assert.equal(one.analytics!.pendingRows + two.analytics!.pendingRows, 0);
    });
  });

  describe(`usage analytics across a restart on ${backend.name} (C46)`, { skip: backend.skip }, () => {
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode();
    });
    after(async () => {
      await fake?.close();
    });

    test('what was recorded before a graceful stop is there after the restart', async () => {
      const { mkdtemp, rm } = await import('node:fs/promises');
      const { tmpdir } = await import('node:os');
      const path = await import('node:path');
      const { createTestDatabase } = await import('../support/app.ts');
      const dir = backend.name === 'pglite' ? await mkdtemp(path.join(tmpdir(), 'junction-analytics-')) : undefined;
      const db = backend.name === 'postgres' ? await createTestDatabase() : undefined;
      const opts = {
        ...(dir ? { dataDir: dir } : {}),
        ...(db ? { databaseUrl: db.url, backend: 'postgres' as const } : {}),
        env: { ADMIN_TOKEN, UPSTREAM_NATIVE_MAINNET: fake.url },
      };
      try {
        let t = await startTestApp(opts);
        const user = await registerUser(t.app);
        await setTier(t.app, user.id, 'max', ADMIN_TOKEN);
        const { key } = await createKey(t.app, { name: 'kept' }, user);
        for (let i = 0; i < 5; i++) {
          const res = await t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call('eth_blockNumber', i) });
          assert.equal(res.statusCode, 200);
        }
        assert.equal((await t.app.inject({ method: 'POST', url: `/v1/native-mainnet/${key}`, payload: call('foo_bar') })).json().error.code, -32601);
        // No flush by hand: the graceful stop writes what is pending (the usage flush carries it).
        await t.close();
        t = await startTestApp(opts);
        try {
          const res = await t.app.inject({ method: 'GET', url: '/api/v1/usage/analytics', headers: user.auth });
          assert.equal(res.statusCode, 200, res.body);
          const day = (res.json().data as Analytics).series.at(-1)!;
          assert.equal(day.requests, 5);
          assert.equal(day.refused.method, 1);
          assert.notEqual(day.latencyMs.p50, null);
        } finally {
          await t.close();
        }
      } finally {
        if (dir) await rm(dir, { recursive: true, force: true });
        await db?.drop();
      }
    });
  });
}
