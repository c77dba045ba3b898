// C46, C27: the answers of /usage/analytics and /usage/stats kept one flush interval
// (src/analytics/answer-cache.ts) on real storage: a flush of this instance drops them at once;
// what another instance stores shows within one interval. The cache on its own:
// test/analytics/answer-cache.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { AnalyticsRecorder, OK } from '../../src/analytics/recorder.ts';
import type { Analytics } from '../../src/analytics/store.ts';
import type { UsageStats } from '../../src/usage/queries.ts';
import { UsageService } from '../../src/usage/service.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const backends = await storageBackends();
const ADMIN_TOKEN = 'answer-cache-test-admin-token-0123456789';
const today = () => new Date().toISOString().slice(0, 10);

for (const backend of backends) {
  describe(`kept answers of /usage/analytics and /usage/stats on ${backend.name} (C46, C27)`, { skip: backend.skip }, () => {
    let t: TestApp;
    before(async () => {
      // The largest flush interval (2 s): an answer is kept that long.
      t = await startTestApp({ backend: backend.name, env: { ADMIN_TOKEN }, overrides: { usage: { flushIntervalMs: 2000 } } });
    });
    after(async () => {
      await t?.close();
    });

    const account = async () => {
      const user = await registerUser(t.app);
      await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
      const { id } = await createKey(t.app, { name: 'kept' }, user);
      return { user, keyId: id };
    };
    const get = async <T>(auth: { authorization: string }, path: string): Promise<T> => {
      const res = await t.app.inject({ method: 'GET', url: `/api/v1${path}`, headers: auth });
      assert.equal(res.statusCode, 200, res.body);
      return res.json().data as T;
    };
    const analyticsRequests = async (auth: { authorization: string }) =>
      (await get<Analytics>(auth, `/usage/analytics?startDate=${today()}&endDate=${today()}&granularity=hour`)).series.reduce((n, s) => n + s.requests, 0);
    const statsRequests = async (auth: { authorization: string }) => (await get<UsageStats>(auth, '/usage/stats')).totalRequests;
    /** Calls of the account recorded by `usage` (the app's, or another instance's). */
    const record = (usage: UsageService, userId: string, keyId: string, n: number) => {
      for (let i = 0; i < n; i++) {
        usage.record({ userId, keyId, network: 'ethereum', method: 'eth_call', computeUnits: 1 });
        usage.analytics!.call(userId, keyId, 'ethereum', 'eth_call', 1, OK, 5);
      }
    };

    test('a flush of this instance shows at once: the answers it makes stale are dropped', async () => {
      const { user, keyId } = await account();
      const usage = t.app.parts.usage;
      record(usage, user.id, keyId, 3);
      await usage.flush();
      assert.equal(await analyticsRequests(user.auth), 3);
      assert.equal(await statsRequests(user.auth), 3);
      // Kept now; the next flush of the account must not leave them behind.
      record(usage, user.id, keyId, 4);
      await usage.flush();
      assert.equal(await analyticsRequests(user.auth), 7);
      assert.equal(await statsRequests(user.auth), 7);
    });

    test('an answer is kept as the body sent: one string, byte for byte what the client read, and served again as it is', async () => {
      const { user } = await account();
      const kept = t.app.parts.answers;
      for (const [cache, path] of [
        [kept.analytics, `/usage/analytics?startDate=${today()}&endDate=${today()}&granularity=hour`],
        [kept.stats, '/usage/stats'],
      ] as const) {
        const first = await t.app.inject({ method: 'GET', url: `/api/v1${path}`, headers: user.auth });
        assert.equal(first.statusCode, 200, first.body);
        assert.equal(first.headers['content-type'], 'application/json; charset=utf-8');
        // What the route's schema writes: the envelope, every bucket of the day.
        const body = first.json<{ success: boolean; data: { series?: unknown[] } }>();
        assert.equal(body.success, true);
        if (path.includes('analytics')) assert.equal(body.data.series?.length, 24);
        // Kept as that text, not as the objects it was written from.
        assert.ok([...cache.kept()].includes(first.body), `${path}: the body sent is what is kept`);
        assert.ok([...cache.kept()].every((v) => typeof v === 'string'));
        const computed = cache.computed;
        const again = await t.app.inject({ method: 'GET', url: `/api/v1${path}`, headers: user.auth });
        assert.equal(again.body, first.body);
        assert.equal(again.headers['content-type'], 'application/json; charset=utf-8');
        assert.equal(cache.computed, computed, `${path}: served from the kept body, no query`);
      }
    });

    test('what another instance stores shows within one flush interval of the answer kept, and the kept answer is served meanwhile', async () => {
      const { user, keyId } = await account();
      const ttl = t.config.usage.flushIntervalMs;
      const started = Date.now();
      assert.equal(await analyticsRequests(user.auth), 0);
      assert.equal(await statsRequests(user.auth), 0);
      const read = Date.now();
      // Another instance: its own usage service on the same database, whose flush this app does not see.
      const other = new UsageService({ db: t.storage.db, settings: t.config.usage, logger: pino({ level: 'silent' }), analytics: new AnalyticsRecorder(['eth_call']) });
      record(other, user.id, keyId, 5);
      await other.flush();
      const seen: Array<{ at: number; analytics: number; stats: number }> = [];
      await waitFor(
        async () => {
          const at = Date.now();
          const s = { at, analytics: await analyticsRequests(user.auth), stats: await statsRequests(user.auth) };
          seen.push(s);
          return s.analytics === 5 && s.stats === 5;
        },
        { intervalMs: 50, what: 'the other instance’s calls in the answers' },
      );
      const old = seen.filter((s) => s.analytics === 0 || s.stats === 0);
      // Kept answers are served (the queries were asked within the interval of the first read)...
      if (seen[0]!.at < started + ttl / 2) assert.ok(old.length > 0, `the kept answers were served: ${JSON.stringify(seen.slice(0, 3))}`);
      // ...but never to a request made later than one interval after their read.
      for (const s of old) assert.ok(s.at < read + ttl, `an answer older than ${ttl} ms was served ${s.at - read} ms after its read`);
    });
  });
}
