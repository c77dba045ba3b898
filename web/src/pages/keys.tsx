// API keys (C43; C14–C16, C19–C21): create (the key shown once, with a copy button), the list with
// status, networks, usage and last use, and per key: edit networks and rate limit, disable or
// enable, rotate, revoke, delete (each destructive step confirmed first).
import { useState } from 'preact/hooks';
import { api, useApi } from '../api.ts';
import type { ApiKey, ApiKeyListItem, CreateApiKeyBody, NetworkSummary } from '../api-types.ts';
import { useForm } from '../components/form.ts';
import { ConfirmDialog, Copyable, EmptyState, ErrorBanner, formatNumber, formatTime, Link, Loading, Notice, Page } from '../components/page.tsx';
import { loadMe } from '../components/chain.tsx';
import { useLocation } from '../router.ts';

/** The key right after create or rotate; the list shows its prefix, the Endpoints page the whole key. */
function NewKey(props: { created: ApiKey; rotated: boolean; onDone: () => void }) {
  return (
    <article class="new-key" aria-labelledby="new-key-title">
      <h2 id="new-key-title">{props.rotated ? `New value of "${props.created.name}"` : `Your key "${props.created.name}"`}</h2>
      <p>
        Copy it and keep it somewhere safe: anyone holding it can call with it. The list below shows only its start; the Endpoints page shows
        it in full, inside its addresses, whenever you need it again.
        {props.rotated ? ' The old value has stopped working.' : ''}
      </p>
      <Copyable text={props.created.key} label="API key" />
      <p>
        <Link href={`/endpoints?key=${encodeURIComponent(props.created.id)}`}>See its endpoints and snippets</Link>
      </p>
      <button type="button" class="secondary" onClick={props.onDone}>
        I have copied it
      </button>
    </article>
  );
}

/** Network checkboxes; none checked means every network the plan allows. */
function NetworkChoice(props: { idPrefix: string; networks: NetworkSummary[]; chosen: string[]; onChange: (s: string[]) => void; error?: string | undefined; allowance?: string | undefined }) {
  const toggle = (slug: string, on: boolean) => props.onChange(on ? [...props.chosen, slug] : props.chosen.filter((s) => s !== slug));
  return (
    <fieldset>
      <legend>Networks</legend>
      <small class="muted" data-testid="network-allowance">
        {props.allowance ? `${props.allowance} ` : ''}None checked: the networks your plan gives by default.
      </small>
      <div class="checks">
        {props.networks.map((n) => (
          <label key={n.slug} for={`${props.idPrefix}-${n.slug}`}>
            <input
              type="checkbox"
              id={`${props.idPrefix}-${n.slug}`}
              checked={props.chosen.includes(n.slug)}
              onChange={(e) => toggle(n.slug, e.currentTarget.checked)}
            />
            {n.name}
          </label>
        ))}
      </div>
      {props.error ? <small class="field-error">{props.error}</small> : null}
    </fieldset>
  );
}

function CreateForm(props: { networks: NetworkSummary[]; planRate: number | null | undefined; allowance: string | undefined; onCreated: (k: ApiKey) => void }) {
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<string[]>([]);
  const [rate, setRate] = useState('');
  const form = useForm();
  const fields = form.fields;
  const submit = async (e: Event) => {
    e.preventDefault();
    await form.submit(async () => {
      const body: CreateApiKeyBody = { name: name.trim() };
      if (chosen.length) body.networks = chosen;
      if (rate.trim()) body.rateLimit = Number(rate);
      const created = await api.post('/api/v1/api-keys', { body });
      setName('');
      setChosen([]);
      setRate('');
      props.onCreated(created);
    });
  };
  return (
    <details class="create" open>
      <summary>Create a key</summary>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <ErrorBanner error={form.error} />
        <div class="row">
          <label for="key-name">
            Name
            <input id="key-name" required maxLength={100} value={name} placeholder="my app" onInput={(e) => setName(e.currentTarget.value)} aria-invalid={fields.name ? true : undefined} />
          </label>
          <label for="key-rate">
            Rate limit (requests per minute, optional)
            <input id="key-rate" type="number" min={1} inputMode="numeric" value={rate} placeholder={props.planRate === undefined ? "the plan's rate" : props.planRate === null ? "the plan's: unlimited" : `the plan's: ${formatNumber(props.planRate)} / min`} onInput={(e) => setRate(e.currentTarget.value)} aria-invalid={fields.rateLimit ? true : undefined} />
          </label>
        </div>
        <NetworkChoice idPrefix="new-net" networks={props.networks} chosen={chosen} onChange={setChosen} error={fields.networks} allowance={props.allowance} />
        <button type="submit" aria-busy={form.busy} disabled={form.busy || !name.trim()}>
          Create key
        </button>
      </form>
    </details>
  );
}

function EditForm(props: { item: ApiKey; networks: NetworkSummary[]; planRate: number | null | undefined; allowance: string | undefined; onSaved: () => void; onCancel: () => void }) {
  // None checked keeps an all-networks key following the plan (C52).
  const [chosen, setChosen] = useState<string[]>(props.item.allNetworks ? [] : props.item.networks);
  // The key's own rate (empty: it follows the plan's), not the plan's rate shown as if set here.
  const own = props.item.ownRateLimit;
  const [rate, setRate] = useState(own === null ? '' : String(own));
  const planRate = props.planRate === undefined ? undefined : props.planRate === null ? 'unlimited' : `${formatNumber(props.planRate)} / min`;
  const [name, setName] = useState(props.item.name);
  const form = useForm();
  const fields = form.fields;
  const id = props.item.id;
  const submit = async (e: Event) => {
    e.preventDefault();
    await form.submit(
      async () => {
        await api.patch('/api/v1/api-keys/{id}', { params: { id }, body: { name: name.trim(), networks: chosen, rateLimit: rate.trim() ? Number(rate) : null } });
        props.onSaved();
      },
      { stayBusy: true },
    );
  };
  return (
    <form class="edit" onSubmit={(e) => void submit(e)} noValidate aria-label={`Edit ${props.item.name}`}>
      <ErrorBanner error={form.error} />
      <div class="row">
        <label for={`edit-name-${id}`}>
          Name
          <input id={`edit-name-${id}`} required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={fields.name ? true : undefined} />
        </label>
        <label for={`edit-rate-${id}`}>
          Rate limit of this key (requests per minute)
          <input
            id={`edit-rate-${id}`}
            type="number"
            min={1}
            inputMode="numeric"
            value={rate}
            placeholder={planRate ? `the plan's: ${planRate}` : "the plan's rate"}
            onInput={(e) => setRate(e.currentTarget.value)}
            aria-invalid={fields.rateLimit ? true : undefined}
            aria-describedby={`edit-rate-help-${id}`}
          />
          <small id={`edit-rate-help-${id}`}>{fields.rateLimit ?? `Empty: the key follows your plan's rate${planRate ? ` (${planRate})` : ''}.`}</small>
        </label>
      </div>
      <NetworkChoice idPrefix={`edit-net-${id}`} networks={props.networks} chosen={chosen} onChange={setChosen} error={fields.networks} allowance={props.allowance} />
      <div class="actions">
        <button type="submit" aria-busy={form.busy} disabled={form.busy}>
          Save
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

type Pending = { kind: 'rotate' | 'revoke' | 'delete'; item: ApiKeyListItem };

export default function Keys() {
  const { query } = useLocation();
  const keys = useApi(() => api.get('/api/v1/api-keys'));
  const networks = useApi(() => api.get('/api/v1/networks'));
  const me = useApi(loadMe);
  const [shown, setShown] = useState<{ key: ApiKey; rotated: boolean } | undefined>(undefined);
  const [editing, setEditing] = useState<string | undefined>(undefined);
  const [pending, setPending] = useState<Pending | undefined>(undefined);
  const [note, setNote] = useState<string | undefined>(undefined);
  const action = useForm();
  const nets = networks.data ?? [];
  const nameOf = (slug: string) => nets.find((n) => n.slug === slug)?.name ?? slug;

  const act = async (what: () => Promise<unknown>, done: string) => {
    setNote(undefined);
    await action.submit(async () => {
      await what();
      setNote(done);
      keys.reload();
    });
  };

  const confirm = async () => {
    if (!pending) return;
    const { kind, item } = pending;
    const params = { id: item.id };
    if (kind === 'rotate') {
      const rotated = await api.post('/api/v1/api-keys/{id}/rotate', { params });
      setShown({ key: rotated, rotated: true });
      setNote(undefined);
    } else if (kind === 'revoke') {
      await api.post('/api/v1/api-keys/{id}/revoke', { params });
      setNote(`"${item.name}" is revoked.`);
    } else {
      await api.delete('/api/v1/api-keys/{id}', { params });
      setNote(`"${item.name}" is deleted.`);
    }
    setPending(undefined);
    keys.reload();
  };

  const list = keys.data ?? [];
  // C16: said before a submit, not only in its refusal: how many networks the plan allows over all keys.
  const maxNetworks = me.data?.limits.maxNetworks;
  const usedNetworks = new Set(list.filter((k) => k.status !== 'revoked').flatMap((k) => k.networks)).size;
  const allowance =
    maxNetworks === undefined ? undefined
    : maxNetworks === null ? 'Your plan allows every network.'
    : `Your plan allows ${formatNumber(maxNetworks)} networks over all your keys; they use ${formatNumber(usedNetworks)} now.`;
  return (
    <Page title="API keys" intro="Each key identifies your app on the RPC addresses; usage and limits are counted per key and per account.">
      {query.get('welcome') && list.length === 0 && !shown ? (
        <div class="banner info" role="status">
          Welcome! Create your first key below, then take its address from Endpoints.
        </div>
      ) : null}
      {shown ? <NewKey created={shown.key} rotated={shown.rotated} onDone={() => setShown(undefined)} /> : null}
      {note ? <Notice>{note}</Notice> : null}
      <ErrorBanner error={action.error ?? keys.error ?? networks.error} onDismiss={action.error ? () => action.setError(undefined) : undefined} />
      <CreateForm
        networks={nets}
        planRate={me.data?.limits.requestsPerMinute}
        allowance={allowance}
        onCreated={(k) => {
          setShown({ key: k, rotated: false });
          setNote(undefined);
          keys.reload();
        }}
      />
      <h2>Your keys</h2>
      {keys.loading && !keys.data ? <Loading what="keys" /> : null}
      {keys.data && list.length === 0 ? (
        <EmptyState title="No API keys yet">
          <p>Create one above: it works on the RPC addresses at once.</p>
        </EmptyState>
      ) : null}
      <ul class="key-list">
        {list.map((k) => (
          <li key={k.id}>
            <article aria-labelledby={`key-${k.id}`}>
              <header class="key-head">
                <h3 id={`key-${k.id}`}>{k.name}</h3>
                <span class={`tag status-${k.status}`}>{k.status}</span>
              </header>
              <dl class="facts">
                <div>
                  <dt>Key</dt>
                  <dd>
                    <code>{k.prefix}…</code>
                  </dd>
                </div>
                <div>
                  <dt>Networks</dt>
                  <dd class="tags">
                    {k.allNetworks ? <span class="tag">every network of the plan</span> : null}
                    {k.networks.map((n) => <span class="tag" key={n}>{nameOf(n)}</span>)}
                  </dd>
                </div>
                <div>
                  <dt>Rate limit</dt>
                  <dd>
                    {k.rateLimit === null ? 'unlimited' : `${formatNumber(k.rateLimit)} / min`}
                    {k.ownRateLimit === null ? <small class="muted"> (the plan's)</small> : null}
                  </dd>
                </div>
                <div>
                  <dt>Requests today / this month</dt>
                  <dd>
                    {formatNumber(k.usage.daily)} / {formatNumber(k.usage.monthly)}
                  </dd>
                </div>
                <div>
                  <dt>Last used</dt>
                  <dd>{formatTime(k.lastUsedAt)}</dd>
                </div>
                <div>
                  <dt>Created</dt>
                  <dd>{formatTime(k.createdAt)}</dd>
                </div>
              </dl>
              {editing === k.id ? (
                <EditForm
                  item={k}
                  planRate={me.data?.limits.requestsPerMinute}
                  allowance={allowance}
                  networks={nets}
                  onCancel={() => setEditing(undefined)}
                  onSaved={() => {
                    setEditing(undefined);
                    setNote(`"${k.name}" is saved.`);
                    keys.reload();
                  }}
                />
              ) : (
                <footer class="actions">
                  {k.status === 'active' || k.status === 'inactive' ? (
                    <>
                      <Link href={`/endpoints?key=${encodeURIComponent(k.id)}`} role="button" class="secondary outline small">
                        Endpoints
                      </Link>
                      <button type="button" class="secondary outline small" onClick={() => setEditing(k.id)} aria-label={`Edit ${k.name}`}>
                        Edit
                      </button>
                      <button
                        type="button"
                        class="secondary outline small"
                        aria-label={`${k.status === 'active' ? 'Disable' : 'Enable'} ${k.name}`}
                        onClick={() =>
                          void act(
                            () => api.patch('/api/v1/api-keys/{id}', { params: { id: k.id }, body: { status: k.status === 'active' ? 'inactive' : 'active' } }),
                            k.status === 'active' ? `"${k.name}" is disabled: calls with it are refused until you enable it.` : `"${k.name}" is enabled.`,
                          )
                        }
                      >
                        {k.status === 'active' ? 'Disable' : 'Enable'}
                      </button>
                      <button type="button" class="secondary outline small" onClick={() => setPending({ kind: 'rotate', item: k })} aria-label={`Rotate ${k.name}`}>
                        Rotate
                      </button>
                      <button type="button" class="danger outline small" onClick={() => setPending({ kind: 'revoke', item: k })} aria-label={`Revoke ${k.name}`}>
                        Revoke
                      </button>
                    </>
                  ) : null}
                  <button type="button" class="danger outline small" onClick={() => setPending({ kind: 'delete', item: k })} aria-label={`Delete ${k.name}`}>
                    Delete
                  </button>
                </footer>
              )}
            </article>
          </li>
        ))}
      </ul>
      <ConfirmDialog
        open={pending !== undefined}
        title={pending ? `${pending.kind === 'rotate' ? 'Rotate' : pending.kind === 'revoke' ? 'Revoke' : 'Delete'} "${pending.item.name}"?` : ''}
        confirmLabel={pending?.kind === 'rotate' ? 'Rotate key' : pending?.kind === 'revoke' ? 'Revoke key' : 'Delete key'}
        danger={pending?.kind !== 'rotate'}
        onConfirm={confirm}
        onCancel={() => setPending(undefined)}
      >
        <p>
          {pending?.kind === 'rotate'
            ? 'The key gets a new value and the current one stops working at once. Apps using it need the new value.'
            : pending?.kind === 'revoke'
              ? 'The key stops working for good; it stays in the list. This cannot be undone.'
              : 'The key stops working and leaves the list; its past usage still counts in your statistics. This cannot be undone.'}
        </p>
      </ConfirmDialog>
    </Page>
  );
}
