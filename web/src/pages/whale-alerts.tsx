// Whale alerts (C35, C36): large native-coin transfers, newest first, refreshing themselves every
// few seconds; plans max and enterprise. Other plans see what the feature would give them.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type ApiError, useApi } from '../api.ts';
import type { WhaleAlert } from '../api-types.ts';
import { EmptyState, ErrorBanner, Loading, Page } from '../components/page.tsx';
import { useLocation, setQuery } from '../router.ts';
import {
  FEATURE_PLANS,
  formatUnits,
  formatUsd,
  loadMe,
  loadNetwork,
  loadNetworks,
  PlanFeature,
  shortHex,
  TxHash,
  ScrollTable,
  usePolling,
} from '../components/chain.tsx';
import '../components/chain.css';

/** C35's default whale-alert networks (`whaleAlerts.networks`); another one can be asked for with ?network=. */
const WHALE_NETWORKS = ['native-mainnet', 'native-testnet'];
const DEFAULT_MIN = '100000'; // C36
const PAGE = 20;
/** How often the list asks for new alerts (C36: an alert is listed within 5 s of its block). */
export const WHALE_POLL_MS = 5_000;

const day = (iso: string) => new Date(iso).toLocaleDateString('en-GB', { day: 'numeric', month: 'short' });
const clock = (iso: string) => new Date(iso).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit', second: '2-digit' });

function Gated(props: { tier: Parameters<typeof PlanFeature>[0]['tier'] }) {
  return (
    <PlanFeature feature="Whale alerts" plans={FEATURE_PLANS.whaleAlerts} tier={props.tier}>
      <ul>
        <li>a live list of native-coin transfers of 100,000 coins or more (you choose the threshold), newest first, refreshing itself;</li>
        <li>for each: amount, its value in US dollars at the time, sender, recipient, block and transaction;</li>
        <li>the same alerts pushed to your own server as <code>whale.alert</code> webhooks, filtered by network and amount.</li>
      </ul>
    </PlanFeature>
  );
}

function AlertList(props: { network: string; minValue: string }) {
  const [alerts, setAlerts] = useState<WhaleAlert[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [paused, setPaused] = useState(false);
  const [updatedAt, setUpdatedAt] = useState<Date | undefined>(undefined);
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  const [more, setMore] = useState<'idle' | 'busy' | 'done'>('idle');
  const [announce, setAnnounce] = useState('');
  const explorer = useApi(() => loadNetwork(props.network).then((n) => n.explorerUrl), [props.network]);
  const nets = useApi(loadNetworks);
  const symbol = nets.data?.find((n) => n.slug === props.network)?.currency.symbol ?? '';
  const generation = useRef(0);
  // What is listed, also outside renders: the poll compares each page with it.
  const shown = useRef<WhaleAlert[]>([]);
  const show = (list: WhaleAlert[]) => {
    shown.current = list;
    setAlerts(list);
  };

  const query = { network: props.network, minValue: props.minValue, limit: PAGE };

  // The first page, again on every tick: alerts not seen yet go on top (C36: newest first).
  const refresh = () => {
    const g = generation.current;
    api.get('/api/v1/whale-alerts', { query }).then(
      (page) => {
        if (g !== generation.current) return;
        const old = shown.current;
        const known = new Set(old.map((a) => a.id));
        const added = page.filter((a) => !known.has(a.id));
        if (old.length && added.length) {
          setFresh(new Set(added.map((a) => a.id)));
          setAnnounce(`${added.length} new whale ${added.length === 1 ? 'alert' : 'alerts'}`);
        }
        if (!old.length && page.length < PAGE) setMore('done');
        show(old.length ? [...added, ...old] : page);
        setLoaded(true);
        setError(undefined);
        setUpdatedAt(new Date());
      },
      (e: unknown) => {
        if (g !== generation.current) return;
        setError(e);
        setLoaded(true);
        // The plan changed meanwhile, or the filter is refused: asking again will not help.
        if ((e as ApiError).status === 403 || (e as ApiError).status === 400) setPaused(true);
      },
    );
  };

  useEffect(() => {
    generation.current++;
    show([]);
    setLoaded(false);
    setFresh(new Set());
    setMore('idle');
    setPaused(false);
    refresh();
  }, [props.network, props.minValue]);

  usePolling(refresh, WHALE_POLL_MS, !paused);

  const older = async () => {
    const last = alerts[alerts.length - 1];
    if (!last) return;
    setMore('busy');
    try {
      const page = await api.get('/api/v1/whale-alerts', { query: { ...query, before: last.id } });
      const old = shown.current;
      show([...old, ...page.filter((a) => !old.some((o) => o.id === a.id))]);
      setMore(page.length < PAGE ? 'done' : 'idle');
    } catch (e) {
      setError(e);
      setMore('idle');
    }
  };

  return (
    <>
      <div class="live">
        <span>
          <span class={`live-dot ${paused ? 'paused' : ''}`} aria-hidden="true" />
          {paused ? 'Updates paused' : `Live: checks every ${WHALE_POLL_MS / 1000} s`}
          {updatedAt ? <span class="muted"> · updated {updatedAt.toLocaleTimeString('en-GB')}</span> : null}
        </span>
        <button
          type="button"
          class="secondary outline small"
          onClick={() => {
            if (paused) refresh();
            setPaused(!paused);
          }}
        >
          {paused ? 'Resume updates' : 'Pause updates'}
        </button>
        <span class="offscreen" aria-live="polite">
          {announce}
        </span>
      </div>
      <ErrorBanner error={error} />
      {!loaded ? (
        <Loading what="whale alerts" />
      ) : alerts.length === 0 ? (
        <EmptyState title="No whale transfers yet">
          <p class="muted">
            Nothing of {formatUnits(props.minValue)} {symbol} or more on this network so far. New transfers show up here by themselves; a lower
            minimum shows smaller ones.
          </p>
        </EmptyState>
      ) : (
        <>
          <ScrollTable label="Whale alerts">
            <table class="striped whale-table">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col" class="num">
                    Amount
                  </th>
                  <th scope="col" class="num">
                    USD
                  </th>
                  <th scope="col" class="wide-only">
                    From → to
                  </th>
                  <th scope="col" class="wide-only num">
                    Block
                  </th>
                  <th scope="col" class="wide-only">
                    Transaction
                  </th>
                </tr>
              </thead>
              <tbody>
                {alerts.map((a) => (
                  <tr key={a.id} class={fresh.has(a.id) ? 'fresh' : undefined}>
                    <td class="nowrap">
                      <span class="wide-only">{day(a.timestamp)}, </span>
                      {clock(a.timestamp)}
                    </td>
                    <td class="num">
                      {formatUnits(a.value, 4)} {symbol}
                    </td>
                    <td class="num">{formatUsd(a.valueUsd)}</td>
                    <td class="addr wide-only">
                      <code title={a.from}>{shortHex(a.from, 4)}</code> → <code title={a.to}>{shortHex(a.to, 4)}</code>
                    </td>
                    <td class="wide-only num">{a.blockNumber.toLocaleString('en-US')}</td>
                    <td class="wide-only addr">
                      <TxHash hash={a.txHash} explorerUrl={explorer.data} short />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </ScrollTable>
          {more === 'done' ? (
            <p class="muted">That is every alert kept ({alerts.length}).</p>
          ) : (
            <button type="button" class="secondary" onClick={() => void older()} aria-busy={more === 'busy'} disabled={more === 'busy'}>
              Show older alerts
            </button>
          )}
        </>
      )}
    </>
  );
}

export default function WhaleAlertsPage() {
  const me = useApi(loadMe);
  const nets = useApi(loadNetworks);
  const { query } = useLocation();
  const network = query.get('network') || WHALE_NETWORKS[0]!;
  const minValue = query.get('minValue') || DEFAULT_MIN;
  const [draft, setDraft] = useState({ network, minValue });
  useEffect(() => setDraft({ network, minValue }), [network, minValue]);
  const minProblem = /^[0-9]+(\.[0-9]+)?$/.test(draft.minValue.trim()) ? undefined : 'A number of whole coins, such as 100000 or 0.5.';
  const choices = [...new Set([...WHALE_NETWORKS, network])].map((slug) => ({ slug, name: nets.data?.find((n) => n.slug === slug)?.name ?? slug }));

  let body;
  if (me.error) body = <ErrorBanner error={me.error} />;
  else if (!me.data) body = <Loading />;
  else if (!(FEATURE_PLANS.whaleAlerts as readonly string[]).includes(me.data.tier)) body = <Gated tier={me.data.tier} />;
  else
    body = (
      <>
        <form
          class="filters"
          aria-label="Filters"
          onSubmit={(e) => {
            e.preventDefault();
            if (minProblem) return;
            setQuery({ network: draft.network === WHALE_NETWORKS[0] ? undefined : draft.network, minValue: draft.minValue.trim() === DEFAULT_MIN ? undefined : draft.minValue.trim() });
          }}
        >
          <div>
            <label for="whale-network">Network</label>
            <select id="whale-network" value={draft.network} onChange={(e) => setDraft({ ...draft, network: e.currentTarget.value })}>
              {choices.map((c) => (
                <option key={c.slug} value={c.slug}>
                  {c.name}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="whale-min">Minimum amount (whole coins)</label>
            <input
              id="whale-min"
              inputMode="decimal"
              value={draft.minValue}
              onInput={(e) => setDraft({ ...draft, minValue: e.currentTarget.value })}
              aria-invalid={minProblem ? 'true' : undefined}
              aria-describedby={minProblem ? 'whale-min-error' : undefined}
            />
            {minProblem ? <small id="whale-min-error">{minProblem}</small> : null}
          </div>
          <div class="filter-actions">
            <button type="submit">Apply</button>
          </div>
        </form>
        <AlertList key={`${network}|${minValue}`} network={network} minValue={minValue} />
      </>
    );

  return (
    <Page title="Whale alerts" intro="Large transfers of the native coin, newest first, with their value in US dollars when they happened.">
      {body}
    </Page>
  );
}
