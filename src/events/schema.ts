// The block follower's tables (C33): each network's cursor and the lease of who follows it.
import { bigint, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * C33: where the block follower is on each network. `next_block` is the next block to hand to
 * the consumers; it moves in the same transaction as their writes for the block before it.
 */
export const followerCursors = pgTable('follower_cursors', {
  network: text('network').primaryKey(),
  nextBlock: bigint('next_block', { mode: 'number' }).notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/**
 * C33: who follows a network. One row per network; an instance takes it when it is free, expired
 * or already its own (one atomic upsert, on the database's clock), and renews it while it follows.
 */
export const followerLeases = pgTable('follower_leases', {
  network: text('network').primaryKey(),
  /** The instance's random id (`BlockFollower.id`). */
  holder: text('holder').notNull(),
  expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
});
