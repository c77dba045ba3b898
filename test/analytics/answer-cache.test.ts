// C46, C27: answers of /usage/analytics and /usage/stats kept one flush interval (answer-cache.ts):
// one storage query for identical concurrent ones, never served past their time, dropped by a
// flush of their account. The class on a clock of its own, then the routes on real storage.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { AnswerCache } from '../../src/analytics/answer-cache.ts';
import { AnalyticsRecorder, OK } from '../../src/analytics/recorder.ts';
import type { Analytics } from '../../src/analytics/store.ts';
import type { UsageStats } from '../../src/usage/queries.ts';
import { UsageService } from '../../src/usage/service.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { manualClock } from '../support/clock.ts';

/** A promise and its resolver: a storage query that answers when the test says so. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('AnswerCache (C46)', () => {
  const TTL = 2000;
  const clock = () => manualClock(1_000_000);

  test('identical queries asked together make one storage query; another query or account makes its own', async () => {
    const cache = new AnswerCache<number>({ ttlMs: TTL });
    const q = deferred<number>();
    let calls = 0;
    const compute = () => (calls++, q.promise);
    const asked = [cache.get('u1', 'a', compute), cache.get('u1', 'a', compute), cache.get('u1', 'a', compute)];
    const other = [cache.get('u1', 'b', async () => (calls++, 2)), cache.get('u2', 'a', async () => (calls++, 3))];
    q.resolve(1);
    assert.deepEqual(await Promise.all(asked), [1, 1, 1]);
    assert.deepEqual(await Promise.all(other), [2, 3]);
    assert.equal(calls, 3);
    assert.equal(cache.computed, 3);
  });

  test('an answer is served until one interval after its storage read, never later; in the second half it is read again behind the scenes', async () => {
    const c = clock();
    const cache = new AnswerCache<string>({ ttlMs: TTL, now: c.now });
    let version = 'v1';
    let reads = 0;
    const compute = async () => (reads++, version);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    // Stored elsewhere meanwhile (another instance's flush): the kept answer is served within the interval.
    version = 'v2';
    c.advance(TTL / 2 - 1);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    assert.equal(reads, 1);
    // Second half: still the kept answer at once, and a read behind it.
    c.advance(1);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    await new Promise((r) => setImmediate(r));
    assert.equal(reads, 2);
    assert.equal(await cache.get('u', 'q', compute), 'v2');
    // Not asked for a whole interval: never served past its time, read again before answering.
    version = 'v3';
    c.advance(TTL);
    assert.equal(await cache.get('u', 'q', compute), 'v3');
    assert.equal(reads, 3);
  });

  test('a flush of the account drops its answers at once; a query under way then is not kept, nor joined', async () => {
    const c = clock();
    const cache = new AnswerCache<string>({ ttlMs: TTL, now: c.now });
    assert.equal(await cache.get('u', 'q', async () => 'before'), 'before');
    assert.equal(await cache.get('other', 'q', async () => 'other'), 'other');
    // A query reading storage when the flush commits.
    const slow = deferred<string>();
    cache.invalidate(new Set(['u']));
    const racing = cache.get('u', 'q', () => slow.promise);
    cache.invalidate(new Set(['u']));
    // Asked after the flush: its own read, not the one under way.
    assert.equal(await cache.get('u', 'q', async () => 'after'), 'after');
    slow.resolve('racing');
    assert.equal(await racing, 'racing', 'those who asked before the flush get the read they waited for');
    assert.equal(await cache.get('u', 'q', async () => 'never'), 'after', 'the read that raced the flush is not kept over the later one');
    // Another account's answers stay.
    assert.equal(await cache.get('other', 'q', async () => 'never'), 'other');
    assert.equal(cache.size, 2);
  });

  test('a failed storage query is not kept', async () => {
    const cache = new AnswerCache<string>({ ttlMs: TTL });
    await assert.rejects(cache.get('u', 'q', async () => Promise.reject(new Error('storage away'))));
    assert.equal(await cache.get('u', 'q', async () => 'back'), 'back');
  });

  test('at most maxEntries answers are kept, the oldest dropped first', async () => {
    const cache = new AnswerCache<number>({ ttlMs: TTL, maxEntries: 2 });
    for (const q of ['a', 'b', 'c']) await cache.get('u', q, async () => 1);
    assert.equal(cache.size, 2);
    let reads = 0;
    await cache.get('u', 'a', async () => (reads++, 1));
    await cache.get('u', 'c', async () => (reads++, 1));
    assert.equal(reads, 1, 'a was dropped, c kept');
  });
});

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
