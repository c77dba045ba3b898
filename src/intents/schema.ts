// The intents' tables (C41): intents from creation to a final status, and the solver's signed transactions.
import { sql } from 'drizzle-orm';
import { bigint, index, integer, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from '../auth/schema.ts';

/** C41: where an intent stands. */
export type IntentStatus = 'awaiting_open' | 'opened' | 'filled' | 'settled' | 'expired' | 'refunded';
/** The statuses the solver still works on (and the follower follows their networks for, C33). */
export const LIVE_STATUSES = ['awaiting_open', 'opened', 'filled'] as const satisfies readonly IntentStatus[];

/**
 * Cross-chain intents (C41): one row per intent, from its creation (`awaiting_open`) to a final
 * status. Amounts in wei, exact. Addresses lower-case 0x. The order id is computed as the origin
 * settler does, so the follower finds the intent of an `Open`, `Filled`, `Settled` or `Refunded`
 * event by it. `user_id` survives as null when the account is deleted: the solver still finishes
 * the order (the coins are locked on chain whoever asked for them).
 */
export const intents = pgTable(
  'intents',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').references(() => users.id, { onDelete: 'set null' }),
    status: text('status').$type<IntentStatus>().notNull().default('awaiting_open'),
    fromNetwork: text('from_network').notNull(),
    toNetwork: text('to_network').notNull(),
    originChainId: bigint('origin_chain_id', { mode: 'number' }).notNull(),
    destinationChainId: bigint('destination_chain_id', { mode: 'number' }).notNull(),
    sender: text('sender').notNull(),
    recipient: text('recipient').notNull(),
    inputWei: numeric('input_wei', { precision: 78, scale: 0 }).notNull(),
    outputWei: numeric('output_wei', { precision: 78, scale: 0 }).notNull(),
    feeWei: numeric('fee_wei', { precision: 78, scale: 0 }).notNull(),
    /** What the fill may cost the solver in gas at most: reserved with the output until filled. */
    gasReserveWei: numeric('gas_reserve_wei', { precision: 78, scale: 0 }).notNull(),
    /** The solver wallet that fills on the destination and settles on the origin (lower-case). */
    solver: text('solver').notNull(),
    originSettler: text('origin_settler').notNull(),
    destinationSettler: text('destination_settler').notNull(),
    /** bytes32, chosen here; with the sender it makes the order id. */
    nonce: text('nonce').notNull(),
    orderId: text('order_id').notNull(),
    /** Unix seconds. */
    openDeadline: bigint('open_deadline', { mode: 'number' }).notNull(),
    /** Seconds after the open during which the order may be filled. */
    fillWindow: integer('fill_window').notNull(),
    /** Unix seconds: the latest possible before the open, the settler's own once opened. */
    fillDeadline: bigint('fill_deadline', { mode: 'number' }).notNull(),
    /** Why the solver does not fill (an open that does not match the intent): it is refunded instead. */
    holdReason: text('hold_reason'),
    /** Who filled on the destination (from the Filled event): the solver settles to it. */
    filler: text('filler'),
    openTxHash: text('open_tx_hash'),
    openBlock: bigint('open_block', { mode: 'number' }),
    openedAt: timestamp('opened_at', { withTimezone: true, mode: 'date' }),
    fillTxHash: text('fill_tx_hash'),
    fillBlock: bigint('fill_block', { mode: 'number' }),
    filledAt: timestamp('filled_at', { withTimezone: true, mode: 'date' }),
    settleTxHash: text('settle_tx_hash'),
    settleBlock: bigint('settle_block', { mode: 'number' }),
    settledAt: timestamp('settled_at', { withTimezone: true, mode: 'date' }),
    refundTxHash: text('refund_tx_hash'),
    refundBlock: bigint('refund_block', { mode: 'number' }),
    refundedAt: timestamp('refunded_at', { withTimezone: true, mode: 'date' }),
    expiredAt: timestamp('expired_at', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [
    uniqueIndex('intents_order_key').on(t.fromNetwork, t.orderId),
    // GET /intents: the account's, newest first.
    index('intents_user_idx').on(t.userId, t.createdAt.desc(), t.id.desc()),
    // The solver's work and the liquidity reserved per destination wallet.
    index('intents_live_idx').on(t.status, t.toNetwork).where(sql`${t.status} in ('awaiting_open', 'opened', 'filled')`),
  ],
);

export type IntentTxKind = 'fill' | 'settle' | 'refund';
/**
 * `pending`: recorded with its signed bytes, not known to have reached a node; `sent`: a node
 * accepted it; `mined`: in a block and it succeeded; `reverted`: in a block and it failed;
 * `failed`: a node refused it (its nonce is free again, and another of its kind may be made).
 */
export type IntentTxStatus = 'pending' | 'sent' | 'mined' | 'reverted' | 'failed';

/**
 * The solver's transactions (C41): each is recorded `pending` with its signed bytes before it is
 * broadcast, as the faucet's grants (C29), so that a crash never makes a second one: a restart
 * sends the same bytes again. At most one live transaction of each kind per intent, whatever the
 * number of instances (the unique index is the claim).
 */
export const intentTransactions = pgTable(
  'intent_transactions',
  {
    id: text('id').primaryKey(),
    intentId: text('intent_id')
      .notNull()
      .references(() => intents.id, { onDelete: 'cascade' }),
    kind: text('kind').$type<IntentTxKind>().notNull(),
    network: text('network').notNull(),
    /** The solver wallet, lower-case: nonces are per (network, wallet). */
    fromAddress: text('from_address').notNull(),
    nonce: bigint('nonce', { mode: 'number' }).notNull(),
    txHash: text('tx_hash').notNull(),
    rawTx: text('raw_tx').notNull(),
    status: text('status').$type<IntentTxStatus>().notNull().default('pending'),
    error: text('error'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  },
  (t) => [
    // The claim: never two live transactions of one kind for one intent (one fill per order).
    uniqueIndex('intent_transactions_kind_key')
      .on(t.intentId, t.kind)
      .where(sql`${t.status} not in ('failed', 'reverted')`),
    // Never two live transactions with one nonce.
    uniqueIndex('intent_transactions_nonce_key')
      .on(t.network, t.fromAddress, t.nonce)
      .where(sql`${t.status} <> 'failed'`),
    index('intent_transactions_open_idx').on(t.updatedAt).where(sql`${t.status} in ('pending', 'sent')`),
  ],
);
