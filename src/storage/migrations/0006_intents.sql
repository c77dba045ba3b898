CREATE TABLE "intents" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text,
	"status" text DEFAULT 'awaiting_open' NOT NULL,
	"from_network" text NOT NULL,
	"to_network" text NOT NULL,
	"origin_chain_id" bigint NOT NULL,
	"destination_chain_id" bigint NOT NULL,
	"sender" text NOT NULL,
	"recipient" text NOT NULL,
	"input_wei" numeric(78, 0) NOT NULL,
	"output_wei" numeric(78, 0) NOT NULL,
	"fee_wei" numeric(78, 0) NOT NULL,
	"gas_reserve_wei" numeric(78, 0) NOT NULL,
	"solver" text NOT NULL,
	"origin_settler" text NOT NULL,
	"destination_settler" text NOT NULL,
	"nonce" text NOT NULL,
	"order_id" text NOT NULL,
	"open_deadline" bigint NOT NULL,
	"fill_window" integer NOT NULL,
	"fill_deadline" bigint NOT NULL,
	"hold_reason" text,
	"filler" text,
	"open_tx_hash" text,
	"open_block" bigint,
	"opened_at" timestamp with time zone,
	"fill_tx_hash" text,
	"fill_block" bigint,
	"filled_at" timestamp with time zone,
	"settle_tx_hash" text,
	"settle_block" bigint,
	"settled_at" timestamp with time zone,
	"refund_tx_hash" text,
	"refund_block" bigint,
	"refunded_at" timestamp with time zone,
	"expired_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "intent_transactions" (
	"id" text PRIMARY KEY NOT NULL,
	"intent_id" text NOT NULL,
	"kind" text NOT NULL,
	"network" text NOT NULL,
	"from_address" text NOT NULL,
	"nonce" bigint NOT NULL,
	"tx_hash" text NOT NULL,
	"raw_tx" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "intents" ADD CONSTRAINT "intents_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "intent_transactions" ADD CONSTRAINT "intent_transactions_intent_id_intents_id_fk" FOREIGN KEY ("intent_id") REFERENCES "public"."intents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "intents_order_key" ON "intents" USING btree ("from_network","order_id");--> statement-breakpoint
CREATE INDEX "intents_user_idx" ON "intents" USING btree ("user_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "intents_live_idx" ON "intents" USING btree ("status","to_network") WHERE "intents"."status" in ('awaiting_open', 'opened', 'filled');--> statement-breakpoint
CREATE UNIQUE INDEX "intent_transactions_kind_key" ON "intent_transactions" USING btree ("intent_id","kind") WHERE "intent_transactions"."status" not in ('failed', 'reverted');--> statement-breakpoint
CREATE UNIQUE INDEX "intent_transactions_nonce_key" ON "intent_transactions" USING btree ("network","from_address","nonce") WHERE "intent_transactions"."status" <> 'failed';--> statement-breakpoint
CREATE INDEX "intent_transactions_open_idx" ON "intent_transactions" USING btree ("updated_at") WHERE "intent_transactions"."status" in ('pending', 'sent');
