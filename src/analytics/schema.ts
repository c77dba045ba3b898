// Tables of analytics (C46); the SQL is src/storage/migrations/0007_analytics.sql. The recorder and
// the store query them in SQL (upserts that merge histograms element-wise), so these objects are
// above all what drizzle-kit compares a changed schema with.
import { bigint, date, index, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

/**
 * The columns of one (account, key, network, method, period) row, in the migration's order: the
 * counters (requests, compute units, node and upstream errors, refusals by reason) and the latency
 * histogram (bucket counts, `histogram.ts`). `key_id` has no foreign key, as in usage: a deleted
 * key's rows stay.
 */
const row = <P extends object>(period: P) => ({
  userId: text('user_id')
    .notNull()
    .references(() => users.id, { onDelete: 'cascade' }),
  keyId: text('key_id').notNull(),
  network: text('network').notNull(),
  method: text('method').notNull(),
  // The period's column comes here, where the migration's CREATE TABLE has it.
  ...period,
  requests: bigint('requests', { mode: 'number' }).notNull().default(0),
  computeUnits: bigint('compute_units', { mode: 'number' }).notNull().default(0),
  errorsNode: bigint('errors_node', { mode: 'number' }).notNull().default(0),
  errorsUpstream: bigint('errors_upstream', { mode: 'number' }).notNull().default(0),
  refusedRate: bigint('refused_rate', { mode: 'number' }).notNull().default(0),
  refusedQuota: bigint('refused_quota', { mode: 'number' }).notNull().default(0),
  refusedKey: bigint('refused_key', { mode: 'number' }).notNull().default(0),
  refusedNetwork: bigint('refused_network', { mode: 'number' }).notNull().default(0),
  refusedMethod: bigint('refused_method', { mode: 'number' }).notNull().default(0),
  // C46a: the key's own allowlists (origin, IP, JWT, method and contract lists).
  refusedAccess: bigint('refused_access', { mode: 'number' }).notNull().default(0),
  latency: bigint('latency', { mode: 'number' }).array().notNull().default([]),
});

/** Per UTC hour, kept `HOURLY_RETENTION_DAYS` (store.ts). */
export const analyticsHourly = pgTable(
  'analytics_hourly',
  row({ hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull() }),
  (t) => [
    // The upsert's conflict target.
    primaryKey({ name: 'analytics_hourly_pkey', columns: [t.userId, t.keyId, t.hour, t.network, t.method] }),
    index('analytics_hourly_user_hour_idx').on(t.userId, t.hour),
    // Retention sweep.
    index('analytics_hourly_hour_idx').on(t.hour),
  ],
);

/** Per UTC day, kept `DAILY_RETENTION_DAYS` (store.ts). */
export const analyticsDaily = pgTable(
  'analytics_daily',
  row({ day: date('day', { mode: 'string' }).notNull() }),
  (t) => [
    primaryKey({ name: 'analytics_daily_pkey', columns: [t.userId, t.keyId, t.day, t.network, t.method] }),
    index('analytics_daily_user_day_idx').on(t.userId, t.day),
    index('analytics_daily_day_idx').on(t.day),
  ],
);
