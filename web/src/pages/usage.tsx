// Usage (C43, C27, C9–C12): requests per day, by network and by method over a date range (one key
// or all), compute units used this month against the plan's quota, and the plan's limits.
import type { ChartConfiguration } from 'chart.js';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, useApi, useSession } from '../api.ts';
import { Chart, EmptyState, ErrorBanner, formatNumber, Loading, Page } from '../components/page.tsx';
import { setQuery, useLocation } from '../router.ts';
import { PLAN_NAMES, usePolling } from '../components/chain.tsx';

/**
 * How often the page reads the counts again while it is visible. The gateway writes usage in
 * batches (every 2 s by default, `usage.flushIntervalMs`), so a call shows within about 5 s.
 */
const POLL_MS = 3_000;

const DAY = 86_400_000;
const day = (t: number) => new Date(t).toISOString().slice(0, 10);
const BAR = '#0f4c81';

const sorted = (r: Record<string, number>) => Object.entries(r).sort((a, b) => b[1] - a[1]);

function barConfig(labels: string[], values: number[], label: string, horizontal = false): ChartConfiguration {
  return {
    type: 'bar',
    data: { labels, datasets: [{ label, data: values, backgroundColor: BAR }] },
    options: {
      indexAxis: horizontal ? 'y' : 'x',
      plugins: { legend: { display: false } },
      // Every label shown: a horizontal chart names each bar (Chart.js would skip some when crowded);
      // the days of a long period may be skipped, the table and the dates around them say which.
      scales: { [horizontal ? 'x' : 'y']: { beginAtZero: true, ticks: { precision: 0 } }, ...(horizontal ? { y: { ticks: { autoSkip: false } } } : {}) },
    },
  };
}

/** A ranking as a table: the figures in words beside the chart. */
function Ranking(props: { caption: string; rows: Array<[string, number]>; what: string }) {
  return (
    <div class="table-wrap">
      <table>
        <caption class="offscreen">{props.caption}</caption>
        <thead>
          <tr>
            <th scope="col">{props.what}</th>
            <th scope="col" class="num">
              Requests
            </th>
          </tr>
        </thead>
        <tbody>
          {props.rows.map(([k, v]) => (
            <tr key={k}>
              <td>{k}</td>
              <td class="num">{formatNumber(v)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export default function Usage() {
  const session = useSession();
  const { query } = useLocation();
  const today = day(Date.now());
  const end = query.get('end') ?? today;
  const start = query.get('start') ?? day(Date.parse(`${end}T00:00:00Z`) - 29 * DAY);
  const keyId = query.get('key') ?? '';
  const stats = useApi(() => api.get('/api/v1/usage/stats', { query: { startDate: start, endDate: end, apiKeyId: keyId || undefined } }), [start, end, keyId]);
  const me = useApi(() => api.get('/api/v1/me'));
  const keys = useApi(() => api.get('/api/v1/api-keys'));
  const networks = useApi(() => api.get('/api/v1/networks'));
  const nameOf = (slug: string) => networks.data?.find((n) => n.slug === slug)?.name ?? slug;

  const s = stats.data;
  const daily = useMemo(
    () => (s ? barConfig(s.dailyBreakdown.map((d) => d.date.slice(5)), s.dailyBreakdown.map((d) => d.requests), 'Requests') : undefined),
    [s],
  );
  const byNetwork = useMemo(() => (s ? sorted(s.requestsByNetwork).map(([k, v]): [string, number] => [nameOf(k), v]) : []), [s, networks.data]);
  const byMethod = useMemo(() => (s ? sorted(s.requestsByMethod) : []), [s]);
  const networkChart = useMemo(() => (byNetwork.length ? barConfig(byNetwork.map((r) => r[0]), byNetwork.map((r) => r[1]), 'Requests', true) : undefined), [byNetwork]);
  const methodChart = useMemo(
    () => (byMethod.length ? barConfig(byMethod.slice(0, 10).map((r) => r[0]), byMethod.slice(0, 10).map((r) => r[1]), 'Requests', true) : undefined),
    [byMethod],
  );

  const m = me.data;
  const quota = m?.limits.monthlyLimit ?? null;
  const used = quota !== null && m?.remaining.computeUnitsThisMonth !== null && m ? quota - (m.remaining.computeUnitsThisMonth ?? 0) : null;
  const reload = () => {
    stats.reload();
    me.reload();
  };
  usePolling(reload, POLL_MS);
  // When the figures on screen were read.
  const [readAt, setReadAt] = useState<Date | undefined>(undefined);
  useEffect(() => {
    if (s) setReadAt(new Date());
  }, [s]);

  return (
    <Page
      title="Usage"
      intro={
        <>
          Every admitted call of your keys, HTTP and WebSocket. This page reads the counts again every {POLL_MS / 1000} s while it is open; a call shows
          within about 5 s of being made.{' '}
          {readAt ? <span data-testid="usage-read-at">Last read {readAt.toLocaleTimeString('en-GB')}.</span> : null}
        </>
      }
      actions={
        <button type="button" class="secondary outline small" onClick={reload} aria-busy={stats.loading}>
          Refresh
        </button>
      }
    >
      <ErrorBanner error={stats.error ?? me.error} />
      <form class="row filters" onSubmit={(e) => e.preventDefault()} aria-label="Period and key">
        <label for="usage-start">
          From
          <input id="usage-start" type="date" value={start} max={end} onChange={(e) => setQuery({ start: e.currentTarget.value })} />
        </label>
        <label for="usage-end">
          To
          <input id="usage-end" type="date" value={end} min={start} onChange={(e) => setQuery({ end: e.currentTarget.value })} />
        </label>
        <label for="usage-key">
          Key
          <select id="usage-key" value={keyId} onChange={(e) => setQuery({ key: e.currentTarget.value })}>
            <option value="">All keys</option>
            {(keys.data ?? []).map((k) => (
              <option key={k.id} value={k.id}>
                {k.name} ({k.prefix}…)
              </option>
            ))}
          </select>
        </label>
      </form>

      <div class="cards">
        <article>
          <p class="muted">Requests in the period</p>
          <p class="figure" data-testid="total-requests">
            {s ? formatNumber(s.totalRequests) : '…'}
          </p>
          <small class="muted">{s ? `${s.period.start} to ${s.period.end}` : ''}</small>
        </article>
        <article>
          <p class="muted">Compute units in the period</p>
          <p class="figure">{s ? formatNumber(s.totalComputeUnits) : '…'}</p>
          <small class="muted">each method weighs a number of units</small>
        </article>
        <article>
          <p class="muted">Compute units this month</p>
          {m ? (
            quota === null ? (
              <p class="figure">no monthly quota</p>
            ) : (
              <>
                <p class="figure">
                  {formatNumber(used)} <small class="muted">of {formatNumber(quota)}</small>
                </p>
                <progress value={used ?? 0} max={quota} aria-label="Compute units used this month against the quota" />
                <small class="muted">{formatNumber(m.remaining.computeUnitsThisMonth)} left until the 1st (UTC)</small>
              </>
            )
          ) : (
            <p class="figure">…</p>
          )}
        </article>
      </div>

      <h2>Requests per day</h2>
      {!s && stats.loading ? <Loading what="usage" /> : null}
      {s && s.totalRequests === 0 ? (
        <EmptyState title="No requests in this period">
          <p>Calls made with your keys show here within about 5 s, without reloading. Try the curl line on the Endpoints page.</p>
        </EmptyState>
      ) : null}
      {s && s.totalRequests > 0 && daily ? <Chart config={daily} label={`Requests per day from ${s.period.start} to ${s.period.end}: ${formatNumber(s.totalRequests)} in all`} /> : null}

      {s && s.totalRequests > 0 ? (
        <div class="split">
          <section aria-labelledby="by-network">
            <h2 id="by-network">By network</h2>
            {networkChart ? <Chart config={networkChart} label="Requests by network" height="small" /> : null}
            <Ranking caption="Requests by network" rows={byNetwork} what="Network" />
          </section>
          <section aria-labelledby="by-method">
            <h2 id="by-method">By method</h2>
            {methodChart ? <Chart config={methodChart} label="Requests by method, the ten most used" height="small" /> : null}
            <Ranking caption="Requests by method" rows={byMethod} what="Method" />
          </section>
        </div>
      ) : null}

      <h2>Your plan: {PLAN_NAMES[m?.tier ?? (session.status === 'signed-in' ? session.user.tier : 'free')]}</h2>
      {m ? (
        <div class="table-wrap">
          <table class="limits">
            <caption class="offscreen">The plan's limits</caption>
            <tbody>
              <tr>
                <th scope="row">Requests per minute</th>
                <td class="num">{m.limits.requestsPerMinute === null ? 'unlimited' : formatNumber(m.limits.requestsPerMinute)}</td>
              </tr>
              <tr>
                <th scope="row">Requests per day</th>
                <td class="num">
                  {m.limits.dailyLimit === null ? 'unlimited' : `${formatNumber(m.limits.dailyLimit)} (${formatNumber(m.remaining.requestsToday)} left today)`}
                </td>
              </tr>
              <tr>
                <th scope="row">Compute units per month</th>
                <td class="num">{m.limits.monthlyLimit === null ? 'unlimited' : formatNumber(m.limits.monthlyLimit)}</td>
              </tr>
              <tr>
                <th scope="row">API keys</th>
                <td class="num">{m.limits.maxKeys === null ? 'unlimited' : formatNumber(m.limits.maxKeys)}</td>
              </tr>
              <tr>
                <th scope="row">Networks (all keys together)</th>
                <td class="num">{m.limits.maxNetworks === null ? 'all' : formatNumber(m.limits.maxNetworks)}</td>
              </tr>
            </tbody>
          </table>
        </div>
      ) : null}
    </Page>
  );
}
