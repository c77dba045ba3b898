ALTER TABLE "analytics_hourly" ADD COLUMN "refused_access" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "analytics_daily" ADD COLUMN "refused_access" bigint DEFAULT 0 NOT NULL;