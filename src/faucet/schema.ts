// The faucet's table (C29): one row per grant, with its signed transaction.
import { sql } from 'drizzle-orm';
import { bigint, index, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

export type GrantStatus = 'pending' | 'sent' | 'mined' | 'failed';

/**
 * Faucet grants (C29): each one is written `pending`, with its signed transaction, before it is
 * broadcast, then becomes `sent` (a node accepted it) or `failed` (refused; its nonce is free
 * again and it does not count against the cooldown). A `sent` grant becomes `mined` once it is in
 * a block; one the node dropped is sent again, or becomes `failed` when the node refuses it now.
 * A restart and a periodic check re-broadcast what is `pending` and look after what is `sent`.
 * `user_id` survives as null when the account is deleted: the record and the address cooldown stay.
 */
export const faucetGrants = pgTable(
  'faucet_grants',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').references(() => users.id, { onDelete: 'set null' }),
    network: text('network').notNull(),
    /** The sending wallet, lower-case 0x: nonces are per (wallet, network). */
    faucetAddress: text('faucet_address').notNull(),
    /** Lower-case 0x. */
    recipient: text('recipient').notNull(),
    amountWei: numeric('amount_wei', { precision: 78, scale: 0 }).notNull(),
    nonce: bigint('nonce', { mode: 'number' }).notNull(),
    txHash: text('tx_hash').notNull(),
    /** The signed transaction, so that a restart can re-broadcast exactly the same one. */
    rawTx: text('raw_tx').notNull(),
    status: text('status').$type<GrantStatus>().notNull().default('pending'),
    error: text('error'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [
    // Never two live grants with one nonce, whatever the code above does (C29).
    uniqueIndex('faucet_grants_nonce_key')
      .on(t.network, t.faucetAddress, t.nonce)
      .where(sql`${t.status} <> 'failed'`),
    // The two cooldowns (C29).
    index('faucet_grants_recipient_idx').on(t.network, t.recipient, t.createdAt),
    index('faucet_grants_user_idx').on(t.network, t.userId, t.createdAt),
    // What a restart must finish.
    index('faucet_grants_pending_idx').on(t.createdAt).where(sql`${t.status} = 'pending'`),
  ],
);
