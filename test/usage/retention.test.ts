// For scale (docs/scaling.md): usage rows past retention are swept in bounded batches; what a start reads to seed the
// quotas is the current month only (through the (day) index, whatever the stored history); the key
// cache is bounded and drops the least recently used key. The modules as the app makes them
// (UsageRetention, UsageQueries, KeyService and KeyCache), on real storage of both kinds.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { AccountService } from '../../src/auth/accounts.ts';
import { Networks } from '../../src/chains/networks.ts';
import { loadConfig } from '../../src/config/load.ts';
import { KeyCache } from '../../src/keys/cache.ts';
import { KeyService } from '../../src/keys/service.ts';
import { deleteInBatches } from '../../src/storage/batched-delete.ts';
import type { Storage } from '../../src/storage/db.ts';
import { UsageQueries } from '../../src/usage/queries.ts';
import { UsageRetention } from '../../src/usage/retention.ts';
import { storageBackends } from '../support/services.ts';
import { openTestStorage } from '../support/storage.ts';

const backends = await storageBackends();
const DAY_MS = 86_400_000;
const daysAgo = (n: number) => new Date(Date.now() - n * DAY_MS).toISOString().slice(0, 10);
const today = () => daysAgo(0);
const logger = pino({ level: 'silent' });
const config = loadConfig({ env: {} });
let emails = 0;

for (const backend of backends) {
  describe(`usage retention and quota seeding on ${backend.name}`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: () => Promise<void>;
    let accounts: AccountService;
    let keys: KeyService;
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
      // Cheap password hashes (2^10): hashing is not what is tested here.
      accounts = new AccountService(storage.db, { passwordHashCost: 10 });
      const networks = new Networks(config, () => 'http://localhost:8080');
      keys = new KeyService({ db: storage.db, settings: config, networks, encryptionSecret: 'retention-test-key-secret-0123456789abcdef' });
    });
    after(() => close?.());
    /** A free account, as registration makes it. */
    const registerUser = () => accounts.register({ email: `retention.${emails++}.${Date.now()}@example.com`, password: 'correct horse battery', name: 'R' });

    // The account-wide sums (usage_account_daily) follow by the table's trigger (migration 0015).
    const insert = (userId: string, keyId: string, day: string, requests: number, method = 'eth_call') =>
      storage.db.execute(sql`insert into usage_daily (user_id, key_id, network, method, day, requests, compute_units)
        values (${userId}, ${keyId}, 'ethereum', ${method}, ${day}::date, ${requests}, ${requests * 10})`);
    const days = async (userId: string) =>
      ((await storage.db.execute(sql`select day::text as day from usage_daily where user_id = ${userId} order by day`)) as { rows: Array<{ day: string }> }).rows.map((r) => r.day);

    test('the sweep deletes the rows of days before the retention, in batches, and keeps the rest', async () => {
      const user = await registerUser();
      for (const n of [0, 30, 399]) await insert(user.id, 'k1', daysAgo(n), 1);
      for (const [i, n] of [400, 401, 800, 2000, 5000].entries()) await insert(user.id, 'k1', daysAgo(n), 1, `m${i}`);
      const retention = new UsageRetention({ db: storage.db, logger, retentionDays: 400 });
      assert.equal(retention.oldestDay(), daysAgo(399));
      // Batches of 2: three statements for five old rows.
      assert.equal(await deleteInBatches(storage.db, 'usage_daily', sql`user_id = ${user.id} and day < ${daysAgo(399)}::date`, 2), 5);
      assert.deepEqual(await days(user.id), [daysAgo(399), daysAgo(30), daysAgo(0)]);
      // The sweep as the gateway runs it: 32 days kept, nothing else of this account's recent rows touched.
      await new UsageRetention({ db: storage.db, logger, retentionDays: 32 }).sweep();
      assert.deepEqual(await days(user.id), [daysAgo(30), daysAgo(0)]);
      // The account-wide sums of the swept days go with them.
      const accountDays = (await storage.db.execute(sql`select day::text as day from usage_account_daily where user_id = ${user.id} order by day`)) as { rows: Array<{ day: string }> };
      assert.deepEqual(accountDays.rows.map((r) => r.day), [daysAgo(30), daysAgo(0)]);
    });

    test('the quotas are seeded from the current month only, whatever history is stored', async () => {
      const user = await registerUser();
      const monthStart = `${today().slice(0, 7)}-01`;
      const lastMonth = new Date(Date.parse(`${monthStart}T00:00:00Z`) - DAY_MS).toISOString().slice(0, 10);
      await insert(user.id, 'k1', today(), 5);
      await insert(user.id, 'k2', today(), 2);
      if (monthStart !== today()) await insert(user.id, 'k1', monthStart, 7);
      await insert(user.id, 'k1', lastMonth, 1000);
      await insert(user.id, 'k1', daysAgo(700), 100_000);
      const usageQueries = new UsageQueries({ db: storage.db, networkSlugs: config.networks.map((n) => n.slug) });
      const mine = (await usageQueries.quotaUsage()).find((r) => r.userId === user.id);
      const month = 5 + 2 + (monthStart !== today() ? 7 : 0);
      assert.deepEqual(mine, { userId: user.id, requestsToday: 7, computeUnitsThisMonth: month * 10 });
    });

    if (backend.name === 'postgres') {
      test("a start's read of stored usage goes through the (day) index, not over the whole history", async () => {
        const user = await registerUser();
        // Years of history for one account, a few rows this month.
        await storage.db.execute(sql`insert into usage_daily (user_id, key_id, network, method, day, requests, compute_units)
          select ${user.id}, 'k' || (g % 50), 'ethereum', 'eth_call', current_date - 40 - (g / 50), 1, 1 from generate_series(0, 49999) g`);
        await insert(user.id, 'k1', today(), 1);
        await storage.db.execute(sql`analyze usage_daily`);
        // UsageService.quotaUsage's statement.
        const plan = (await storage.db.execute(sql`explain (format json)
          select user_id, coalesce(sum(requests) filter (where day = ${today()}::date), 0), sum(compute_units)
          from usage_daily where day >= ${`${today().slice(0, 7)}-01`}::date and day <= ${today()}::date group by user_id`)) as { rows: Array<Record<string, unknown>> };
        const text = JSON.stringify(plan.rows);
        assert.match(text, /usage_daily_day_idx/);
        assert.doesNotMatch(text, /Seq Scan/);
      });
    }

    test('the key cache holds at most its bound and drops the least recently used key', async () => {
      const cache = new KeyCache(keys, config.plans, { ttlMs: 60_000, maxEntries: 2 });
      const user = await registerUser();
      const createKey = async (name: string) => {
        const row = await keys.create(user.id, { name });
        return { id: row.id, key: keys.decryptKey(row) };
      };
      const [a, b, c] = [await createKey('a'), await createKey('b'), await createKey('c')];
      assert.equal((await cache.lookup(a.key))?.keyId, a.id);
      assert.equal((await cache.lookup(b.key))?.keyId, b.id);
      assert.equal(cache.misses, 2);
      // a used again: b is now the least recently used, and c pushes it out.
      assert.equal((await cache.lookup(a.key))?.keyId, a.id);
      assert.equal((await cache.lookup(c.key))?.keyId, c.id);
      assert.equal(cache.misses, 3);
      assert.notEqual(cache.peek(a.key), undefined);
      assert.equal(cache.peek(b.key), undefined);
      assert.equal((await cache.lookup(b.key))?.keyId, b.id);
      cache.close();
    });
  });
}
