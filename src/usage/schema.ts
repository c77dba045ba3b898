// The tables of stored usage (C21, C27): per key and day, and summed per account.
import { bigint, date, index, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

/**
 * Usage counts per (account, key, network, method, UTC day) (C21, C27), written in batches by
 * `UsageService`. `key_id` has no foreign key on purpose: a deleted key's rows stay, so the
 * account's statistics still count what it used; an account deleted takes its rows with it.
 */
export const usageDaily = pgTable(
  'usage_daily',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    network: text('network').notNull(),
    method: text('method').notNull(),
    day: date('day', { mode: 'string' }).notNull(),
    requests: bigint('requests', { mode: 'number' }).notNull().default(0),
    computeUnits: bigint('compute_units', { mode: 'number' }).notNull().default(0),
  },
  (t) => [
    // The upsert's conflict target; its (user, key, day) prefix also serves the key list and apiKeyId filter.
    primaryKey({ name: 'usage_daily_pkey', columns: [t.userId, t.keyId, t.day, t.network, t.method] }),
    // Account-wide statistics over a date range.
    index('usage_daily_user_day_idx').on(t.userId, t.day),
    // For scale (docs/scaling.md): the quota seeding at start (UsageQueries.quotaUsage) and the retention sweep read a
    // range of days through it, so what a start reads does not grow with the stored history.
    index('usage_daily_day_idx').on(t.day),
  ],
);

/**
 * For scale (docs/scaling.md): the same counts summed over the account's keys, per (account, UTC day, network,
 * method) (C27). Kept by a trigger on `usage_daily` (migration 0015): every row written there,
 * by this version or an older one still running during a rolling deploy, adds its difference
 * here in the same transaction. What an account-wide question reads (GET /usage/stats without
 * `apiKeyId`, the quotas seeded at start, the usage.quota webhook's sums): an account with ten
 * keys has a tenth of the rows to read here.
 */
export const usageAccountDaily = pgTable(
  'usage_account_daily',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    day: date('day', { mode: 'string' }).notNull(),
    network: text('network').notNull(),
    method: text('method').notNull(),
    requests: bigint('requests', { mode: 'number' }).notNull().default(0),
    computeUnits: bigint('compute_units', { mode: 'number' }).notNull().default(0),
  },
  (t) => [
    // The upsert's conflict target; its (user, day) prefix serves a period's statistics.
    primaryKey({ name: 'usage_account_daily_pkey', columns: [t.userId, t.day, t.network, t.method] }),
    // The quota seeding at start and the retention sweep read a range of days.
    index('usage_account_daily_day_idx').on(t.day),
  ],
);
