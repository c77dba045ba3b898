import pg from 'pg';
const c = new pg.Client({ connectionString: 'postgres://root@127.0.0.1:5432/rollup_prof' });
await c.connect();
const day = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);
const counters = ['requests', 'compute_units', 'errors_node', 'errors_upstream', 'refused_rate', 'refused_quota', 'refused_key', 'refused_network', 'refused_method', 'refused_access'].map((x) => `coalesce(r.${x}, 0)::float8 as ${x}`).join(', ');
const q = `select extract(epoch from r.day::timestamp)::float8 * 1000 as bucket, null::text as key_id, null::text as network, null::text as method, ${counters}, r.latency
          from analytics_account_days r where r.user_id = 'b1' and r.day >= $1::date and r.day <= $2::date
        union all
        select null, s.key_id, s.network, s.method, ${counters}, r.latency
        from analytics_days r join analytics_series s on s.id = r.series
        where r.series = any(array(select id from analytics_series where user_id = 'b1')) and r.day >= $1::date and r.day <= $2::date
          and s.user_id = 'b1'`;
const q2 = `select r.series, ${counters}, r.latency from analytics_days r
        where r.series = any(array(select id from analytics_series where user_id = 'b1')) and r.day >= $1::date and r.day <= $2::date`;
for (const [label, text] of [['union', q], ['days only, series id', q2]] as const) {
  const ts: number[] = [];
  for (let i = 0; i < 30; i++) { const t = performance.now(); await c.query(text, [day(40), day(11)]); ts.push(performance.now() - t); }
  ts.sort((a, b) => a - b);
  console.log(label, 'min', ts[0]!.toFixed(1), 'median', ts[15]!.toFixed(1));
  const e = await c.query(`explain (analyze, timing off) ${text}`, [day(40), day(11)]);
  console.log(e.rows.map((r) => Object.values(r)[0]).filter((x) => /Execution|Planning/.test(String(x))).join(' | '));
}
await c.end();
