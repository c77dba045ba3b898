// Advanced analytics (C46): latency percentiles over time, error and refusal rates, top
// methods, by network and by key, from GET /usage/analytics. Plans pro, max and enterprise; a free
// account sees what the plan would give it.
import type { ChartConfiguration } from 'chart.js';
import { useMemo } from 'preact/hooks';
import { api, useApi } from '../api.ts';
import type { Analytics } from '../api-types.ts';
import { Chart, EmptyState, ErrorBanner, formatNumber, Loading, Page } from '../components/page.tsx';
import { setQuery, useLocation } from '../router.ts';
import { FEATURE_PLANS, loadMe, loadNetworks, PlanFeature, type Tier, ScrollTable } from '../components/chain.tsx';
import '../components/chain.css';

type Ms = number | null;

const DAY_MS = 86_400_000;
const today = () => new Date().toISOString().slice(0, 10);
const daysBefore = (day: string, n: number) => new Date(Date.parse(`${day}T00:00:00Z`) - n * DAY_MS).toISOString().slice(0, 10);

/** Quick ranges: C46 allows `hour` for periods of up to 7 days. */
const RANGES = [
  { id: '2d', label: '2 days, hourly', days: 2, granularity: 'hour' },
  { id: '7d', label: '7 days, hourly', days: 7, granularity: 'hour' },
  { id: '30d', label: '30 days, daily', days: 30, granularity: 'day' },
  { id: '90d', label: '90 days, daily', days: 90, granularity: 'day' },
] as const;

const REFUSALS: Array<[keyof Analytics['series'][number]['refused'], string]> = [
  ['rate', 'rate limit'],
  ['quota', 'quota'],
  ['key', 'key'],
  ['network', 'network not allowed'],
  ['method', 'method not allowed'],
  ['access', "the key's allowlists"],
];

const pct = (x: number) => `${(x * 100).toFixed(x > 0 && x < 0.001 ? 3 : 1)}%`;
const ms = (x: Ms) => (x === null ? '—' : `${x < 10 ? x.toFixed(1) : Math.round(x).toLocaleString('en-US')} ms`);
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

function bucketLabel(iso: string, granularity: 'hour' | 'day'): string {
  const d = new Date(iso);
  const day = d.toLocaleDateString('en-GB', { day: 'numeric', month: 'short', timeZone: 'UTC' });
  return granularity === 'hour' ? `${day} ${d.toISOString().slice(11, 16)}` : day;
}

// Colours with enough contrast on white for lines and bars (WCAG's 3:1 for graphics).
const BLUE = '#1565c0';
const ORANGE = '#c75000';
const RED = '#b3261e';
const GREEN = '#2e7d32';
const PURPLE = '#6a1b9a';

function Gated(props: { tier: Tier }) {
  return (
    <PlanFeature feature="Advanced analytics" plans={FEATURE_PLANS.analytics} tier={props.tier}>
      <ul>
        <li>latency of your calls over time, as measured in the gateway: median, 95th and 99th percentile, by hour or by day;</li>
        <li>error rates (node errors and upstream failures) and the calls refused, by reason: rate limit, quota, key, network, method, the key's own allowlists;</li>
        <li>your top methods with their error rate and p95 latency, and the same by network and by API key, over up to 400 days.</li>
      </ul>
    </PlanFeature>
  );
}

function Charts(props: { a: Analytics; networkName: (slug: string) => string }) {
  const { a } = props;
  const labels = a.series.map((s) => bucketLabel(s.start, a.granularity));
  const totals = useMemo(() => {
    const requests = a.series.reduce((n, s) => n + s.requests, 0);
    const errors = a.series.reduce((n, s) => n + s.errors.node + s.errors.upstream, 0);
    const refused = a.series.reduce((n, s) => n + sum(s.refused), 0);
    const cu = a.series.reduce((n, s) => n + s.computeUnits, 0);
    return { requests, errors, refused, cu };
  }, [a]);

  const latency = useMemo<ChartConfiguration>(
    () => ({
      type: 'line',
      data: {
        labels,
        datasets: [
          { label: 'p50', data: a.series.map((s) => s.latencyMs.p50), borderColor: GREEN, backgroundColor: GREEN, spanGaps: false, pointRadius: 2 },
          { label: 'p95', data: a.series.map((s) => s.latencyMs.p95), borderColor: ORANGE, backgroundColor: ORANGE, spanGaps: false, pointRadius: 2 },
          { label: 'p99', data: a.series.map((s) => s.latencyMs.p99), borderColor: RED, backgroundColor: RED, spanGaps: false, pointRadius: 2 },
        ],
      },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: 'ms' } } }, plugins: { legend: { position: 'bottom' } } },
    }),
    [a],
  );

  const rates = useMemo<ChartConfiguration>(
    () => ({
      type: 'line',
      data: {
        labels,
        datasets: [
          {
            label: 'errors (% of calls)',
            data: a.series.map((s) => (s.requests ? ((s.errors.node + s.errors.upstream) / s.requests) * 100 : null)),
            borderColor: RED,
            backgroundColor: RED,
            pointRadius: 2,
          },
          {
            label: 'refused (% of calls made)',
            data: a.series.map((s) => {
              const r = sum(s.refused);
              return s.requests + r ? (r / (s.requests + r)) * 100 : null;
            }),
            borderColor: PURPLE,
            backgroundColor: PURPLE,
            pointRadius: 2,
          },
        ],
      },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: '%' } } }, plugins: { legend: { position: 'bottom' } } },
    }),
    [a],
  );

  const methods = useMemo<ChartConfiguration>(
    () => ({
      type: 'bar',
      data: { labels: a.topMethods.map((m) => m.method), datasets: [{ label: 'requests', data: a.topMethods.map((m) => m.requests), backgroundColor: BLUE }] },
      // Every method named: Chart.js skips labels that it thinks crowd the axis unless told not to.
      options: { indexAxis: 'y', plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { precision: 0 } }, y: { ticks: { autoSkip: false } } } },
    }),
    [a],
  );

  return (
    <>
      <div class="cards">
        <article>
          <header>Requests</header>
          <p class="figure">{formatNumber(totals.requests)}</p>
          <small class="muted">{formatNumber(totals.cu)} compute units</small>
        </article>
        <article>
          <header>Error rate</header>
          <p class="figure">{totals.requests ? pct(totals.errors / totals.requests) : '—'}</p>
          <small class="muted">{formatNumber(totals.errors)} calls answered with an error</small>
        </article>
        <article>
          <header>Refused</header>
          <p class="figure">{formatNumber(totals.refused)}</p>
          <small class="muted">
            {totals.requests + totals.refused ? `${pct(totals.refused / (totals.requests + totals.refused))} of the calls made; not counted as usage` : 'not counted as usage'}
          </small>
        </article>
      </div>
      <div class="chart-grid">
        <article>
          <h2 class="h-chart">Latency</h2>
          <Chart config={latency} label={`Latency percentiles p50, p95 and p99 per ${a.granularity}, in milliseconds`} />
        </article>
        <article>
          <h2 class="h-chart">Errors and refusals</h2>
          <Chart config={rates} label={`Error rate and refusal rate per ${a.granularity}, in percent`} />
        </article>
      </div>
      <details>
        <summary>Figures per {a.granularity}</summary>
        <ScrollTable label="Figures per bucket">
          <table class="striped">
            <thead>
              <tr>
                <th scope="col">{a.granularity === 'hour' ? 'Hour (UTC)' : 'Day (UTC)'}</th>
                <th scope="col" class="num">Requests</th>
                <th scope="col" class="num">Errors</th>
                <th scope="col" class="num">Refused</th>
                <th scope="col" class="num">p50</th>
                <th scope="col" class="num">p95</th>
                <th scope="col" class="num">p99</th>
              </tr>
            </thead>
            <tbody>
              {a.series.map((s, n) => (
                <tr key={s.start}>
                  <th scope="row">{labels[n]}</th>
                  <td class="num">{formatNumber(s.requests)}</td>
                  <td class="num">{formatNumber(s.errors.node + s.errors.upstream)}</td>
                  <td class="num" title={REFUSALS.map(([k, w]) => `${w}: ${s.refused[k]}`).join(', ')}>
                    {formatNumber(sum(s.refused))}
                  </td>
                  <td class="num">{ms(s.latencyMs.p50)}</td>
                  <td class="num">{ms(s.latencyMs.p95)}</td>
                  <td class="num">{ms(s.latencyMs.p99)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollTable>
      </details>

      <h2 class="h-section">Refused calls by reason</h2>
      <div class="tags refusals">
        {REFUSALS.map(([k, words]) => (
          <span key={k} class="tag">
            {words}: {formatNumber(a.series.reduce((n, s) => n + s.refused[k], 0))}
          </span>
        ))}
      </div>

      <h2 class="h-section">Top methods</h2>
      {a.topMethods.length === 0 ? (
        <EmptyState title="No calls in this period" />
      ) : (
        <>
          <Chart config={methods} label="Requests per method, the ten most used" height={a.topMethods.length > 5 ? 'medium' : 'small'} />
          <ScrollTable label="Top methods">
            <table class="striped top-methods">
              <thead>
                <tr>
                  <th scope="col">Method</th>
                  <th scope="col" class="num">Requests</th>
                  <th scope="col" class="num wide-only">Compute units</th>
                  <th scope="col" class="num">Errors</th>
                  <th scope="col" class="num">p95</th>
                </tr>
              </thead>
              <tbody>
                {a.topMethods.map((m) => (
                  <tr key={m.method}>
                    <th scope="row">
                      <code>{m.method}</code>
                    </th>
                    <td class="num">{formatNumber(m.requests)}</td>
                    <td class="num wide-only">{formatNumber(m.computeUnits)}</td>
                    <td class="num">{pct(m.errorRate)}</td>
                    <td class="num">{ms(m.p95Ms)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </ScrollTable>
        </>
      )}

      <div class="chart-grid">
        <article>
          <h3>By network</h3>
          {a.byNetwork.length === 0 ? (
            <p class="muted">No calls in this period.</p>
          ) : (
            <ScrollTable label="By network">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Network</th>
                    <th scope="col" class="num">Requests</th>
                    <th scope="col" class="num">Errors</th>
                    <th scope="col" class="num">p95</th>
                  </tr>
                </thead>
                <tbody>
                  {a.byNetwork.map((n) => (
                    <tr key={n.network}>
                      <th scope="row">{props.networkName(n.network)}</th>
                      <td class="num">{formatNumber(n.requests)}</td>
                      <td class="num">{pct(n.errorRate)}</td>
                      <td class="num">{ms(n.p95Ms)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </ScrollTable>
          )}
        </article>
        <article>
          <h3>By API key</h3>
          {a.byKey.length === 0 ? (
            <p class="muted">No calls in this period.</p>
          ) : (
            <ScrollTable label="By API key">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Key</th>
                    <th scope="col" class="num">Requests</th>
                    <th scope="col" class="num">Compute units</th>
                  </tr>
                </thead>
                <tbody>
                  {a.byKey.map((k) => (
                    <tr key={k.apiKeyId}>
                      <th scope="row">{k.name ?? <span class="muted">deleted key</span>}</th>
                      <td class="num">{formatNumber(k.requests)}</td>
                      <td class="num">{formatNumber(k.computeUnits)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </ScrollTable>
          )}
        </article>
      </div>
    </>
  );
}

function AnalyticsView() {
  const { query } = useLocation();
  const nets = useApi(loadNetworks);
  const rangeId = query.get('range') ?? RANGES[0].id;
  const range = RANGES.find((r) => r.id === rangeId) ?? RANGES[0];
  const network = query.get('network') ?? '';
  const end = today();
  const params = { startDate: daysBefore(end, range.days - 1), endDate: end, granularity: range.granularity, network: network || undefined };
  const data = useApi(() => api.get('/api/v1/usage/analytics', { query: params }), [range.id, network, end]);
  const networkName = (slug: string) => nets.data?.find((n) => n.slug === slug)?.name ?? slug;

  return (
    <>
      <form class="filters" aria-label="Period and network" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="analytics-period">Period</label>
          <select id="analytics-period" value={range.id} onChange={(e) => setQuery({ range: e.currentTarget.value === RANGES[0].id ? undefined : e.currentTarget.value })}>
            {RANGES.map((r) => (
              <option key={r.id} value={r.id}>
                {r.label}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="analytics-network">Network</label>
          <select id="analytics-network" value={network} onChange={(e) => setQuery({ network: e.currentTarget.value || undefined })}>
            <option value="">All networks</option>
            {(nets.data ?? []).map((n) => (
              <option key={n.slug} value={n.slug}>
                {n.name}
              </option>
            ))}
          </select>
        </div>
        <div class="filter-actions">
          <button
            type="button"
            class="secondary"
            aria-busy={data.loading}
            onClick={data.reload}
          >
            Refresh
          </button>
        </div>
      </form>
      <p class="muted period-note">
        {params.startDate} to {params.endDate} (UTC). Latency is measured inside the gateway, from a call's arrival to its answer; new calls show up within a
        few seconds.
      </p>
      <ErrorBanner error={data.error} />
      {!data.data ? (
        data.error ? null : (
          <Loading what="analytics" />
        )
      ) : data.data.series.every((s) => s.requests === 0 && sum(s.refused) === 0) ? (
        <EmptyState title="No calls in this period">
          <p class="muted">Send a few calls with one of your API keys; they appear here within a few seconds.</p>
        </EmptyState>
      ) : (
        <Charts a={data.data} networkName={networkName} />
      )}
    </>
  );
}

export default function AnalyticsPage() {
  const me = useApi(loadMe);
  let body;
  if (me.error) body = <ErrorBanner error={me.error} />;
  else if (!me.data) body = <Loading />;
  else if (!(FEATURE_PLANS.analytics as readonly string[]).includes(me.data.tier)) body = <Gated tier={me.data.tier} />;
  else body = <AnalyticsView />;
  return (
    <Page title="Analytics" intro="How your calls fare: latency, errors and refusals over time, and which methods, networks and keys they use.">
      {body}
    </Page>
  );
}
