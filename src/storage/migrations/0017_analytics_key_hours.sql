-- For scale (docs/scaling.md): a key's hourly roll-up of the analytics rows (C46, "How a query reads"): per (account,
-- key, UTC hour) the counters of all the key's series summed (NULL when zero) and their histograms
-- merged (histogram.ts, encodeLatency), so a query by key alone, by the hour, reads one row per hour
-- instead of one per series and hour. Backfilled here from the hourly rows already stored (as 0014
-- backfills the account's); the recorder writes it in the same transaction as the series rows from
-- now on.
CREATE TABLE "analytics_key_hours" (
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
	"user_id" text NOT NULL,
	"key_id" text NOT NULL,
	"hour" integer NOT NULL,
	"latency" "bytea" NOT NULL,
	CONSTRAINT "analytics_key_hours_pkey" PRIMARY KEY("user_id","key_id","hour")
);
--> statement-breakpoint
-- The (bucket, count) rows of a stored histogram, as histogram.ts's latencyBucketsSql reads them (as in 0014).
CREATE FUNCTION "pg_temp"."analytics_buckets"("h" bytea) RETURNS TABLE ("i" int, "n" int8) LANGUAGE sql IMMUTABLE AS $$
  SELECT get_byte(h, o), CASE get_byte(h, 0)
      WHEN 1 THEN get_byte(h, o + 1)::int8
      WHEN 2 THEN (get_byte(h, o + 1)::int8 << 8) | get_byte(h, o + 2)::int8
      WHEN 4 THEN (get_byte(h, o + 1)::int8 << 24) | (get_byte(h, o + 2)::int8 << 16) | (get_byte(h, o + 3)::int8 << 8) | get_byte(h, o + 4)::int8
      ELSE (get_byte(h, o + 1)::int8 << 56) | (get_byte(h, o + 2)::int8 << 48) | (get_byte(h, o + 3)::int8 << 40) | (get_byte(h, o + 4)::int8 << 32)
         | (get_byte(h, o + 5)::int8 << 24) | (get_byte(h, o + 6)::int8 << 16) | (get_byte(h, o + 7)::int8 << 8) | get_byte(h, o + 8)::int8 END
  FROM generate_series(1, length(h) - 1, CASE WHEN length(h) > 0 THEN get_byte(h, 0) + 1 ELSE 1 END) o
$$;
--> statement-breakpoint
INSERT INTO "analytics_key_hours" ("requests", "compute_units", "errors_node", "errors_upstream", "refused_rate", "refused_quota", "refused_key", "refused_network", "refused_method", "refused_access", "user_id", "key_id", "hour", "latency")
SELECT c."requests", c."compute_units", c."errors_node", c."errors_upstream", c."refused_rate", c."refused_quota", c."refused_key", c."refused_network", c."refused_method", c."refused_access", c."user_id", c."key_id", c."hour", coalesce(l."latency", ''::bytea)
FROM (SELECT nullif(sum(r."requests"), 0) AS "requests", nullif(sum(r."compute_units"), 0) AS "compute_units", nullif(sum(r."errors_node"), 0) AS "errors_node", nullif(sum(r."errors_upstream"), 0) AS "errors_upstream", nullif(sum(r."refused_rate"), 0) AS "refused_rate", nullif(sum(r."refused_quota"), 0) AS "refused_quota", nullif(sum(r."refused_key"), 0) AS "refused_key", nullif(sum(r."refused_network"), 0) AS "refused_network", nullif(sum(r."refused_method"), 0) AS "refused_method", nullif(sum(r."refused_access"), 0) AS "refused_access", s."user_id", s."key_id", r."hour"
      FROM "analytics_hours" r JOIN "analytics_series" s ON s."id" = r."series" GROUP BY s."user_id", s."key_id", r."hour") c
LEFT JOIN (
  SELECT "user_id", "key_id", "hour", set_byte('\x00'::bytea, 0, max(w)) || string_agg(set_byte('\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea ORDER BY i) AS "latency"
  FROM (SELECT "user_id", "key_id", "hour", i, n, CASE WHEN max(n) OVER p < 256 THEN 1 WHEN max(n) OVER p < 65536 THEN 2 WHEN max(n) OVER p < 4294967296 THEN 4 ELSE 8 END AS w
        FROM (SELECT s."user_id", s."key_id", r."hour", b.i, sum(b.n)::int8 AS n
              FROM "analytics_hours" r JOIN "analytics_series" s ON s."id" = r."series", pg_temp.analytics_buckets(r."latency") b
              GROUP BY s."user_id", s."key_id", r."hour", b.i) u
        WHERE n > 0 WINDOW p AS (PARTITION BY "user_id", "key_id", "hour")) e
  GROUP BY "user_id", "key_id", "hour") l ON (l."user_id", l."key_id", l."hour") = (c."user_id", c."key_id", c."hour")
ORDER BY c."hour", c."user_id", c."key_id";
--> statement-breakpoint
DROP FUNCTION "pg_temp"."analytics_buckets"(bytea);--> statement-breakpoint
ALTER TABLE "analytics_key_hours" ADD CONSTRAINT "analytics_key_hours_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "analytics_key_hours_hour_idx" ON "analytics_key_hours" USING brin ("hour");
