CREATE TABLE "faucet_grants" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text,
	"network" text NOT NULL,
	"faucet_address" text NOT NULL,
	"recipient" text NOT NULL,
	"amount_wei" numeric(78, 0) NOT NULL,
	"nonce" bigint NOT NULL,
	"tx_hash" text NOT NULL,
	"raw_tx" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "faucet_grants" ADD CONSTRAINT "faucet_grants_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "faucet_grants_nonce_key" ON "faucet_grants" USING btree ("network","faucet_address","nonce") WHERE "faucet_grants"."status" <> 'failed';--> statement-breakpoint
CREATE INDEX "faucet_grants_recipient_idx" ON "faucet_grants" USING btree ("network","recipient","created_at");--> statement-breakpoint
CREATE INDEX "faucet_grants_user_idx" ON "faucet_grants" USING btree ("network","user_id","created_at");--> statement-breakpoint
CREATE INDEX "faucet_grants_pending_idx" ON "faucet_grants" USING btree ("created_at") WHERE "faucet_grants"."status" = 'pending';