// The table of whale alerts (C35).
import { bigint, index, integer, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

/**
 * Whale alerts (C35): native-coin transfers of at least `whaleAlerts.recordMinValue` on a
 * whale-alert network, one row per (network, txHash), written by the block follower in the
 * transaction that moves its cursor. Kept `whaleAlerts.retentionDays` after the block's time.
 */
export const whaleAlerts = pgTable(
  'whale_alerts',
  {
    /** Opaque and stable: derived from (network, txHash), the same on every instance. */
    id: text('id').primaryKey(),
    network: text('network').notNull(),
    txHash: text('tx_hash').notNull(),
    /** Lower-case 0x. */
    fromAddress: text('from_address').notNull(),
    /** Lower-case 0x. */
    toAddress: text('to_address').notNull(),
    /** Wei, exact: `minValue` filters on it in SQL. */
    valueWei: numeric('value_wei', { precision: 78, scale: 0 }).notNull(),
    /** Whole native units as a decimal string, exact (what the API returns). */
    value: text('value').notNull(),
    /** USD at the price when recorded, to the cent; null without a price. */
    valueUsd: numeric('value_usd', { precision: 38, scale: 2 }),
    blockNumber: bigint('block_number', { mode: 'number' }).notNull(),
    /** Position in the block: orders alerts of one block. */
    txIndex: integer('tx_index').notNull(),
    /** The block's timestamp. */
    blockTime: timestamp('block_time', { withTimezone: true, mode: 'date' }).notNull(),
    recordedAt: timestamp('recorded_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [
    // C35: one record per (network, txHash), whatever instance or retry writes it.
    uniqueIndex('whale_alerts_tx_key').on(t.network, t.txHash),
    // C36: newest first per network, and `before` pages back from a (block, index).
    index('whale_alerts_order_idx').on(t.network, t.blockNumber.desc(), t.txIndex.desc()),
    // Retention sweep.
    index('whale_alerts_block_time_idx').on(t.blockTime),
  ],
);
