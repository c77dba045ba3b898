// Cross-chain intents (C41, C42): a quote (route, amount, fee) before anything is locked, the open
// transaction to sign (with the browser's wallet when there is one), the account's intents and a
// status view that follows one until it is settled, expired or refunded.
import { useEffect, useState } from 'preact/hooks';
import { api, errorText, useApi } from '../api.ts';
import type { CreateIntentBody, Intent, IntentStep, NetworkSummary } from '../api-types.ts';
import { useForm } from '../components/form.ts';
import { EmptyState, ErrorBanner, formatTime, Link, Loading, Notice, Page } from '../components/page.tsx';
import { setQuery, useLocation } from '../router.ts';
import { checkAddress, checkAmount, isNativeChain } from '../components/address.ts';
import { formatUnits, loadMe, loadNetwork, loadNetworks, shortHex, TxHash, usePolling, ScrollTable, WrapCopy } from '../components/chain.tsx';
import { estimateWithWallet, injectedWallet, sendWithWallet, walletAccount, walletErrorText } from '../components/wallet.ts';
import '../components/chain.css';

type Status = Intent['status'];

const FINAL: Status[] = ['settled', 'expired', 'refunded'];
const STATUS_WORDS: Record<Status, string> = {
  awaiting_open: 'waiting for the open',
  opened: 'opened',
  filled: 'filled',
  settled: 'settled',
  expired: 'expired',
  refunded: 'refunded',
};
/** How often a followed intent is asked for while it is under way. */
const FOLLOW_MS = 3_000;

/**
 * C41's default routes: ordered pairs of networks of one type (never mainnet to testnet) whose
 * native coin is the same asset (same symbol). The gateway's own list may be narrower (settlers
 * and solver wallets); it says so in words when a pair is not served.
 */
export function routesOf(networks: NetworkSummary[]): Map<string, NetworkSummary[]> {
  const out = new Map<string, NetworkSummary[]>();
  for (const a of networks) {
    const to = networks.filter((b) => b.slug !== a.slug && b.type === a.type && b.currency.symbol === a.currency.symbol);
    if (to.length) out.set(a.slug, to);
  }
  return out;
}

const shortTime = (iso: string) => new Date(iso).toLocaleString('en-GB', { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' });

const inMinutes = (unix: number) => {
  const m = Math.round((unix * 1000 - Date.now()) / 60_000);
  return m <= 0 ? 'now' : m === 1 ? 'in a minute' : `in ${m} minutes`;
};

function StatusTag(props: { status: Status }) {
  return <span class={`tag status-${props.status}`}>{STATUS_WORDS[props.status]}</span>;
}

/**
 * The route the form starts on: the first (testnets first) whose two networks the account's keys
 * cover, since the wallet sends the open through a key; else the first testnet route.
 */
function firstRoute(routes: Map<string, NetworkSummary[]>, froms: NetworkSummary[], covered: ReadonlySet<string>): { from: string; to: string } {
  const ordered = [...froms.filter((n) => n.type === 'testnet'), ...froms.filter((n) => n.type !== 'testnet')];
  for (const f of ordered) {
    const to = covered.has(f.slug) ? routes.get(f.slug)?.find((n) => covered.has(n.slug)) : undefined;
    if (to) return { from: f.slug, to: to.slug };
  }
  const from = ordered[0]?.slug ?? '';
  return { from, to: routes.get(from)?.[0]?.slug ?? '' };
}

function QuoteForm(props: { networks: NetworkSummary[]; covered: ReadonlySet<string>; maxNetworks: number | null | undefined; onQuoted: (i: Intent) => void }) {
  const routes = routesOf(props.networks);
  const froms = props.networks.filter((n) => routes.has(n.slug));
  const [start] = useState(() => firstRoute(routes, froms, props.covered));
  const [from, setFrom] = useState(start.from);
  const tos = routes.get(from) ?? [];
  const [to, setTo] = useState(start.to);
  useEffect(() => {
    if (!tos.some((n) => n.slug === to)) setTo((tos.find((n) => props.covered.has(n.slug)) ?? tos[0])?.slug ?? '');
  }, [from]);
  const uncovered = [from, to].filter((slug) => slug && !props.covered.has(slug)).map((slug) => props.networks.find((n) => n.slug === slug)?.name ?? slug);
  const [amount, setAmount] = useState('');
  const [sender, setSender] = useState('');
  const [recipient, setRecipient] = useState('');
  const [tried, setTried] = useState(false);
  const form = useForm();
  const fields = form.fields;
  const wallet = injectedWallet();
  const fromNet = props.networks.find((n) => n.slug === from);
  const native = isNativeChain(fromNet?.chainId);

  const senderCheck = checkAddress(sender, native);
  const recipientCheck = recipient.trim() ? checkAddress(recipient, native) : undefined;
  const amountProblem = amount.trim() ? checkAmount(amount, fromNet?.currency.decimals ?? 18) : 'Enter an amount.';
  const problems = {
    amount: fields.amount ?? (tried ? amountProblem : undefined),
    sender: fields.sender ?? (tried && 'problem' in senderCheck ? senderCheck.problem : undefined),
    recipient: fields.recipient ?? (recipientCheck && 'problem' in recipientCheck ? recipientCheck.problem : undefined),
  };

  if (!froms.length)
    return (
      <EmptyState title="No routes">
        <p class="muted">No two networks here share a native coin, so there is nothing to move between them.</p>
      </EmptyState>
    );

  const submit = async (e: Event) => {
    e.preventDefault();
    setTried(true);
    form.clear();
    if (amountProblem || 'problem' in senderCheck || (recipientCheck && 'problem' in recipientCheck)) return;
    await form.submit(async () => {
      const body: CreateIntentBody = { fromNetwork: from, toNetwork: to, amount: amount.trim(), sender: sender.trim() };
      if (recipient.trim()) body.recipient = recipient.trim();
      props.onQuoted(await api.post('/api/v1/chain-abstraction/intent', { body }));
    });
  };

  const field = (name: 'amount' | 'sender' | 'recipient', label: string, value: string, set: (v: string) => void, help: string, extra?: object) => (
    <div>
      <label for={`intent-${name}`}>{label}</label>
      <input
        id={`intent-${name}`}
        name={name}
        value={value}
        autoComplete="off"
        spellcheck={false}
        onInput={(e) => {
          set(e.currentTarget.value);
          form.forget(name);
        }}
        aria-invalid={problems[name] ? 'true' : undefined}
        aria-describedby={`intent-${name}-note`}
        {...extra}
      />
      <small id={`intent-${name}-note`}>{problems[name] ?? help}</small>
    </div>
  );

  return (
    <form onSubmit={(e) => void submit(e)} noValidate aria-labelledby="intent-form-title">
      <h2 id="intent-form-title" class="h-section">
        Move coins to another network
      </h2>
      <div class="row">
        <div>
          <label for="intent-from">From</label>
          <select id="intent-from" name="fromNetwork" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
            {froms.map((n) => (
              <option key={n.slug} value={n.slug}>
                {n.name} ({n.currency.symbol})
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="intent-to">To</label>
          <select id="intent-to" name="toNetwork" value={to} onChange={(e) => setTo(e.currentTarget.value)}>
            {tos.map((n) => (
              <option key={n.slug} value={n.slug}>
                {n.name}
              </option>
            ))}
          </select>
        </div>
      </div>
      {uncovered.length ? (
        <p class="muted" data-testid="route-keys">
          Your API keys do not cover {uncovered.join(' or ')}: the wallet sends the open through a key that does. Add {uncovered.length > 1 ? 'them' : 'it'} to a key on the{' '}
          <Link href="/keys">Keys</Link> page{props.maxNetworks ? ` (your plan allows ${props.maxNetworks} networks over all your keys)` : ''}.
        </p>
      ) : null}
      {field('amount', `Amount (${fromNet?.currency.symbol ?? ''})`, amount, setAmount, 'Locked on the origin, e.g. 0.5; the recipient gets it less the fee.', { inputMode: 'decimal' })}
      {field('sender', 'Sender (the address that sends the open)', sender, setSender, 'The open transaction must come from this address.', { placeholder: '0x…' })}
      {wallet ? (
        <button
          type="button"
          class="secondary outline small"
          onClick={() =>
            void walletAccount(wallet).then(
              (a) => a && setSender(a),
              (err: unknown) => form.setError(new Error(walletErrorText(err, { name: fromNet?.name ?? from, chainId: fromNet?.chainId ?? 0 }))),
            )
          }
        >
          Use my wallet's address
        </button>
      ) : null}
      {field('recipient', 'Recipient, optional', recipient, setRecipient, 'Who receives on the destination; empty: the sender.', { placeholder: '0x…' })}
      <ErrorBanner error={form.error} onDismiss={() => form.setError(undefined)} />
      <button type="submit" aria-busy={form.busy} disabled={form.busy || !to}>
        Get a quote
      </button>
    </form>
  );
}

/** The quote and the open transaction: what the sender signs to lock the amount. */
function OpenStep(props: { intent: Intent; networks: NetworkSummary[]; onSent: () => void }) {
  const i = props.intent;
  const from = props.networks.find((n) => n.slug === i.fromNetwork);
  const to = props.networks.find((n) => n.slug === i.toNetwork);
  const symbol = from?.currency.symbol ?? '';
  const wallet = injectedWallet();
  const [gas, setGas] = useState<bigint | undefined>(undefined);
  const [sent, setSent] = useState<string | undefined>(undefined);
  const explorer = useApi(() => loadNetwork(i.fromNetwork).then((n) => n.explorerUrl), [i.fromNetwork]);
  const chain = { name: from?.name ?? i.fromNetwork, chainId: i.open.chainId };
  const form = useForm<string>({ shownError: (err) => (err instanceof Error && !('code' in err) ? errorText(err) : walletErrorText(err, chain)) });

  // The wallet's estimate of the open's gas, when it is already connected and on the origin chain (no prompt).
  useEffect(() => {
    if (!wallet) return;
    void (async () => {
      const accounts = (await wallet.request({ method: 'eth_accounts' }).catch(() => [])) as string[];
      const chainId = Number.parseInt(String(await wallet.request({ method: 'eth_chainId' }).catch(() => '0x0')), 16);
      if (accounts[0] && chainId === i.open.chainId) setGas(await estimateWithWallet(wallet, i.sender, i.open));
    })();
  }, [i.id]);

  const send = async () => {
    if (!wallet) return;
    await form.submit(async () => {
      const account = await walletAccount(wallet);
      if (!account) throw new Error('The wallet gave no account.');
      if (account.toLowerCase() !== i.sender.toLowerCase()) {
        form.setError(`The wallet's account is ${account}, but this quote is for ${i.sender}: the open must come from the sender. Switch accounts in the wallet.`);
        return;
      }
      setSent(await sendWithWallet(wallet, account, i.open));
      props.onSent();
    });
  };

  return (
    <article class="intent-quote" aria-labelledby="quote-title">
      <h2 id="quote-title" class="h-section">
        Quote
      </h2>
      <dl class="kv">
        <dt>Route</dt>
        <dd>
          {from?.name ?? i.fromNetwork} → {to?.name ?? i.toNetwork}
        </dd>
        <dt>You lock</dt>
        <dd>
          <strong>
            {formatUnits(i.inputAmount)} {symbol}
          </strong>{' '}
          on {from?.name ?? i.fromNetwork}, from <code>{i.sender}</code>
        </dd>
        <dt>Fee</dt>
        <dd>
          {formatUnits(i.fee)} {symbol} <span class="muted">(the service fee plus the gas of the solver's fill on {to?.name ?? i.toNetwork}, quoted now)</span>
        </dd>
        <dt>Recipient gets</dt>
        <dd>
          <strong>
            {formatUnits(i.outputAmount)} {to?.currency.symbol ?? symbol}
          </strong>{' '}
          on {to?.name ?? i.toNetwork}, at <code>{i.recipient}</code>
        </dd>
        <dt>Your gas</dt>
        <dd>
          {gas !== undefined ? `about ${gas.toLocaleString('en-US')} gas for the open, paid on ${chain.name}` : `the open's gas is paid on ${chain.name} by the wallet that sends it; the wallet shows it before you confirm`}
        </dd>
        <dt>Open before</dt>
        <dd>
          {formatTime(new Date(i.order.openDeadline * 1000).toISOString())} ({inMinutes(i.order.openDeadline)}); not opened by then, the quote expires
          and nothing is locked
        </dd>
      </dl>
      <h3 class="h-section">The open transaction</h3>
      <p class="muted">Sent by the sender on {chain.name}: it locks the amount in the origin settler. Until it is sent nothing happens.</p>
      <dl class="kv">
        <dt>Chain id</dt>
        <dd>{i.open.chainId}</dd>
        <dt>To</dt>
        <dd>
          <WrapCopy text={i.open.to} label="settler address" />
        </dd>
        <dt>Value</dt>
        <dd>
          <WrapCopy text={i.open.value} label="value in wei" />
          <small class="muted">
            wei, that is {formatUnits(i.inputAmount)} {symbol}
          </small>
        </dd>
        <dt>Data</dt>
        <dd>
          <WrapCopy text={i.open.data} label="transaction data" tall />
        </dd>
      </dl>
      {sent ? (
        <Notice>
          <span>
            Open sent: <TxHash hash={sent} explorerUrl={explorer.data} />. The status below follows it.
          </span>
        </Notice>
      ) : wallet ? (
        <button type="button" onClick={() => void send()} aria-busy={form.busy} disabled={form.busy}>
          Send the open with my wallet
        </button>
      ) : (
        <p class="muted">No browser wallet was found. Send the transaction above from {i.sender} with the wallet of your choice.</p>
      )}
      {form.error ? (
        <div class="banner error" role="alert">
          {form.error}
        </div>
      ) : null}
    </article>
  );
}

function StepLine(props: { label: string; step: IntentStep | null; state: 'done' | 'now' | 'bad' | 'todo'; explorer: Record<string, string | null>; text: string }) {
  return (
    <li class={props.state === 'todo' ? undefined : props.state}>
      <strong>{props.label}</strong> <span class="muted">{props.text}</span>
      {props.step?.txHash ? (
        <div>
          <TxHash hash={props.step.txHash} explorerUrl={props.explorer[props.step.network]} short />{' '}
          <small class="muted">
            {props.step.status}
            {props.step.blockNumber !== null ? `, block ${props.step.blockNumber.toLocaleString('en-US')}` : ''}
          </small>
        </div>
      ) : null}
    </li>
  );
}

/** One intent, asked for again every few seconds until it reaches a final status. */
function Follow(props: { id: string; networks: NetworkSummary[] }) {
  const got = useApi(() => api.get('/api/v1/chain-abstraction/intents/{id}', { params: { id: props.id } }), [props.id]);
  const i = got.data;
  usePolling(got.reload, FOLLOW_MS, !!i && !FINAL.includes(i.status) && !got.error);
  const explorers = useApi(
    async () => {
      if (!i) return {};
      const pairs = await Promise.all([i.fromNetwork, i.toNetwork].map(async (s) => [s, (await loadNetwork(s).catch(() => undefined))?.explorerUrl ?? null] as const));
      return Object.fromEntries(pairs);
    },
    [i?.fromNetwork, i?.toNetwork],
  );
  if (got.error && !i) return <ErrorBanner error={got.error} />;
  if (!i) return <Loading what="the intent" />;
  const name = (slug: string) => props.networks.find((n) => n.slug === slug)?.name ?? slug;
  const symbol = props.networks.find((n) => n.slug === i.fromNetwork)?.currency.symbol ?? '';
  const order: Status[] = ['awaiting_open', 'opened', 'filled', 'settled'];
  const at = order.indexOf(i.status);
  const state = (n: number): 'done' | 'now' | 'todo' => (at >= n ? 'done' : at === n - 1 ? 'now' : 'todo');
  const ex = explorers.data ?? {};
  return (
    <section aria-labelledby="follow-title" class="intent-follow">
      <h2 id="follow-title" class="h-section">
        Intent {shortHex(i.id, 4)} <StatusTag status={i.status} />
      </h2>
      <p>
        {formatUnits(i.inputAmount)} {symbol} from {name(i.fromNetwork)} to {name(i.toNetwork)}; the recipient gets {formatUnits(i.outputAmount)} {symbol}.
        {FINAL.includes(i.status) ? null : <span class="muted"> Checked every {FOLLOW_MS / 1000} s.</span>}
      </p>
      <ErrorBanner error={got.error} />
      <ol class="steps" aria-label="Progress">
        <StepLine label="Quoted" step={null} state="done" explorer={ex} text={formatTime(i.createdAt)} />
        {i.status === 'expired' ? (
          <StepLine label="Expired" step={null} state="bad" explorer={ex} text="not opened before the deadline; nothing was locked" />
        ) : (
          <>
            <StepLine label="Opened" step={i.transactions.open} state={state(1)} explorer={ex} text={`the amount is locked on ${name(i.fromNetwork)}`} />
            <StepLine label="Filled" step={i.transactions.fill} state={i.status === 'refunded' ? 'bad' : state(2)} explorer={ex} text={`the recipient is paid on ${name(i.toNetwork)}`} />
            {i.status === 'refunded' ? (
              <StepLine label="Refunded" step={i.transactions.refund} state="bad" explorer={ex} text="not filled in time: the locked amount went back to the sender" />
            ) : (
              <StepLine label="Settled" step={i.transactions.settle} state={state(3)} explorer={ex} text="the solver is repaid from the lock" />
            )}
          </>
        )}
      </ol>
    </section>
  );
}

function IntentList(props: { networks: NetworkSummary[]; tick: number; selected: string | undefined }) {
  const list = useApi(() => api.get('/api/v1/chain-abstraction/intents', { query: { limit: 20 } }), [props.tick]);
  const name = (slug: string) => props.networks.find((n) => n.slug === slug)?.name ?? slug;
  // Statuses in the list move too: asked again while any is under way.
  usePolling(list.reload, 10_000, !!list.data?.some((i) => !FINAL.includes(i.status)));
  if (list.error) return <ErrorBanner error={list.error} />;
  if (!list.data) return <Loading what="intents" />;
  if (!list.data.length)
    return (
      <EmptyState title="No intents yet">
        <p class="muted">Get a quote above: the intent is listed here and followed until it is settled.</p>
      </EmptyState>
    );
  return (
    <ScrollTable label="Your intents">
      <table class="striped">
        <thead>
          <tr>
            <th scope="col">Created</th>
            <th scope="col">Route</th>
            <th scope="col" class="num wide-only">
              Amount
            </th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {list.data.map((i) => (
            <tr key={i.id} aria-current={i.id === props.selected ? 'true' : undefined}>
              <td>
                <Link href={`/intents?id=${encodeURIComponent(i.id)}`}>
                  {shortTime(i.createdAt)}
                </Link>
              </td>
              <td>
                {name(i.fromNetwork)} → {name(i.toNetwork)}
              </td>
              <td class="num wide-only">{formatUnits(i.inputAmount)}</td>
              <td>
                <StatusTag status={i.status} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </ScrollTable>
  );
}

export default function IntentsPage() {
  const nets = useApi(loadNetworks);
  const keys = useApi(() => api.get('/api/v1/api-keys'));
  const me = useApi(loadMe);
  // The networks the account's usable keys cover: the form starts on a route they can send on.
  const covered = new Set((keys.data ?? []).filter((k) => k.status === 'active').flatMap((k) => k.networks));
  const { query } = useLocation();
  const selected = query.get('id') ?? undefined;
  const [quote, setQuote] = useState<Intent | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const networks = nets.data ?? [];

  return (
    <Page title="Intents" intro="Move the native coin from one network to another: lock it on one side, the recipient is paid on the other within seconds.">
      <ErrorBanner error={nets.error} />
      {!nets.data || (!keys.data && !keys.error) ? (
        nets.error ? null : (
          <Loading />
        )
      ) : (
        <>
          {quote ? (
            <>
              <OpenStep intent={quote} networks={networks} onSent={() => setTick((n) => n + 1)} />
              <button
                type="button"
                class="secondary outline"
                onClick={() => {
                  setQuote(undefined);
                  setQuery({ id: undefined });
                }}
              >
                New quote
              </button>
            </>
          ) : (
            <QuoteForm
              networks={networks}
              covered={covered}
              maxNetworks={me.data?.limits.maxNetworks}
              onQuoted={(i) => {
                setQuote(i);
                setQuery({ id: i.id });
                setTick((n) => n + 1);
              }}
            />
          )}
          {selected ? <Follow key={selected} id={selected} networks={networks} /> : null}
          <h2 class="h-section">Your intents</h2>
          <IntentList networks={networks} tick={tick} selected={selected} />
        </>
      )}
    </Page>
  );
}
