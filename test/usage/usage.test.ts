import { UsageQueries, type UsageStats } from '../../src/usage/queries.ts';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import type { Db } from '../../src/storage/db.ts';
import { UsageService } from '../../src/usage/service.ts';
import { createKey, createTestDatabase, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { storageBackends } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const backends = await storageBackends();

type Auth = { authorization: string };
type User = Awaited<ReturnType<typeof registerUser>>;
type Stats = UsageStats;

const DAY_MS = 86_400_000;
const today = () => new Date().toISOString().slice(0, 10);
const shift = (day: string, days: number) => new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);
const call = (method: string, id: number | string = 1, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

for (const backend of backends) {
  describe(`usage on ${backend.name} (C21, C27)`, { skip: backend.skip }, () => {
    let fake: FakeNode;
    let t: TestApp;
    before(async () => {
      fake = await startFakeNode();
      t = await startTestApp({ backend: backend.name, env: { UPSTREAM_NATIVE_MAINNET: fake.url, UPSTREAM_NATIVE_TESTNET: fake.url } });
    });
    after(async () => {
      await t?.close();
      await fake?.close();
    });

    const rpc = (network: string, key: string, payload: unknown) =>
      t.app.inject({ method: 'POST', url: `/v1/${network}/${key}`, payload: payload as object });
    const stats = (auth: Auth, query = '') => t.app.inject({ method: 'GET', url: `/api/v1/usage/stats${query}`, headers: auth });
    const statsOk = async (auth: Auth, query = ''): Promise<Stats> => {
      const res = await stats(auth, query);
      assert.equal(res.statusCode, 200, res.body);
      return res.json().data;
    };
    const keyList = async (auth: Auth) => {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth });
      assert.equal(res.statusCode, 200);
      return res.json().data as Array<{ id: string; usage: { daily: number; monthly: number }; lastUsedAt: string | null }>;
    };
    /** The app's own UsageService (it is the key list's usage reader): skips the wait where timing is not the point. */
    const flushNow = () => t.app.parts.usage.flush();
    // The account-wide sums (usage_account_daily) follow by the table's trigger (migration 0015).
    const insertUsage = (userId: string, keyId: string, network: string, method: string, day: string, requests: number) =>
      t.storage.db.execute(
        sql`insert into usage_daily (user_id, key_id, network, method, day, requests, compute_units) values (${userId}, ${keyId}, ${network}, ${method}, ${day}, ${requests}, ${requests})`,
      );

    describe('counting real traffic', () => {
      test('single calls and batch items count one by one per method and network; refused calls do not count; stats and the key list show them within 5 s', async () => {
        const { key, id, user } = await createKey(t.app, { name: 'counted' });
        const limited = await createKey(t.app, { name: 'one a minute', rateLimit: 1 }, user);
        const seen = (m: string) => fake.callCount(m);
        const logsBefore = seen('eth_getLogs');

        for (const i of [1, 2]) assert.equal((await rpc('native-mainnet', key, call('eth_blockNumber', i))).statusCode, 200);
        const batch = await rpc('native-mainnet', key, [
          call('eth_chainId', 1),
          call('eth_blockNumber', 2),
          call('eth_getLogs', 3, [{}]),
          call('eth_accounts', 4), // C24: refused inside the batch
        ]);
        assert.equal(batch.statusCode, 200);
        assert.equal(batch.json()[3].error.code, -32601);
        assert.equal((await rpc('native-testnet', key, call('eth_gasPrice'))).statusCode, 200);
        // Refused: method policy, an unknown key, a rate-limited call.
        assert.equal((await rpc('native-mainnet', key, call('eth_sendTransaction'))).json().error.code, -32601);
        assert.equal((await rpc('native-mainnet', `${key.slice(0, -4)}zzzz`, call('eth_blockNumber'))).statusCode, 401);
        assert.equal((await rpc('native-mainnet', limited.key, call('eth_chainId'))).statusCode, 200);
        assert.equal((await rpc('native-mainnet', limited.key, call('eth_chainId'))).statusCode, 429);
        assert.equal(seen('eth_getLogs') - logsBefore, 1, 'the node saw the admitted batch item');
        assert.equal(seen('eth_sendTransaction') + seen('eth_accounts'), 0, 'refused calls never left the gateway');

        const started = Date.now();
        await waitFor(async () => (await statsOk(user.auth)).totalRequests >= 7, { timeoutMs: 5000, intervalMs: 100, what: 'the requests in the stats' });
        const elapsed = Date.now() - started;
        assert.ok(elapsed < 5000, `visible after ${elapsed} ms`);
        await flushNow(); // anything straggling would show now
        const s = await statsOk(user.auth);
        assert.equal(s.totalRequests, 7);
        assert.deepEqual(s.requestsByNetwork, { 'native-mainnet': 6, 'native-testnet': 1 });
        assert.deepEqual(s.requestsByMethod, { eth_blockNumber: 3, eth_chainId: 2, eth_getLogs: 1, eth_gasPrice: 1 });
        // eth_getLogs weighs 10 (C10), the rest 1.
        assert.equal(s.totalComputeUnits, 16);
        assert.equal(s.dailyBreakdown.at(-1)?.date, today());
        assert.equal(s.dailyBreakdown.at(-1)?.requests, 7);

        const list = await keyList(user.auth);
        const counted = list.find((k) => k.id === id);
        const one = list.find((k) => k.id === limited.id);
        assert.deepEqual(counted?.usage, { daily: 6, monthly: 6 });
        assert.deepEqual(one?.usage, { daily: 1, monthly: 1 });
        assert.ok(counted?.lastUsedAt && Math.abs(Date.parse(counted.lastUsedAt) - Date.now()) < 60_000, 'lastUsedAt is set');
        assert.match(counted.lastUsedAt, /Z$/);
      });

      test('each flush adds the same counts to the account-wide rows as to the key rows, summed over keys', async () => {
        const a = await createKey(t.app, { name: 'sum a' });
        const b = await createKey(t.app, { name: 'sum b' }, a.user);
        const rows = async (q: ReturnType<typeof sql>) => ((await t.storage.db.execute(q)) as { rows: unknown[] }).rows;
        for (const round of [1, 2]) {
          for (const k of [a.key, b.key]) {
            for (let i = 0; i < round; i++) assert.equal((await rpc('native-mainnet', k, call('eth_blockNumber', i))).statusCode, 200);
            assert.equal((await rpc('native-testnet', k, call('eth_getLogs', 1, [{}]))).statusCode, 200);
          }
          await flushNow(); // the second round's upsert adds to the rows of the first
        }
        const perKey = await rows(sql`select day::text as day, network, method, sum(requests)::int as requests, sum(compute_units)::int as units
          from usage_daily where user_id = ${a.user.id} group by 1, 2, 3 order by 1, 2, 3`);
        const account = await rows(sql`select day::text as day, network, method, requests::int as requests, compute_units::int as units
          from usage_account_daily where user_id = ${a.user.id} order by 1, 2, 3`);
        assert.deepEqual(account, perKey);
        assert.deepEqual(
          account.map((r) => (r as { requests: number }).requests),
          [6, 4],
        );
        // The account's statistics read those rows; one key's, its own rows.
        assert.equal((await statsOk(a.user.auth)).totalRequests, 10);
        assert.equal((await statsOk(a.user.auth, `?apiKeyId=${b.id}`)).totalRequests, 5);
      });

      test('C21: an unused key shows zeros and lastUsedAt null; the month counts past days, the day only today', async () => {
        const { id, user } = await createKey(t.app, { name: 'history' });
        const { id: unused } = await createKey(t.app, { name: 'unused' }, user);
        const day = today();
        const firstOfMonth = `${day.slice(0, 7)}-01`;
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', day, 4);
        if (firstOfMonth !== day) await insertUsage(user.id, id, 'native-mainnet', 'eth_call', firstOfMonth, 10);
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', shift(firstOfMonth, -1), 100); // last month
        const list = await keyList(user.auth);
        assert.deepEqual(list.find((k) => k.id === id)?.usage, { daily: 4, monthly: firstOfMonth !== day ? 14 : 4 });
        const idle = list.find((k) => k.id === unused);
        assert.deepEqual(idle?.usage, { daily: 0, monthly: 0 });
        assert.equal(idle?.lastUsedAt, null);
      });

      test('a deleted key’s requests still count for the account; its id still filters its history', async () => {
        const { key, id, user } = await createKey(t.app, { name: 'short-lived' });
        for (const i of [1, 2, 3]) await rpc('native-mainnet', key, call('eth_blockNumber', i));
        await flushNow();
        const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: user.auth });
        assert.equal(del.statusCode, 200);
        assert.equal((await statsOk(user.auth)).totalRequests, 3);
        assert.equal((await statsOk(user.auth, `?apiKeyId=${id}`)).totalRequests, 3);
      });
    });

    describe('GET /usage/stats', () => {
      test('C27 defaults: the 30 days ending today (UTC), every day present, zeros included, oldest first', async () => {
        const { id, user } = await createKey(t.app, { name: 'past' });
        const end = today();
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', shift(end, -3), 5);
        await insertUsage(user.id, id, 'native-testnet', 'eth_getBalance', shift(end, -29), 2);
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', shift(end, -30), 1000); // just outside
        const s = await statsOk(user.auth);
        assert.deepEqual(s.period, { start: shift(end, -29), end });
        assert.equal(s.dailyBreakdown.length, 30);
        s.dailyBreakdown.forEach((d, i) => assert.equal(d.date, shift(end, i - 29), 'consecutive, oldest first'));
        assert.deepEqual(
          s.dailyBreakdown.filter((d) => d.requests > 0),
          [
            { date: shift(end, -29), requests: 2 },
            { date: shift(end, -3), requests: 5 },
          ],
        );
        assert.equal(s.dailyBreakdown.filter((d) => d.requests === 0).length, 28);
        assert.equal(s.totalRequests, 7);
        assert.deepEqual(s.requestsByNetwork, { 'native-mainnet': 5, 'native-testnet': 2 });
        assert.deepEqual(s.requestsByMethod, { eth_call: 5, eth_getBalance: 2 });
        for (const v of [s.totalRequests, s.totalComputeUnits, ...Object.values(s.requestsByMethod)]) assert.equal(typeof v, 'number');
      });

      test('C27: one date given, the other is derived (30 days); an explicit range is honoured across months', async () => {
        const { id, user } = await createKey(t.app, { name: 'range' });
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', '2025-02-27', 1);
        await insertUsage(user.id, id, 'native-mainnet', 'eth_call', '2025-03-02', 2);
        const fromStart = await statsOk(user.auth, '?startDate=2025-02-01');
        assert.deepEqual(fromStart.period, { start: '2025-02-01', end: '2025-03-02' });
        assert.equal(fromStart.dailyBreakdown.length, 30);
        assert.equal(fromStart.totalRequests, 3);
        const fromEnd = await statsOk(user.auth, '?endDate=2025-03-01');
        assert.deepEqual(fromEnd.period, { start: '2025-01-31', end: '2025-03-01' });
        assert.equal(fromEnd.totalRequests, 1);
        const exact = await statsOk(user.auth, '?startDate=2025-02-27&endDate=2025-03-02');
        assert.deepEqual(
          exact.dailyBreakdown,
          [
            { date: '2025-02-27', requests: 1 },
            { date: '2025-02-28', requests: 0 },
            { date: '2025-03-01', requests: 0 },
            { date: '2025-03-02', requests: 2 },
          ],
        );
        const oneDay = await statsOk(user.auth, '?startDate=2025-03-02&endDate=2025-03-02');
        assert.deepEqual(oneDay.dailyBreakdown, [{ date: '2025-03-02', requests: 2 }]);
        const year = await statsOk(user.auth, '?startDate=2024-03-03&endDate=2025-03-03');
        assert.equal(year.dailyBreakdown.length, 366, '366 days (a leap year) is the most allowed');
      });

      test('filters: apiKeyId and network narrow every figure', async () => {
        const a = await createKey(t.app, { name: 'a' });
        const b = await createKey(t.app, { name: 'b' }, a.user);
        await rpc('native-mainnet', a.key, [call('eth_blockNumber', 1), call('eth_chainId', 2)]);
        await rpc('native-testnet', a.key, call('eth_chainId'));
        await rpc('native-mainnet', b.key, call('eth_gasPrice'));
        await flushNow();
        const auth = a.user.auth;
        assert.equal((await statsOk(auth)).totalRequests, 4);
        const onlyA = await statsOk(auth, `?apiKeyId=${a.id}`);
        assert.equal(onlyA.totalRequests, 3);
        assert.deepEqual(onlyA.requestsByMethod, { eth_blockNumber: 1, eth_chainId: 2 });
        const onlyTestnet = await statsOk(auth, '?network=native-testnet');
        assert.deepEqual(onlyTestnet.requestsByNetwork, { 'native-testnet': 1 });
        assert.equal(onlyTestnet.dailyBreakdown.at(-1)?.requests, 1);
        const bOnMainnet = await statsOk(auth, `?apiKeyId=${b.id}&network=native-mainnet`);
        assert.deepEqual(bOnMainnet.requestsByMethod, { eth_gasPrice: 1 });
        assert.deepEqual((await statsOk(auth, `?apiKeyId=${b.id}&network=native-testnet`)).requestsByNetwork, {});
      });

      test('every /usage/stats read and the key check are statements prepared once, by name, not built per call', async () => {
        const a = await createKey(t.app, { name: 'a' });
        await rpc('native-mainnet', a.key, call('eth_chainId'));
        await flushNow();
        type Session = Db['_']['session'];
        const prepared: Array<string | undefined> = [];
        const ran: Array<string | undefined> = [];
        const session = new Proxy(t.storage.db._.session, {
          get(target, prop) {
            if (prop === 'prepareQuery') {
              return (...args: Parameters<Session['prepareQuery']>) => {
                prepared.push(args[2]);
                const statement = target.prepareQuery(...args);
                const execute = statement.execute.bind(statement);
                statement.execute = (values?: Record<string, unknown>) => (ran.push(args[2]), execute(values));
                return statement;
              };
            }
            const v: unknown = Reflect.get(target, prop);
            return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v;
          },
        });
        // Once the service is made, a statement built per call would go through the database object itself.
        let made = false;
        const db = new Proxy(t.storage.db, {
          get(target, prop) {
            if (prop === '_') return { ...target._, session };
            if (prop === 'session') return session;
            if (made && (prop === 'execute' || prop === 'select')) throw new Error(`db.${prop} used: a statement built per call`);
            return Reflect.get(target, prop);
          },
        });
        const usage = new UsageQueries({ db, networkSlugs: t.config.networks.map((n) => n.slug) });
        made = true;
        const names = ['usage_stats_account', 'usage_stats_network', 'usage_stats_key', 'usage_stats_key_network', 'usage_owns_key'];
        assert.deepEqual([...prepared].sort(), [...names].sort());
        const day = new Date().toISOString().slice(0, 10);
        const q = { userId: a.user.id, start: day, end: day };
        const figures = [
          await usage.stats(q),
          await usage.stats({ ...q, network: 'native-mainnet' }),
          await usage.stats({ ...q, keyId: a.id }),
          await usage.stats({ ...q, keyId: a.id, network: 'native-mainnet' }),
        ].map((s) => s.totalRequests);
        assert.deepEqual(figures, [1, 1, 1, 1]);
        assert.equal(await usage.ownsKey(a.user.id, a.id), true);
        assert.deepEqual(ran, names);
        assert.equal(prepared.length, names.length, 'prepared at the start only');
      });

      test('another account’s requests never show, and its key id is 404', async () => {
        const mine = await createKey(t.app, { name: 'mine' });
        const theirs = await createKey(t.app, { name: 'theirs' });
        await rpc('native-mainnet', theirs.key, [call('eth_blockNumber', 1), call('eth_chainId', 2)]);
        await rpc('native-mainnet', mine.key, call('eth_gasPrice'));
        await flushNow();
        const s = await statsOk(mine.user.auth);
        assert.equal(s.totalRequests, 1);
        assert.deepEqual(s.requestsByMethod, { eth_gasPrice: 1 });
        assert.equal((await statsOk(theirs.user.auth)).totalRequests, 2);
        for (const keyId of [theirs.id, 'no-such-key']) {
          const res = await stats(mine.user.auth, `?apiKeyId=${keyId}`);
          assert.equal(res.statusCode, 404);
          assert.equal(res.json().error.code, 'NOT_FOUND');
        }
      });

      test('each invalid query is 400 in the C7 envelope naming the field', async () => {
        const u = await registerUser(t.app);
        const cases: Array<[string, string]> = [
          ['?startDate=2025-03-02&endDate=2025-03-01', 'querystring.startDate'],
          ['?startDate=2026-02-30', 'querystring.startDate'],
          ['?endDate=2025-13-01', 'querystring.endDate'],
          ['?endDate=2025-3-1', 'querystring.endDate'],
          ['?startDate=yesterday', 'querystring.startDate'],
          ['?startDate=0000-01-01&endDate=0000-01-02', 'querystring.startDate'],
          ['?startDate=2024-03-02&endDate=2025-03-03', 'querystring.endDate'], // 367 days
          ['?startDate=9999-12-20', 'querystring.endDate'], // derived end past 9999-12-31
          ['?network=no-such-chain', 'querystring.network'],
          ['?limit=5', 'querystring.limit'],
        ];
        for (const [query, field] of cases) {
          const res = await stats(u.auth, query);
          assert.equal(res.statusCode, 400, query);
          const body = res.json();
          assert.equal(body.success, false);
          assert.equal(body.error.code, 'VALIDATION_ERROR', query);
          assert.ok(
            (body.error.details as Array<{ field: string }>).some((d) => d.field === field),
            `${query}: ${JSON.stringify(body.error.details)}`,
          );
        }
      });

      test('needs a bearer token (401)', async () => {
        const res = await t.app.inject({ method: 'GET', url: '/api/v1/usage/stats' });
        assert.equal(res.statusCode, 401);
        assert.equal(res.json().success, false);
      });

      test('the OpenAPI document describes the query and the response', async () => {
        const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
        const op = doc.paths['/api/v1/usage/stats'].get;
        assert.deepEqual(op.parameters.map((p: { name: string }) => p.name).sort(), ['apiKeyId', 'endDate', 'network', 'startDate']);
        const data = op.responses['200'].content['application/json'].schema.properties.data;
        for (const f of ['period', 'totalRequests', 'requestsByNetwork', 'requestsByMethod', 'dailyBreakdown', 'totalComputeUnits']) assert.ok(f in data.properties, f);
      });
    });

    describe('flushing', () => {
      /** A service of our own on the app's storage, with a timer that never fires in the test. */
      const ownService = (db: Db = t.storage.db) => {
        const lines: string[] = [];
        const logger = pino(
          { level: 'warn' },
          new Writable({
            write(chunk, _e, cb) {
              lines.push(String(chunk));
              cb();
            },
          }),
        );
        return { usage: new UsageService({ db, settings: t.config.usage, logger }), lines };
      };
      const stored = async (keyId: string) => {
        const res = (await t.storage.db.execute(
          sql`select coalesce(sum(requests), 0)::int as n from usage_daily where key_id = ${keyId}`,
        )) as { rows: Array<{ n: number }> };
        return Number(res.rows[0]?.n);
      };
      const event = (k: { id: string; user: User }, method = 'eth_call') => ({ userId: k.user.id, keyId: k.id, network: 'native-mainnet', method, computeUnits: 2 });

      test('records made during a flush go to the next one; flushes never overlap', async () => {
        let active = 0;
        let most = 0;
        const db = new Proxy(t.storage.db, {
          get(target, prop, receiver) {
            if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
            return async (fn: Parameters<Db['transaction']>[0]) => {
              active++;
              most = Math.max(most, active);
              try {
                return await target.transaction(fn);
              } finally {
                active--;
              }
            };
          },
        });
        const k = await createKey(t.app, { name: 'busy' });
        const { usage } = ownService(db);
        usage.record(event(k));
        const first = usage.flush();
        usage.record(event(k)); // after the swap
        await first;
        assert.equal(await stored(k.id), 1);
        const flushes: Array<Promise<void>> = [];
        for (let i = 0; i < 5; i++) {
          usage.record(event(k));
          flushes.push(usage.flush());
        }
        await Promise.all(flushes);
        assert.equal(most, 1, 'one flush at a time');
        assert.equal(await stored(k.id), 7);
        await usage.close();
      });

      test('a failing flush loses nothing: the batch is kept, retried, and logged without secrets', async () => {
        const k = await createKey(t.app, { name: 'resilient' });
        const { usage, lines } = ownService();
        for (let i = 0; i < 3; i++) usage.record(event(k));
        usage.record(event(k, 'eth_getLogs'));
        // A real storage failure: the table is gone for a moment.
        await t.storage.db.execute(sql`alter table usage_daily rename to usage_daily_away`);
        try {
          const failing = usage.flush();
          usage.record(event(k)); // arrives while the batch is failing
          await assert.rejects(failing);
        } finally {
          await t.storage.db.execute(sql`alter table usage_daily_away rename to usage_daily`);
        }
        assert.equal(usage.pendingRows, 2, 'eth_call and eth_getLogs rows are pending again');
        assert.equal(await stored(k.id), 0);
        await usage.flush();
        assert.equal(await stored(k.id), 5);
        const keyRow = await keyList(k.user.auth);
        assert.notEqual(keyRow[0]?.lastUsedAt, null);
        const warn = lines.join('');
        assert.match(warn, /usage flush failed/);
        assert.ok(!warn.includes(k.user.id) && !warn.includes(k.key) && !/insert into/i.test(warn), warn);
        await usage.close();
      });

      test('lastUsedAt keeps the greatest of stored and new', async () => {
        const k = await createKey(t.app, { name: 'clock' });
        const { usage } = ownService();
        await t.storage.db.execute(sql`update api_keys set last_used_at = '2999-01-01T00:00:00Z' where id = ${k.id}`);
        usage.record(event(k));
        await usage.close();
        assert.equal((await keyList(k.user.auth))[0]?.lastUsedAt, '2999-01-01T00:00:00.000Z');
      });

      test('close() writes what was recorded: counts survive a restart on the same storage', async () => {
        const dir = backend.name === 'pglite' ? await mkdtemp(path.join(tmpdir(), 'junction-usage-')) : undefined;
        const pgdb = backend.name === 'postgres' ? await createTestDatabase() : undefined;
        const where = { backend: backend.name, env: { UPSTREAM_NATIVE_MAINNET: fake.url }, ...(dir ? { dataDir: dir } : {}), ...(pgdb ? { databaseUrl: pgdb.url } : {}) };
        try {
          const first = await startTestApp(where);
          const k = await createKey(first.app, { name: 'restart' });
          const res = await first.app.inject({ method: 'POST', url: `/v1/native-mainnet/${k.key}`, payload: [call('eth_blockNumber', 1), call('eth_chainId', 2)] });
          assert.equal(res.statusCode, 200);
          assert.equal(first.app.parts.usage.pendingRows, 2, 'not flushed yet: close() has to');
          await first.close();
          const second = await startTestApp(where);
          try {
            const s = (await second.app.inject({ method: 'GET', url: '/api/v1/usage/stats', headers: k.user.auth })).json().data as Stats;
            assert.equal(s.totalRequests, 2);
            assert.deepEqual(s.requestsByMethod, { eth_blockNumber: 1, eth_chainId: 1 });
          } finally {
            await second.close();
          }
        } finally {
          if (dir) await rm(dir, { recursive: true, force: true });
          await pgdb?.drop();
        }
      });
    });
  });
}
