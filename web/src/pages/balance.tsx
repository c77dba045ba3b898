// The unified balance (C40): an address's native coins and configured tokens on every mainnet (or
// every testnet), one row per network with its USD value, and the total in USD.
import { useEffect, useState } from 'preact/hooks';
import { api, useApi } from '../api.ts';
import { EmptyState, ErrorBanner, formatTime, Loading, Page } from '../components/page.tsx';
import { checkAddress } from '../components/address.ts';
import { formatUnits, formatUsd, loadNetworks, ScrollTable } from '../components/chain.tsx';
import { setQuery, useLocation } from '../router.ts';
import '../components/chain.css';

function Result(props: { address: string; testnets: boolean }) {
  const nets = useApi(loadNetworks);
  const data = useApi(() => api.get('/api/v1/chain-abstraction/balance/{address}', { params: { address: props.address }, query: { testnets: props.testnets ? true : undefined } }), [
    props.address,
    props.testnets,
  ]);
  const name = (slug: string) => nets.data?.find((n) => n.slug === slug)?.name ?? slug;
  const b = data.data;
  if (data.error) return <ErrorBanner error={data.error} />;
  if (!b) return <Loading what="the balance" />;
  const rows = b.assets.flatMap((a) => a.chains.map((c) => ({ ...c, symbol: a.symbol })));
  return (
    <>
      <div class="cards">
        <article>
          <p class="muted">Total in USD</p>
          <p class={formatUsd(b.totalUsd).length > 12 ? 'figure long' : 'figure'} data-testid="total-usd">
            {formatUsd(b.totalUsd)}
          </p>
          <small class="muted">
            every amount that has a price · read {formatTime(b.updatedAt)}
          </small>
        </article>
        <article>
          <p class="muted">Address</p>
          <p>
            <code class="break">{b.address}</code>
          </p>
          <small class="muted">
            {rows.length} {rows.length === 1 ? 'balance' : 'balances'} on {new Set(rows.map((r) => r.network)).size} networks
          </small>
        </article>
      </div>
      {b.errors.length ? (
        <div class="banner info" role="status">
          <div>
          <p>Not read now (the rest is shown):</p>
          <ul>
            {b.errors.map((e) => (
              <li key={`${e.network}-${e.code}-${e.message}`}>
                {name(e.network)}: {e.message}
              </li>
            ))}
          </ul>
          </div>
        </div>
      ) : null}
      {rows.length === 0 ? (
        <EmptyState title="Nothing to show">
          <p class="muted">No network answered for this address.</p>
        </EmptyState>
      ) : (
        <ScrollTable label="Balance per network">
          <table class="striped balance-table">
            <caption class="offscreen">The address's balance on each network, with its value in USD</caption>
            <thead>
              <tr>
                <th scope="col">Network</th>
                <th scope="col">Asset</th>
                <th scope="col" class="num">
                  Balance
                </th>
                <th scope="col" class="num">
                  USD
                </th>
                <th scope="col" class="num wide-only">
                  Block
                </th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={`${r.network}-${r.symbol}`} data-network={r.network}>
                  <th scope="row">{name(r.network)}</th>
                  <td>{r.symbol}</td>
                  <td class="num" title={`${r.balance} ${r.symbol}`}>
                    {formatUnits(r.balance, 6)}
                  </td>
                  <td class="num">{formatUsd(r.usd)}</td>
                  <td class="num wide-only">{r.blockNumber.toLocaleString('en-US')}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row" colSpan={3}>
                  Total
                </th>
                <td class="num">
                  <strong>{formatUsd(b.totalUsd)}</strong>
                </td>
                <td class="wide-only" />
              </tr>
            </tfoot>
          </table>
        </ScrollTable>
      )}
      <p class="muted">Balances are read at the latest block of each network and kept for 5 s; amounts are cut, never rounded up, to 6 decimals.</p>
    </>
  );
}

export default function BalancePage() {
  const { query } = useLocation();
  const asked = query.get('address') ?? '';
  const testnets = query.get('testnets') === '1';
  const [text, setText] = useState(asked);
  const [problem, setProblem] = useState<string | undefined>(undefined);
  useEffect(() => setText(asked), [asked]);
  const checked = asked ? checkAddress(asked, true, { allowZero: true }) : undefined;
  const submit = (e: Event) => {
    e.preventDefault();
    const c = checkAddress(text, true, { allowZero: true });
    if ('problem' in c) return setProblem(c.problem);
    setProblem(undefined);
    setQuery({ address: c.address });
  };
  return (
    <Page title="Balance" intro="An address's coins and tokens on every network at once, with their value in US dollars.">
      <form onSubmit={submit} noValidate aria-label="Look up a balance">
        <div class="row">
          <label for="balance-address">
            Address
            <input
              id="balance-address"
              autoComplete="off"
              spellcheck={false}
              placeholder="0x… or xdc…"
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
              aria-invalid={problem ? true : undefined}
              aria-describedby="balance-address-help"
            />
            <small id="balance-address-help">{problem ?? '0x and 40 hex digits (xdc… too); mixed case must be the EIP-55 checksum.'}</small>
          </label>
        </div>
        <label for="balance-testnets">
          <input id="balance-testnets" type="checkbox" role="switch" checked={testnets} onChange={(e) => setQuery({ testnets: e.currentTarget.checked ? '1' : undefined })} />
          Testnets instead of mainnets
        </label>
        <button type="submit">Show balance</button>
      </form>
      {checked && 'address' in checked ? <Result address={checked.address} testnets={testnets} /> : null}
      {checked && 'problem' in checked ? <ErrorBanner error={new Error(checked.problem)} /> : null}
      {!asked ? (
        <EmptyState title="Enter an address">
          <p class="muted">Its native coin on every network, and the tokens the gateway knows, appear here with the total in USD.</p>
        </EmptyState>
      ) : null}
    </Page>
  );
}
