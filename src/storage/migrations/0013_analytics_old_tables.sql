-- C46: the analytics tables before 0012_analytics_compact.sql, whose rows it carried over.
DROP TABLE "analytics_daily" CASCADE;--> statement-breakpoint
DROP TABLE "analytics_hourly" CASCADE;
