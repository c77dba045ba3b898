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

    test("a key filter reads the key's ownership only when no row of the key under the account proves it (C7); a kept answer reads nothing", async () => {
      const { user, keyId } = await account();
      const stranger = await account();
      const { analyticsStore, usageQueries } = t.app.parts;
      const owns: string[] = [];
      const count = (reader: { ownsKey(userId: string, keyId: string): Promise<boolean> }, name: string) => {
        const ownsKey = reader.ownsKey.bind(reader);
        reader.ownsKey = (userId: string, id: string) => {
          owns.push(name);
          return ownsKey(userId, id);
        };
      };
      count(analyticsStore, 'analytics');
      count(usageQueries, 'stats');
      const paths = (id: string) => [`/usage/analytics?apiKeyId=${id}&startDate=${today()}&endDate=${today()}&granularity=hour`, `/usage/stats?apiKeyId=${id}`];
      const ask = async (auth: { authorization: string }, id: string) => {
        owns.length = 0;
        const res = await Promise.all(paths(id).map((url) => t.app.inject({ method: 'GET', url: `/api/v1${url}`, headers: auth })));
        return { status: res.map((r) => r.statusCode), bodies: res.map((r) => r.json()), owns: [...owns].sort() };
      };
      // A key without rows: its ownership is read, the (empty) answers are 200.
      const empty = await ask(user.auth, keyId);
      assert.deepEqual(empty.status, [200, 200], JSON.stringify(empty.bodies));
      assert.deepEqual(empty.owns, ['analytics', 'stats']);
      // Another account's key, and one that never existed: 404 on both, after the ownership read.
      for (const id of [keyId, '00000000-0000-4000-8000-000000000000']) {
        const foreign = await ask(stranger.user.auth, id);
        assert.deepEqual(foreign.status, [404, 404], JSON.stringify(foreign.bodies));
        assert.deepEqual(foreign.bodies.map((b) => b.error.code), ['NOT_FOUND', 'NOT_FOUND']);
        assert.deepEqual(foreign.owns, ['analytics', 'stats']);
      }
      // The key's calls stored (a flush drops the kept answers): its rows prove it, no ownership read.
      record(t.app.parts.usage, user.id, keyId, 3);
      await t.app.parts.usage.flush();
      const used = await ask(user.auth, keyId);
      assert.deepEqual(used.status, [200, 200], JSON.stringify(used.bodies));
      assert.equal(used.bodies[0].data.byKey[0].requests, 3);
      assert.equal(used.bodies[1].data.totalRequests, 3);
      assert.deepEqual(used.owns, []);
      // Kept: served again with no read at all.
      const computed = [t.app.parts.answers.analytics.computed, t.app.parts.answers.stats.computed];
      const again = await ask(user.auth, keyId);
      assert.deepEqual(again.status, [200, 200]);
      assert.deepEqual(again.owns, []);
      assert.deepEqual([t.app.parts.answers.analytics.computed, t.app.parts.answers.stats.computed], computed);
      // The stranger is still refused after the key has rows, and no refusal is kept.
      const still = await ask(stranger.user.auth, keyId);
      assert.deepEqual(still.status, [404, 404]);
      assert.deepEqual(still.owns, ['analytics', 'stats']);
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
