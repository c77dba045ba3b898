// Analytics rows as stored before 0012_analytics_compact.sql (texts, bigint counters, bigint[]
// histograms), and the questions GET /usage/analytics asks of them (C46): the migration test fills
// the old tables with these, migrates, and compares the answers with those the code before the
// migration gave (old-answers.json).
import type { AnalyticsQuery } from '../../src/analytics/store.ts';

/** Two accounts; k2 was deleted (no api_keys row, name null); hours and days of January 2026. */
export const OLD_ROWS = `
insert into users (id, email, name, password_hash, tier) values ('u1', 'u1@example.com', 'A', 'x', 'pro'), ('u2', 'u2@example.com', 'B', 'x', 'pro');
insert into api_keys (id, user_id, name, prefix, key_hash, key_ciphertext, networks) values
  ('k1', 'u1', 'main', 'jk_1', 'h1', 'c1', '["ethereum"]'), ('k3', 'u2', 'other', 'jk_3', 'h3', 'c3', '["ethereum"]');
insert into analytics_hourly (user_id, key_id, network, method, hour, requests, compute_units, errors_node, errors_upstream,
    refused_rate, refused_quota, refused_key, refused_network, refused_method, refused_access, latency)
  select u, k, n, m, '2026-01-10T00:00:00Z'::timestamptz + make_interval(hours => h), x % 50, 10 * (x % 50), x % 3, x % 5 / 4, x % 7 / 6, x % 11 / 10, 0, x % 13 / 12, x % 17 / 16, x % 19 / 18,
    array(select case when (b + x) % 4 = 0 then (x * 31 + b * 17) % 300 else 0 end from generate_series(0, 20 + x % 60) b)::bigint[]
  from (values ('u1', 'k1'), ('u1', 'k2'), ('u2', 'k3')) a(u, k), unnest(array['ethereum', 'polygon']) n, unnest(array['eth_call', 'eth_getLogs', 'other']) m,
    generate_series(0, 71) h, lateral (select h * 7 + length(k || n || m) * 13 as x) x
  where (h + length(m)) % 5 <> 0;
insert into analytics_daily (user_id, key_id, network, method, day, requests, compute_units, errors_node, errors_upstream,
    refused_rate, refused_quota, refused_key, refused_network, refused_method, refused_access, latency)
  select u, k, n, m, '2026-01-01'::date + d, x % 500 * 24, 10 * (x % 500) * 24, x % 7, x % 5, x % 3, x % 11 / 10, x % 2, x % 13 / 12, x % 17 / 16, x % 19 / 18,
    array(select case when (b + x) % 3 = 0 then (x * 131 + b * 17) % 3000 else 0 end from generate_series(0, 10 + x % 75) b)::bigint[]
  from (values ('u1', 'k1'), ('u1', 'k2'), ('u2', 'k3')) a(u, k), unnest(array['ethereum', 'polygon']) n, unnest(array['eth_call', 'eth_getLogs', 'other']) m,
    generate_series(0, 29) d, lateral (select d * 11 + length(k || n || m) * 5 as x) x
  where (d + length(n)) % 4 <> 0;
-- Counts past 2^16 and 2^32 in a bucket, an empty histogram (refusals only), and nothing but zeros.
update analytics_daily set latency = array[0, 70000, 0, 5000000000, 3]::bigint[] where user_id = 'u1' and key_id = 'k1' and network = 'ethereum' and method = 'eth_call' and day = '2026-01-02';
update analytics_daily set requests = 0, compute_units = 0, errors_node = 0, errors_upstream = 0, latency = '{}' where user_id = 'u1' and key_id = 'k2' and method = 'other' and day = '2026-01-03';
update analytics_hourly set latency = '{0,0,0}', requests = 0 where user_id = 'u1' and key_id = 'k1' and method = 'eth_getLogs' and hour = '2026-01-11T05:00:00Z';
`;

/** What the answers are compared on. */
export const QUESTIONS: AnalyticsQuery[] = [
  { userId: 'u1', start: '2026-01-01', end: '2026-01-30', granularity: 'day' },
  { userId: 'u1', start: '2026-01-01', end: '2026-01-30', granularity: 'day', keyId: 'k2' },
  { userId: 'u1', start: '2026-01-01', end: '2026-01-07', granularity: 'day', network: 'polygon', method: 'eth_getLogs' },
  { userId: 'u1', start: '2026-01-10', end: '2026-01-12', granularity: 'hour' },
  { userId: 'u1', start: '2026-01-11', end: '2026-01-11', granularity: 'hour', keyId: 'k1', method: 'eth_getLogs' },
  { userId: 'u2', start: '2026-01-01', end: '2026-01-30', granularity: 'day' },
  { userId: 'u2', start: '2026-01-09', end: '2026-01-13', granularity: 'hour', network: 'ethereum' },
];
