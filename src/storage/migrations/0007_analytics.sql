CREATE TABLE "analytics_hourly" (
	"user_id" text NOT NULL,
	"key_id" text NOT NULL,
	"network" text NOT NULL,
	"method" text NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"compute_units" bigint DEFAULT 0 NOT NULL,
	"errors_node" bigint DEFAULT 0 NOT NULL,
	"errors_upstream" bigint DEFAULT 0 NOT NULL,
	"refused_rate" bigint DEFAULT 0 NOT NULL,
	"refused_quota" bigint DEFAULT 0 NOT NULL,
	"refused_key" bigint DEFAULT 0 NOT NULL,
	"refused_network" bigint DEFAULT 0 NOT NULL,
	"refused_method" bigint DEFAULT 0 NOT NULL,
	"latency" bigint[] DEFAULT '{}' NOT NULL,
	CONSTRAINT "analytics_hourly_pkey" PRIMARY KEY("user_id","key_id","hour","network","method")
);
--> statement-breakpoint
CREATE TABLE "analytics_daily" (
	"user_id" text NOT NULL,
	"key_id" text NOT NULL,
	"network" text NOT NULL,
	"method" text NOT NULL,
	"day" date NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"compute_units" bigint DEFAULT 0 NOT NULL,
	"errors_node" bigint DEFAULT 0 NOT NULL,
	"errors_upstream" bigint DEFAULT 0 NOT NULL,
	"refused_rate" bigint DEFAULT 0 NOT NULL,
	"refused_quota" bigint DEFAULT 0 NOT NULL,
	"refused_key" bigint DEFAULT 0 NOT NULL,
	"refused_network" bigint DEFAULT 0 NOT NULL,
	"refused_method" bigint DEFAULT 0 NOT NULL,
	"latency" bigint[] DEFAULT '{}' NOT NULL,
	CONSTRAINT "analytics_daily_pkey" PRIMARY KEY("user_id","key_id","day","network","method")
);
--> statement-breakpoint
ALTER TABLE "analytics_hourly" ADD CONSTRAINT "analytics_hourly_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "analytics_daily" ADD CONSTRAINT "analytics_daily_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "analytics_hourly_user_hour_idx" ON "analytics_hourly" USING btree ("user_id","hour");--> statement-breakpoint
CREATE INDEX "analytics_hourly_hour_idx" ON "analytics_hourly" USING btree ("hour");--> statement-breakpoint
CREATE INDEX "analytics_daily_user_day_idx" ON "analytics_daily" USING btree ("user_id","day");--> statement-breakpoint
CREATE INDEX "analytics_daily_day_idx" ON "analytics_daily" USING btree ("day");
