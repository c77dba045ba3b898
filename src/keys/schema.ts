// The table of API keys (C19).
import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';
import type { KeyAccessSettings } from './allowlist-settings.ts';

/** API keys (C19): never the plain key; a SHA-256 hash for lookup and AES-256-GCM ciphertext for the list. */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    prefix: text('prefix').notNull(),
    keyHash: text('key_hash').notNull(),
    keyCiphertext: text('key_ciphertext').notNull(),
    networks: jsonb('networks').$type<string[]>().notNull(),
    /** C16, C52: made for every network the plan allows; it covers the plan's list as it is now, not `networks`. */
    allNetworks: boolean('all_networks').notNull().default(false),
    rateLimit: integer('rate_limit'),
    status: text('status').$type<'active' | 'inactive' | 'revoked'>().notNull().default('active'),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
    /** Allowlists and the JWT option; null: none set. */
    access: jsonb('access').$type<KeyAccessSettings>(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [
    uniqueIndex('api_keys_hash_key').on(t.keyHash),
    uniqueIndex('api_keys_prefix_key').on(t.prefix),
    index('api_keys_user_idx').on(t.userId),
  ],
);
