// Tables of the webhooks feature (C37-C39); the SQL is src/storage/migrations/0005_webhooks.sql.
import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

/** What an endpoint narrows its events to (C38). */
export interface WebhookFilters {
  /** Network slugs; omitted: every network (whale.alert). */
  networks?: string[];
  /** Whole native units, a decimal string: smaller transfers are left out. */
  minValue?: string;
  /** Lower-case 0x addresses watched for address.activity (at most 1,000). */
  addresses?: string[];
}

/** One receiver of an account (C37). The signing secret only as AES-256-GCM ciphertext. */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description'),
    events: jsonb('events').$type<string[]>().notNull(),
    filters: jsonb('filters').$type<WebhookFilters>().notNull(),
    status: text('status').$type<'enabled' | 'disabled'>().notNull().default('enabled'),
    /** Why it is disabled: `owner`, `gone` (the receiver answered 410) or `failing` (C39). */
    disabledReason: text('disabled_reason'),
    secretCiphertext: text('secret_ciphertext').notNull(),
    /** The secret before the last rotation: it still signs until `previous_secret_expires_at`. */
    previousSecretCiphertext: text('previous_secret_ciphertext'),
    previousSecretExpiresAt: timestamp('previous_secret_expires_at', { withTimezone: true, mode: 'date' }),
    /** The first failed attempt since the last success; null while it works. */
    failingSince: timestamp('failing_since', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [index('webhook_endpoints_user_idx').on(t.userId)],
);

/** One event as sent: the exact body, signed again (with a new timestamp) on every attempt. */
export const webhookEvents = pgTable(
  'webhook_events',
  {
    /** The `webhook-id` header: the same on every attempt and for every endpoint (C39). */
    id: text('id').primaryKey(),
    type: text('type').notNull(),
    body: text('body').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [index('webhook_events_created_idx').on(t.createdAt)],
);

/**
 * The outbox (C39): one row per (event, endpoint), written in the publisher's transaction before
 * any attempt. A sender claims a due row by setting `claimed_until` (a lease) and `claim_token`
 * under `FOR UPDATE SKIP LOCKED`; a claimer that dies leaves the lease to run out, and the row is
 * claimed again.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    eventId: text('event_id')
      .notNull()
      .references(() => webhookEvents.id, { onDelete: 'cascade' }),
    endpointId: text('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    status: text('status').$type<'pending' | 'delivered' | 'failed'>().notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    /** When the next attempt is due; null once delivered or failed. */
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, mode: 'date' }).default(sql`now()`),
    claimedUntil: timestamp('claimed_until', { withTimezone: true, mode: 'date' }),
    claimToken: text('claim_token'),
    lastStatusCode: integer('last_status_code'),
    lastDurationMs: integer('last_duration_ms'),
    lastError: text('last_error'),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true, mode: 'date' }),
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event_endpoint_key').on(t.eventId, t.endpointId),
    index('webhook_deliveries_due_idx').on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.createdAt),
    index('webhook_deliveries_created_idx').on(t.createdAt),
  ],
);

/** Every attempt of a delivery: when, the outcome, the HTTP status, how long it took (C39). */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    deliveryId: text('delivery_id')
      .notNull()
      .references(() => webhookDeliveries.id, { onDelete: 'cascade' }),
    attempt: integer('attempt').notNull(),
    at: timestamp('at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    statusCode: integer('status_code'),
    durationMs: integer('duration_ms').notNull(),
    error: text('error'),
    /** When the next attempt is due after this one; null: none (delivered, failed). */
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [primaryKey({ name: 'webhook_attempts_pkey', columns: [t.deliveryId, t.attempt] })],
);

/**
 * usage.quota notices already published (C38): one row per (account, period, threshold), so a
 * restart or a second instance does not send one twice.
 */
export const webhookQuotaNotices = pgTable(
  'webhook_quota_notices',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** `daily:YYYY-MM-DD` or `monthly:YYYY-MM`. */
    period: text('period').notNull(),
    threshold: integer('threshold').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [primaryKey({ name: 'webhook_quota_notices_pkey', columns: [t.userId, t.period, t.threshold] })],
);
