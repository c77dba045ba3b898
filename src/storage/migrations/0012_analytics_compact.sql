-- For scale (docs/scaling.md): analytics rows of at most 150 bytes, indexes included (C46, "How rows are stored"). The
-- (account, key, network, method) texts move to analytics_series, numbered once; a row keeps that
-- number, its hour (hours since 1970, UTC) or day, counters NULL when zero, and the latency
-- histogram sparse in a bytea (src/analytics/histogram.ts); (hour) and (day) indexes become BRIN.
-- The rows of analytics_hourly and analytics_daily are carried over; 0013 drops those tables.
CREATE TABLE "analytics_series" (
	"id" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "analytics_series_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1),
	"user_id" text NOT NULL,
	"key_id" text NOT NULL,
	"network" text NOT NULL,
	"method" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "analytics_days" (
	"requests" bigint,
	"compute_units" bigint,
	"errors_node" bigint,
	"errors_upstream" bigint,
	"refused_rate" bigint,
	"refused_quota" bigint,
	"refused_key" bigint,
	"refused_network" bigint,
	"refused_method" bigint,
	"refused_access" bigint,
	"series" integer NOT NULL,
	"day" date NOT NULL,
	"latency" "bytea" NOT NULL,
	CONSTRAINT "analytics_days_pkey" PRIMARY KEY("series","day")
);
--> statement-breakpoint
CREATE TABLE "analytics_hours" (
	"requests" bigint,
	"compute_units" bigint,
	"errors_node" bigint,
	"errors_upstream" bigint,
	"refused_rate" bigint,
	"refused_quota" bigint,
	"refused_key" bigint,
	"refused_network" bigint,
	"refused_method" bigint,
	"refused_access" bigint,
	"series" integer NOT NULL,
	"hour" integer NOT NULL,
	"latency" "bytea" NOT NULL,
	CONSTRAINT "analytics_hours_pkey" PRIMARY KEY("series","hour")
);
--> statement-breakpoint
INSERT INTO "analytics_series" ("user_id", "key_id", "network", "method")
SELECT "user_id", "key_id", "network", "method" FROM "analytics_daily"
UNION SELECT "user_id", "key_id", "network", "method" FROM "analytics_hourly"
ORDER BY 1, 2, 3, 4;
--> statement-breakpoint
-- The histogram as histogram.ts encodes it: empty, or one byte w (1, 2, 4 or 8: the bytes of the
-- largest count) then (bucket: one byte, count: w bytes big-endian) for each non-empty bucket.
CREATE FUNCTION "pg_temp"."analytics_latency"("counts" bigint[]) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(set_byte('\x00'::bytea, 0, max(w)) || string_agg(set_byte('\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea ORDER BY i), ''::bytea)
  FROM (SELECT i, n, CASE WHEN max(n) OVER () < 256 THEN 1 WHEN max(n) OVER () < 65536 THEN 2 WHEN max(n) OVER () < 4294967296 THEN 4 ELSE 8 END AS w
        FROM (SELECT (u.i - 1)::int AS i, u.n FROM unnest(counts) WITH ORDINALITY AS u(n, i)) p WHERE n > 0) e
$$;
--> statement-breakpoint
INSERT INTO "analytics_days" ("requests", "compute_units", "errors_node", "errors_upstream", "refused_rate", "refused_quota", "refused_key", "refused_network", "refused_method", "refused_access", "series", "day", "latency")
SELECT nullif(a."requests", 0), nullif(a."compute_units", 0), nullif(a."errors_node", 0), nullif(a."errors_upstream", 0), nullif(a."refused_rate", 0), nullif(a."refused_quota", 0),
       nullif(a."refused_key", 0), nullif(a."refused_network", 0), nullif(a."refused_method", 0), nullif(a."refused_access", 0), s."id", a."day", pg_temp.analytics_latency(a."latency")
FROM "analytics_daily" a JOIN "analytics_series" s USING ("user_id", "key_id", "network", "method")
ORDER BY s."id", a."day";
--> statement-breakpoint
INSERT INTO "analytics_hours" ("requests", "compute_units", "errors_node", "errors_upstream", "refused_rate", "refused_quota", "refused_key", "refused_network", "refused_method", "refused_access", "series", "hour", "latency")
SELECT nullif(a."requests", 0), nullif(a."compute_units", 0), nullif(a."errors_node", 0), nullif(a."errors_upstream", 0), nullif(a."refused_rate", 0), nullif(a."refused_quota", 0),
       nullif(a."refused_key", 0), nullif(a."refused_network", 0), nullif(a."refused_method", 0), nullif(a."refused_access", 0), s."id", floor(extract(epoch FROM a."hour") / 3600)::int, pg_temp.analytics_latency(a."latency")
FROM "analytics_hourly" a JOIN "analytics_series" s USING ("user_id", "key_id", "network", "method")
ORDER BY a."hour", s."id";
--> statement-breakpoint
DROP FUNCTION "pg_temp"."analytics_latency"(bigint[]);--> statement-breakpoint
ALTER TABLE "analytics_days" ADD CONSTRAINT "analytics_days_series_analytics_series_id_fk" FOREIGN KEY ("series") REFERENCES "public"."analytics_series"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "analytics_hours" ADD CONSTRAINT "analytics_hours_series_analytics_series_id_fk" FOREIGN KEY ("series") REFERENCES "public"."analytics_series"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "analytics_series" ADD CONSTRAINT "analytics_series_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "analytics_days_day_idx" ON "analytics_days" USING brin ("day");--> statement-breakpoint
CREATE INDEX "analytics_hours_hour_idx" ON "analytics_hours" USING brin ("hour");--> statement-breakpoint
CREATE UNIQUE INDEX "analytics_series_user_key_network_method_idx" ON "analytics_series" USING btree ("user_id","key_id","network","method");
