// Tables of analytics (C46); the SQL is src/storage/migrations/0012_analytics_compact.sql, which
// replaced 0007's analytics_hourly and analytics_daily (for scale, docs/scaling.md: at most 150 bytes a stored row,
// indexes included; their rows carried over, the tables dropped by 0013). The
// recorder and the store query them in SQL (upserts that merge histograms in SQL), so these
// objects are above all what drizzle-kit compares a changed schema with.
import { bigint, customType, date, index, integer, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

const bytea = customType<{ data: string; driverData: string }>({ dataType: () => 'bytea' });

/**
 * The (account, key, network, method) combinations that have analytics rows, each numbered once:
 * a row carries that number (4 bytes) instead of four texts. `key_id` has no foreign key, as in
 * usage: a deleted key's rows stay. Never deleted but with the account.
 */
export const analyticsSeries = pgTable(
  'analytics_series',
  {
    id: integer('id').primaryKey().generatedAlwaysAsIdentity(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    network: text('network').notNull(),
    method: text('method').notNull(),
  },
  // The recorder's lookup, and an account's (and key's) series for the reads.
  (t) => [uniqueIndex('analytics_series_user_key_network_method_idx').on(t.userId, t.keyId, t.network, t.method)],
);

/**
 * The counters of one (series, period) row, in the migration's order: the 8-byte counters first
 * (no alignment padding), each NULL when zero (a row pays 8 bytes of null bitmap, not 8 per zero
 * counter: errors and refusals are mostly zero); then the series and the period (4 bytes each);
 * then the latency histogram, sparse (`histogram.ts`, `encodeLatency`).
 */
const counters = {
  requests: bigint('requests', { mode: 'number' }),
  computeUnits: bigint('compute_units', { mode: 'number' }),
  errorsNode: bigint('errors_node', { mode: 'number' }),
  errorsUpstream: bigint('errors_upstream', { mode: 'number' }),
  refusedRate: bigint('refused_rate', { mode: 'number' }),
  refusedQuota: bigint('refused_quota', { mode: 'number' }),
  refusedKey: bigint('refused_key', { mode: 'number' }),
  refusedNetwork: bigint('refused_network', { mode: 'number' }),
  refusedMethod: bigint('refused_method', { mode: 'number' }),
  // C46a: the key's own allowlists (origin, IP, JWT, method and contract lists).
  refusedAccess: bigint('refused_access', { mode: 'number' }),
};
const series = () =>
  integer('series')
    .notNull()
    .references(() => analyticsSeries.id, { onDelete: 'cascade' });

/** Per UTC hour, kept `HOURLY_RETENTION_DAYS` (store.ts). `hour` counts hours since 1970-01-01 UTC. */
export const analyticsHourly = pgTable(
  'analytics_hours',
  { ...counters, series: series(), hour: integer('hour').notNull(), latency: bytea('latency').notNull() },
  (t) => [
    // The upsert's conflict target and the reads' range (series, hours).
    primaryKey({ name: 'analytics_hours_pkey', columns: [t.series, t.hour] }),
    // Retention sweep: rows go in roughly in hour order, so a block range index is enough.
    index('analytics_hours_hour_idx').using('brin', t.hour),
  ],
);

/** Per UTC day, kept `DAILY_RETENTION_DAYS` (store.ts). */
export const analyticsDaily = pgTable(
  'analytics_days',
  { ...counters, series: series(), day: date('day', { mode: 'string' }).notNull(), latency: bytea('latency').notNull() },
  (t) => [primaryKey({ name: 'analytics_days_pkey', columns: [t.series, t.day] }), index('analytics_days_day_idx').using('brin', t.day)],
);

const account = () =>
  text('user_id')
    .notNull()
    .references(() => users.id, { onDelete: 'cascade' });

/**
 * For scale (docs/scaling.md): an account's rows of every series summed per UTC hour (a roll-up, written in the same
 * flush as `analytics_hours`, migration 0014), so a query without a key, network or method reads
 * one row per bucket. Kept as long as the hourly rows.
 */
export const analyticsAccountHours = pgTable(
  'analytics_account_hours',
  { ...counters, userId: account(), hour: integer('hour').notNull(), latency: bytea('latency').notNull() },
  (t) => [primaryKey({ name: 'analytics_account_hours_pkey', columns: [t.userId, t.hour] }), index('analytics_account_hours_hour_idx').using('brin', t.hour)],
);

/** The same per UTC day, kept as long as the daily rows. */
export const analyticsAccountDays = pgTable(
  'analytics_account_days',
  { ...counters, userId: account(), day: date('day', { mode: 'string' }).notNull(), latency: bytea('latency').notNull() },
  (t) => [primaryKey({ name: 'analytics_account_days_pkey', columns: [t.userId, t.day] }), index('analytics_account_days_day_idx').using('brin', t.day)],
);

/**
 * For scale (docs/scaling.md): a key's hourly rows (of every network and method) summed per UTC hour, written in the
 * same flush as `analytics_hours` (migration 0017), so a query by key alone reads one row per hour
 * instead of one per series and hour. Kept as long as the hourly rows.
 */
export const analyticsKeyHours = pgTable(
  'analytics_key_hours',
  { ...counters, userId: account(), keyId: text('key_id').notNull(), hour: integer('hour').notNull(), latency: bytea('latency').notNull() },
  (t) => [primaryKey({ name: 'analytics_key_hours_pkey', columns: [t.userId, t.keyId, t.hour] }), index('analytics_key_hours_hour_idx').using('brin', t.hour)],
);

/**
 * For scale (docs/scaling.md): an account's daily rows summed per key, per network and per method (one row each per
 * UTC day, `kind` saying which, in one letter, and `name` its id or name), written in the same flush as
 * `analytics_days` (migration 0016), so the breakdowns of a query without a key, network or method
 * read one row per key, network and method and day instead of one per series and day. A key's
 * rows carry no histogram (byKey shows no latency: C46). Kept as long as the daily rows.
 */
export const analyticsAccountDayParts = pgTable(
  'analytics_account_day_parts',
  {
    ...counters,
    userId: account(),
    day: date('day', { mode: 'string' }).notNull(),
    // One letter (a row's bytes count at scale): k a key (its id in `name`), n a network, m a method.
    kind: text('kind', { enum: ['k', 'n', 'm'] }).notNull(),
    name: text('name').notNull(),
    latency: bytea('latency').notNull(),
  },
  (t) => [
    primaryKey({ name: 'analytics_account_day_parts_pkey', columns: [t.userId, t.day, t.kind, t.name] }),
    index('analytics_account_day_parts_day_idx').using('brin', t.day),
  ],
);
