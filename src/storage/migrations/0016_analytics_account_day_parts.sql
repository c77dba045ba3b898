-- For scale (docs/scaling.md): an account's daily analytics rows summed per key, per network and per method (C46, "How
-- a query reads"): one row per (account, UTC day, kind, name: k a key, n a network, m a method) with the counters summed (NULL when
-- zero) and, for networks and methods, the histograms merged (histogram.ts, encodeLatency); a key's
-- rows carry an empty histogram (byKey shows no latency). The breakdowns of a query without a key,
-- network or method read these instead of every series' daily rows. Backfilled here from the daily
-- rows already stored; the recorder writes them in the same transaction as the series rows from
-- now on.
CREATE TABLE "analytics_account_day_parts" (
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
	"day" date NOT NULL,
	"kind" text NOT NULL,
	"name" text NOT NULL,
	"latency" "bytea" NOT NULL,
	CONSTRAINT "analytics_account_day_parts_pkey" PRIMARY KEY("user_id","day","kind","name")
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
INSERT INTO "analytics_account_day_parts" ("requests", "compute_units", "errors_node", "errors_upstream", "refused_rate", "refused_quota", "refused_key", "refused_network", "refused_method", "refused_access", "user_id", "day", "kind", "name", "latency")
SELECT c."requests", c."compute_units", c."errors_node", c."errors_upstream", c."refused_rate", c."refused_quota", c."refused_key", c."refused_network", c."refused_method", c."refused_access", c."user_id", c."day", c."kind", c."name", coalesce(l."latency", ''::bytea)
FROM (SELECT nullif(sum(r."requests"), 0) AS "requests", nullif(sum(r."compute_units"), 0) AS "compute_units", nullif(sum(r."errors_node"), 0) AS "errors_node", nullif(sum(r."errors_upstream"), 0) AS "errors_upstream", nullif(sum(r."refused_rate"), 0) AS "refused_rate", nullif(sum(r."refused_quota"), 0) AS "refused_quota", nullif(sum(r."refused_key"), 0) AS "refused_key", nullif(sum(r."refused_network"), 0) AS "refused_network", nullif(sum(r."refused_method"), 0) AS "refused_method", nullif(sum(r."refused_access"), 0) AS "refused_access", s."user_id", r."day", p."kind", p."name"
      FROM "analytics_days" r JOIN "analytics_series" s ON s."id" = r."series",
        LATERAL (VALUES ('k', s."key_id"), ('n', s."network"), ('m', s."method")) p("kind", "name")
      GROUP BY s."user_id", r."day", p."kind", p."name") c
LEFT JOIN (
  SELECT "user_id", "day", "kind", "name", set_byte('\x00'::bytea, 0, max(w)) || string_agg(set_byte('\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea ORDER BY i) AS "latency"
  FROM (SELECT "user_id", "day", "kind", "name", i, n, CASE WHEN max(n) OVER p < 256 THEN 1 WHEN max(n) OVER p < 65536 THEN 2 WHEN max(n) OVER p < 4294967296 THEN 4 ELSE 8 END AS w
        FROM (SELECT s."user_id", r."day", p."kind", p."name", b.i, sum(b.n)::int8 AS n
              FROM "analytics_days" r JOIN "analytics_series" s ON s."id" = r."series",
                LATERAL (VALUES ('n', s."network"), ('m', s."method")) p("kind", "name"), pg_temp.analytics_buckets(r."latency") b
              GROUP BY s."user_id", r."day", p."kind", p."name", b.i) u
        WHERE n > 0 WINDOW p AS (PARTITION BY "user_id", "day", "kind", "name")) e
  GROUP BY "user_id", "day", "kind", "name") l ON (l."user_id", l."day", l."kind", l."name") = (c."user_id", c."day", c."kind", c."name")
ORDER BY c."day", c."user_id", c."kind", c."name";
--> statement-breakpoint
DROP FUNCTION "pg_temp"."analytics_buckets"(bytea);--> statement-breakpoint
ALTER TABLE "analytics_account_day_parts" ADD CONSTRAINT "analytics_account_day_parts_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "analytics_account_day_parts_day_idx" ON "analytics_account_day_parts" USING brin ("day");