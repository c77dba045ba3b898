-- C27, for scale (docs/scaling.md): usage summed over the account's keys, per (account, day, network, method), for
-- the account-wide questions (GET /usage/stats without apiKeyId, the quotas seeded at start, the
-- usage.quota webhook). A trigger on usage_daily keeps it, so that every writer (this version, or
-- an older one still running during a rolling deploy) adds to it in the same transaction.
CREATE TABLE "usage_account_daily" (
	"user_id" text NOT NULL,
	"day" date NOT NULL,
	"network" text NOT NULL,
	"method" text NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"compute_units" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_account_daily_pkey" PRIMARY KEY("user_id","day","network","method")
);
--> statement-breakpoint
-- A row of usage_daily inserted adds its counts; an upsert that adds to a row adds the difference.
-- Deletes are not carried over: retention deletes the same days from both tables, and a deleted
-- account's rows go from both by their foreign keys.
CREATE FUNCTION "usage_account_daily_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO "usage_account_daily" ("user_id", "day", "network", "method", "requests", "compute_units")
	VALUES (NEW."user_id", NEW."day", NEW."network", NEW."method",
		NEW."requests" - CASE WHEN TG_OP = 'UPDATE' THEN OLD."requests" ELSE 0 END,
		NEW."compute_units" - CASE WHEN TG_OP = 'UPDATE' THEN OLD."compute_units" ELSE 0 END)
	ON CONFLICT ("user_id", "day", "network", "method") DO UPDATE SET
		"requests" = "usage_account_daily"."requests" + excluded."requests",
		"compute_units" = "usage_account_daily"."compute_units" + excluded."compute_units";
	RETURN NULL;
END $$;
--> statement-breakpoint
-- Creating the trigger locks usage_daily against writes until the migration commits (one
-- transaction), so the sums below and the trigger neither miss nor count a row twice.
CREATE TRIGGER "usage_daily_account_sum" AFTER INSERT OR UPDATE OF "requests", "compute_units" ON "usage_daily"
	FOR EACH ROW EXECUTE FUNCTION "usage_account_daily_add"();
--> statement-breakpoint
INSERT INTO "usage_account_daily" ("user_id", "day", "network", "method", "requests", "compute_units")
SELECT "user_id", "day", "network", "method", sum("requests"), sum("compute_units") FROM "usage_daily" GROUP BY 1, 2, 3, 4;
--> statement-breakpoint
ALTER TABLE "usage_account_daily" ADD CONSTRAINT "usage_account_daily_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "usage_account_daily_day_idx" ON "usage_account_daily" USING btree ("day");
