// The faucet (C28–C30): testnet coins to an address, the faucet wallets' balances and the
// address's own balance on the chosen network.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, errorText, fieldErrors, useApi } from '../api.ts';
import type { FaucetGrant, NetworkSummary, RequestFaucetBody } from '../api-types.ts';
import { useForm } from '../components/form.ts';
import { EmptyState, ErrorBanner, Loading, Page } from '../components/page.tsx';
import { checkAddress, checkAmount, isNativeChain } from '../components/address.ts';
import { formatUnits, loadNetwork, loadNetworks, shortHex, TxHash, usePolling, ScrollTable } from '../components/chain.tsx';
import '../components/chain.css';

/** How often balances are read again while the page is open (a grant is mined after its answer; C40 caches 5 s). */
const BALANCE_POLL_MS = 6_000;
/**
 * After a grant, both balances are read again at these delays: the answer comes when the node
 * accepts the transaction, before it is mined (a block or two), and C40 keeps a read for 5 s.
 */
const AFTER_GRANT_MS = [1_500, 3_500, 6_000, 10_000];

/** C29's cooldown in words: when the next grant is possible, not a count of seconds. */
function grantErrorText(err: unknown): unknown {
  if (!(err instanceof ApiError) || err.code !== 'FAUCET_COOLDOWN') return err;
  const m = /\s*Try again in (\d+) s\.$/.exec(err.message);
  const base = err.message.replace(/\s*Try again in \d+ s\.$/, '').replace(/([^.])$/, '$1.');
  if (!m) return new Error(base);
  const s = Number(m[1]);
  const minutes = Math.max(1, Math.ceil(s / 60));
  const span = minutes >= 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${minutes} min`;
  const at = new Date(Date.now() + s * 1000).toLocaleString('en-GB', { weekday: 'short', hour: '2-digit', minute: '2-digit' });
  return new Error(`${base} The next grant is possible in ${span} (${at}).`);
}

/** The address's native balance on one network (C40's route, one network asked), read again every few seconds. */
function AddressBalance(props: { address: string; network: NetworkSummary; refresh: number }) {
  const { data, error, loading, reload } = useApi(
    () => api.get('/api/v1/chain-abstraction/balance/{address}', { params: { address: props.address }, query: { networks: props.network.slug } }),
    [props.address, props.network.slug, props.refresh],
  );
  usePolling(reload, BALANCE_POLL_MS);
  const chain = data?.assets.find((a) => a.symbol === props.network.currency.symbol)?.chains.find((c) => c.network === props.network.slug);
  const failed = data?.errors.find((e) => e.network === props.network.slug);
  return (
    <p class="address-balance" aria-live="polite">
      {loading && !data ? (
        <span class="muted">Reading the address's balance…</span>
      ) : error || failed ? (
        <span class="muted">The address's balance could not be read now: {failed ? failed.message : errorText(error)}</span>
      ) : chain ? (
        <>
          <code>{shortHex(props.address)}</code> holds{' '}
          <strong>
            {formatUnits(chain.balance, 6)} {props.network.currency.symbol}
          </strong>{' '}
          on {props.network.name} <span class="muted">(block {chain.blockNumber.toLocaleString('en-US')})</span>
        </>
      ) : null}
    </p>
  );
}

export default function FaucetPage() {
  const balances = useApi(() => api.get('/api/v1/faucet/balance'));
  const nets = useApi(loadNetworks);
  const [network, setNetwork] = useState('');
  const [address, setAddress] = useState('');
  const [amount, setAmount] = useState('');
  const [touched, setTouched] = useState(false);
  // A 400 names its fields under the inputs; the banner says the rest in words.
  const form = useForm({
    shownError: (err) =>
      err instanceof ApiError && err.code === 'VALIDATION_ERROR' && Object.keys(fieldErrors(err)).length ? new Error('Check the fields marked above.') : grantErrorText(err),
  });
  const serverFields = form.fields;
  const [grant, setGrant] = useState<{ grant: FaucetGrant; explorerUrl: string | null; symbol: string; name: string } | undefined>(undefined);
  const [refresh, setRefresh] = useState(0);
  usePolling(balances.reload, BALANCE_POLL_MS * 2);
  // A grant changes the wallet's and the recipient's balances once mined: read them again then.
  useEffect(() => {
    if (!grant) return;
    const timers = AFTER_GRANT_MS.map((ms) =>
      setTimeout(() => {
        balances.reload();
        setRefresh((n) => n + 1);
      }, ms),
    );
    return () => timers.forEach(clearTimeout);
  }, [grant]);

  const faucetSlugs = Object.keys(balances.data ?? {});
  const testnets = (nets.data ?? []).filter((n) => n.type === 'testnet' && faucetSlugs.includes(n.slug));
  // Networks the faucet serves that /networks does not describe still get a choice, by slug.
  const options = faucetSlugs.map((slug) => testnets.find((n) => n.slug === slug) ?? { slug, name: slug, chainId: 0, currency: { symbol: balances.data?.[slug]?.symbol ?? '', decimals: 18 } });
  useEffect(() => {
    if (!network && options[0]) setNetwork(options[0].slug);
  }, [options.length]);
  const chosen = testnets.find((n) => n.slug === network);
  const symbol = chosen?.currency.symbol ?? balances.data?.[network]?.symbol ?? '';

  // C28, checked as the gateway does; a server answer about a field wins until that field changes.
  const checked = checkAddress(address, isNativeChain(chosen?.chainId));
  const addressProblem = serverFields.address ?? (touched && 'problem' in checked ? checked.problem : undefined);
  const amountProblem = serverFields.amount ?? (amount.trim() ? checkAmount(amount, chosen?.currency.decimals ?? 18) : undefined);
  const validAddress = 'address' in checked ? checked.address : undefined;

  const submit = async (e: Event) => {
    e.preventDefault();
    setTouched(true);
    form.setError(undefined);
    if ('problem' in checked || (amount.trim() && checkAmount(amount, chosen?.currency.decimals ?? 18)) || !network) return;
    await form.submit(async () => {
      setGrant(undefined);
      const body: RequestFaucetBody = { network, address: address.trim() };
      if (amount.trim()) body.amount = amount.trim();
      const answer = await api.post('/api/v1/faucet/request', { body });
      const detail = await loadNetwork(answer.network).catch(() => undefined);
      setGrant({ grant: answer, explorerUrl: detail?.explorerUrl ?? null, symbol, name: chosen?.name ?? answer.network });
      setRefresh((n) => n + 1);
      balances.reload();
    });
  };

  const forget = form.forget;

  if (balances.loading && !balances.data) return <Page title="Faucet"><Loading what="the faucet" /></Page>;

  return (
    <Page title="Faucet" intro="Free testnet coins for trying things out: one grant per address and per account on each network every 24 hours.">
      <ErrorBanner error={balances.error ?? nets.error} />
      {faucetSlugs.length === 0 && !balances.error ? (
        <EmptyState title="No faucet on this gateway">
          <p class="muted">The operator has not given any testnet a faucet wallet.</p>
        </EmptyState>
      ) : (
        <>
          <form onSubmit={(e) => void submit(e)} noValidate aria-labelledby="faucet-form-title">
            <h2 id="faucet-form-title" class="h-section">
              Request coins
            </h2>
            <div class="row">
              <div>
                <label for="faucet-network">Network</label>
                <select
                  id="faucet-network"
                  name="network"
                  value={network}
                  onChange={(e) => {
                    setNetwork(e.currentTarget.value);
                    forget('network');
                  }}
                  aria-invalid={serverFields.network ? 'true' : undefined}
                  aria-describedby={serverFields.network ? 'faucet-network-error' : undefined}
                >
                  {options.map((n) => (
                    <option key={n.slug} value={n.slug}>
                      {n.name}
                    </option>
                  ))}
                </select>
                {serverFields.network ? <small id="faucet-network-error">{serverFields.network}</small> : null}
              </div>
              <div>
                <label for="faucet-amount">Amount{symbol ? ` (${symbol})` : ''}, optional</label>
                <input
                  id="faucet-amount"
                  name="amount"
                  inputMode="decimal"
                  autoComplete="off"
                  placeholder="1"
                  value={amount}
                  onInput={(e) => {
                    setAmount(e.currentTarget.value);
                    forget('amount');
                  }}
                  aria-invalid={amountProblem ? 'true' : undefined}
                  aria-describedby="faucet-amount-help"
                />
                <small id="faucet-amount-help">{amountProblem ?? 'Empty: the network’s default amount.'}</small>
              </div>
            </div>
            <div>
              <label for="faucet-address">Recipient address</label>
              <input
                id="faucet-address"
                name="address"
                autoComplete="off"
                spellcheck={false}
                placeholder={isNativeChain(chosen?.chainId) ? '0x… or xdc…' : '0x…'}
                value={address}
                onInput={(e) => {
                  setAddress(e.currentTarget.value);
                  forget('address');
                }}
                onBlur={() => address.trim() && setTouched(true)}
                aria-invalid={addressProblem ? 'true' : validAddress ? 'false' : undefined}
                aria-describedby="faucet-address-help"
              />
              <small id="faucet-address-help">
                {addressProblem ??
                  (isNativeChain(chosen?.chainId)
                    ? '0x and 40 hex digits (xdc… too); mixed case must be the EIP-55 checksum.'
                    : '0x and 40 hex digits; mixed case must be the EIP-55 checksum.')}
              </small>
            </div>
            {validAddress && chosen ? <AddressBalance address={validAddress} network={chosen} refresh={refresh} /> : null}
            <ErrorBanner error={form.error} onDismiss={() => form.setError(undefined)} />
            <button type="submit" aria-busy={form.busy} disabled={form.busy}>
              {form.busy ? 'Sending…' : 'Send test coins'}
            </button>
          </form>

          {grant ? (
            <div class="banner ok grant" role="status">
              <div>
                <p>
                  Sent <strong>{formatUnits(grant.grant.amount)} {grant.symbol}</strong> to <code>{grant.grant.recipient}</code> on {grant.name}. The
                  node accepted the transaction; it is mined shortly.
                </p>
                <p>
                  Transaction: <TxHash hash={grant.grant.txHash} explorerUrl={grant.explorerUrl} />
                  {grant.explorerUrl ? null : <span class="muted"> (this network has no block explorer)</span>}
                </p>
              </div>
            </div>
          ) : null}

          <h2 class="h-section">Faucet wallets</h2>
          <ScrollTable label="Faucet wallets">
            <table class="striped">
              <thead>
                <tr>
                  <th scope="col">Network</th>
                  <th scope="col">Balance</th>
                  <th scope="col">Wallet</th>
                </tr>
              </thead>
              <tbody>
                {faucetSlugs.map((slug) => {
                  const b = balances.data?.[slug];
                  const name = testnets.find((n) => n.slug === slug)?.name ?? slug;
                  return (
                    <tr key={slug}>
                      <th scope="row">{name}</th>
                      <td>
                        {b?.balance === null || b?.balance === undefined ? (
                          <span class="muted">unknown now{b?.error ? `: ${b.error}` : ''}</span>
                        ) : (
                          `${formatUnits(b.balance, 6)} ${b.symbol}`
                        )}
                      </td>
                      <td>
                        <code title={b?.faucetAddress}>{b ? shortHex(b.faucetAddress) : ''}</code>
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </ScrollTable>
        </>
      )}
    </Page>
  );
}
