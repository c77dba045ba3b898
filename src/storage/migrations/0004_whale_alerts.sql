CREATE TABLE "whale_alerts" (
	"id" text PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"tx_hash" text NOT NULL,
	"from_address" text NOT NULL,
	"to_address" text NOT NULL,
	"value_wei" numeric(78, 0) NOT NULL,
	"value" text NOT NULL,
	"value_usd" numeric(38, 2),
	"block_number" bigint NOT NULL,
	"tx_index" integer NOT NULL,
	"block_time" timestamp with time zone NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "whale_alerts_tx_key" ON "whale_alerts" USING btree ("network","tx_hash");--> statement-breakpoint
CREATE INDEX "whale_alerts_order_idx" ON "whale_alerts" USING btree ("network","block_number" DESC NULLS LAST,"tx_index" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "whale_alerts_block_time_idx" ON "whale_alerts" USING btree ("block_time");
