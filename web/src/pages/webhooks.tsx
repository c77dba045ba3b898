// Webhooks (C37–C39): create (the signing secret shown once), list, send a test event, follow the
// deliveries, switch off and on, rotate the secret, delete after a confirmation. Plans max and
// enterprise, as the API has it; other plans see what the feature would give them.
import { useState } from 'preact/hooks';
import { api, useApi } from '../api.ts';
import type { CreateWebhookBody, NetworkSummary, WebhookEndpoint, WebhookEndpointWithSecret } from '../api-types.ts';
import { useForm } from '../components/form.ts';
import { ConfirmDialog, EmptyState, ErrorBanner, formatTime, Loading, Notice, Page } from '../components/page.tsx';
import { FEATURE_PLANS, loadMe, loadNetworks, PlanFeature, type Tier, usePolling, ScrollTable, WrapCopy } from '../components/chain.tsx';
import '../components/chain.css';

/** A whole-coin amount as a decimal string, its digits grouped as every other figure of the dashboard (100,000.5). */
function groupDigits(v: string): string {
  const [whole = '', fraction] = v.split('.');
  return `${whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}${fraction ? `.${fraction}` : ''}`;
}

/** C38's event types, in the order the form offers them. */
const EVENTS = [
  { type: 'whale.alert', label: 'Whale alerts', help: 'large native-coin transfers (filters: networks, minimum amount)' },
  { type: 'address.activity', label: 'Address activity', help: 'transfers from or to the addresses you list, on the networks you pick' },
  { type: 'usage.quota', label: 'Quota notices', help: 'your daily requests or monthly compute units passing 80% and 100%' },
  { type: 'intent.updated', label: 'Intent updates', help: 'each status change of your cross-chain intents' },
  { type: 'webhook.test', label: 'Test events', help: 'only what "Send test event" sends' },
] as const;

const REASONS: Record<string, string> = {
  owner: 'switched off by you',
  gone: 'the receiver answered 410 Gone',
  failing: 'every delivery failed for 5 days',
};

function Gated(props: { tier: Tier }) {
  return (
    <PlanFeature feature="Webhooks" plans={FEATURE_PLANS.webhooks} tier={props.tier}>
      <ul>
        <li>events POSTed to your own server within seconds: whale alerts, activity of addresses you watch, quota notices, intent updates;</li>
        <li>each signed (Standard Webhooks: HMAC-SHA256 with a secret only you hold), retried for a day and a half until your server takes it;</li>
        <li>up to 10 endpoints (100 on Enterprise), a test button and the record of every delivery.</li>
      </ul>
    </PlanFeature>
  );
}

/** The signing secret, shown this once (C37): after "I have stored it" it is gone for good. */
function SecretOnce(props: { secret: string; url: string; rotated: boolean; onDone: () => void }) {
  return (
    <article class="secret-once" aria-labelledby="secret-title">
      <h2 id="secret-title" class="h-section">
        {props.rotated ? 'Your new signing secret' : 'Webhook created: its signing secret'}
      </h2>
      <p>
        For <code>{props.url}</code>. Store it now: it is <strong>shown only this once</strong>. Your server checks each delivery's{' '}
        <code>webhook-signature</code> with it.
      </p>
      <WrapCopy text={props.secret} label="signing secret" />
      <button type="button" onClick={props.onDone}>
        I have stored it
      </button>
    </article>
  );
}

type EventType = CreateWebhookBody['events'][number];

function CreateForm(props: { networks: NetworkSummary[]; onCreated: (e: WebhookEndpointWithSecret) => void; onCancel: () => void }) {
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<EventType[]>(['whale.alert']);
  const [nets, setNets] = useState<string[]>([]);
  const [minValue, setMinValue] = useState('');
  const [addresses, setAddresses] = useState('');
  const [description, setDescription] = useState('');
  // "filters.addresses.0" and the like: shown under the input they belong to.
  const form = useForm({ fieldName: (f) => f.replace(/^filters\./, '').replace(/\.\d+$/, '') });
  const fields = form.fields;
  const wantsNetworks = events.includes('whale.alert') || events.includes('address.activity');
  const wantsAddresses = events.includes('address.activity');
  const urlProblem = url.trim() && !/^https?:\/\/[^\s]+$/i.test(url.trim()) ? 'An http:// or https:// address.' : undefined;
  const minProblem = minValue.trim() && !/^[0-9]+(\.[0-9]+)?$/.test(minValue.trim()) ? 'A number of whole coins, such as 50000.' : undefined;

  const toggle = <V extends string>(list: V[], set: (l: V[]) => void, v: V) => set(list.includes(v) ? list.filter((x) => x !== v) : [...list, v]);

  const submit = async (e: Event) => {
    e.preventDefault();
    form.clear();
    if (!url.trim()) return form.setFields({ url: 'Enter the address events are sent to.' });
    if (!events.length) return form.setFields({ events: 'Pick at least one event type.' });
    if (urlProblem || minProblem) return;
    const filters: NonNullable<CreateWebhookBody['filters']> = {};
    if (wantsNetworks && nets.length) filters.networks = nets;
    if (wantsNetworks && minValue.trim()) filters.minValue = minValue.trim();
    const addrs = addresses.split(/[\s,]+/).filter(Boolean);
    if (wantsAddresses && addrs.length) filters.addresses = addrs;
    const body: CreateWebhookBody = { url: url.trim(), events };
    if (Object.keys(filters).length) body.filters = filters;
    if (description.trim()) body.description = description.trim();
    await form.submit(async () => props.onCreated(await api.post('/api/v1/webhooks', { body })));
  };

  const describedBy = (name: string, help?: boolean) => (fields[name] || help ? `wh-${name}-note` : undefined);

  return (
    <form onSubmit={(e) => void submit(e)} noValidate aria-labelledby="wh-create-title" class="wh-create">
      <h2 id="wh-create-title" class="h-section">
        New webhook
      </h2>
      <div>
        <label for="wh-url">Endpoint URL</label>
        <input
          id="wh-url"
          type="url"
          name="url"
          placeholder="https://example.com/hooks"
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-invalid={fields.url || urlProblem ? 'true' : undefined}
          aria-describedby={describedBy('url', true)}
          autoComplete="url"
        />
        <small id="wh-url-note">{fields.url ?? urlProblem ?? 'Events are POSTed here as JSON. Private and loopback addresses are refused unless the gateway allows them.'}</small>
      </div>
      <fieldset aria-describedby={describedBy('events')}>
        <legend>Events</legend>
        {EVENTS.map((ev) => (
          <label key={ev.type}>
            <input type="checkbox" name="events" value={ev.type} checked={events.includes(ev.type)} onChange={() => toggle(events, setEvents, ev.type)} />
            {ev.label} <span class="muted">({ev.help})</span>
          </label>
        ))}
        {fields.events ? <small id="wh-events-note">{fields.events}</small> : null}
      </fieldset>
      {wantsNetworks ? (
        <>
          <fieldset aria-describedby="wh-networks-note">
            <legend>Networks</legend>
            <div class="checks">
              {props.networks.map((n) => (
                <label key={n.slug}>
                  <input type="checkbox" name="networks" value={n.slug} checked={nets.includes(n.slug)} onChange={() => toggle(nets, setNets, n.slug)} />
                  {n.name}
                </label>
              ))}
            </div>
            <small id="wh-networks-note">{fields.networks ?? (wantsAddresses ? 'Address activity needs the networks to watch.' : 'None ticked: every network.')}</small>
          </fieldset>
          <div>
            <label for="wh-min">Minimum amount (whole coins), optional</label>
            <input
              id="wh-min"
              name="minValue"
              inputMode="decimal"
              value={minValue}
              onInput={(e) => setMinValue(e.currentTarget.value)}
              aria-invalid={fields.minValue || minProblem ? 'true' : undefined}
              aria-describedby="wh-minValue-note"
            />
            <small id="wh-minValue-note">{fields.minValue ?? minProblem ?? 'Smaller transfers are left out.'}</small>
          </div>
        </>
      ) : null}
      {wantsAddresses ? (
        <div>
          <label for="wh-addresses">Addresses to watch</label>
          <textarea
            id="wh-addresses"
            name="addresses"
            rows={3}
            placeholder="0x…, one per line"
            value={addresses}
            onInput={(e) => setAddresses(e.currentTarget.value)}
            aria-invalid={fields.addresses ? 'true' : undefined}
            aria-describedby="wh-addresses-note"
          />
          <small id="wh-addresses-note">{fields.addresses ?? 'Up to 1,000; mixed case must be the EIP-55 checksum.'}</small>
        </div>
      ) : null}
      <div>
        <label for="wh-description">Description, optional</label>
        <input id="wh-description" name="description" maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </div>
      <ErrorBanner error={form.error} onDismiss={() => form.setError(undefined)} />
      <div class="card-actions">
        <button type="submit" aria-busy={form.busy} disabled={form.busy}>
          Create webhook
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function Deliveries(props: { endpoint: WebhookEndpoint; tick: number }) {
  const list = useApi(() => api.get('/api/v1/webhooks/{id}/deliveries', { params: { id: props.endpoint.id }, query: { limit: 20 } }), [props.endpoint.id, props.tick]);
  // Follows deliveries still under way (C39: retried on a schedule) until none is pending.
  usePolling(list.reload, 3_000, !!list.data?.some((d) => d.status === 'pending'));
  const caption = `Deliveries to ${props.endpoint.url}, newest first`;
  if (list.error) return <ErrorBanner error={list.error} />;
  if (!list.data) return <Loading what="deliveries" />;
  if (!list.data.length)
    return (
      <EmptyState title="No deliveries yet">
        <p class="muted">Events this endpoint subscribes to are listed here once sent. "Send test event" sends one now.</p>
      </EmptyState>
    );
  return (
    <ScrollTable label="Deliveries">
      <table class="striped deliveries">
        <caption class="offscreen">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Status</th>
            <th scope="col" class="num wide-only">
              Attempts
            </th>
            <th scope="col">Last answer</th>
            <th scope="col" class="wide-only">
              Sent
            </th>
          </tr>
        </thead>
        <tbody>
          {list.data.map((d) => (
            <tr key={d.id}>
              <td>
                <code>{d.type}</code>
              </td>
              <td>
                <span class={`tag status-${d.status}`}>{d.status}</span>
                {d.status === 'pending' && d.nextAttemptAt ? <small class="muted"> next {formatTime(d.nextAttemptAt)}</small> : null}
              </td>
              <td class="num wide-only">{d.attempts}</td>
              <td>
                {d.lastStatusCode !== null ? `HTTP ${d.lastStatusCode}` : d.lastError ? '' : '—'}
                {d.lastDurationMs !== null ? <span class="muted"> in {d.lastDurationMs} ms</span> : null}
                {d.lastError ? <div class="muted">{d.lastError}</div> : null}
              </td>
              <td class="wide-only">{formatTime(d.lastAttemptAt ?? d.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </ScrollTable>
  );
}

function EndpointCard(props: { endpoint: WebhookEndpoint; networks: NetworkSummary[]; onChanged: () => void; onRotate: () => void; onDelete: () => void }) {
  const e = props.endpoint;
  const [open, setOpen] = useState(false);
  const [tick, setTick] = useState(0);
  const form = useForm();
  const [note, setNote] = useState<string | undefined>(undefined);
  const name = (slug: string) => props.networks.find((n) => n.slug === slug)?.name ?? slug;

  const act = async (what: string, run: () => Promise<unknown>, done?: string) => {
    setNote(undefined);
    await form.submit(
      async () => {
        await run();
        if (done) setNote(done);
      },
      { what },
    );
  };

  return (
    <li aria-labelledby={`wh-${e.id}-title`}>
      <div class="card-head">
        <h3 id={`wh-${e.id}-title`}>{e.url}</h3>
        <span class={`tag status-${e.status}`}>
          {e.status}
          {e.status === 'disabled' && e.disabledReason ? `: ${REASONS[e.disabledReason] ?? e.disabledReason}` : ''}
        </span>
      </div>
      {e.description ? <p class="muted">{e.description}</p> : null}
      <dl class="kv">
        <dt>Events</dt>
        <dd class="tags">
          {e.events.map((t) => (
            <span key={t} class="tag">
              {t}
            </span>
          ))}
        </dd>
        {e.filters.networks?.length ? (
          <>
            <dt>Networks</dt>
            <dd>{e.filters.networks.map(name).join(', ')}</dd>
          </>
        ) : null}
        {e.filters.minValue ? (
          <>
            <dt>Minimum</dt>
            <dd data-testid="webhook-min">{groupDigits(e.filters.minValue)} coins</dd>
          </>
        ) : null}
        {e.filters.addresses?.length ? (
          <>
            <dt>Addresses</dt>
            <dd>
              {e.filters.addresses.slice(0, 3).map((a) => (
                <code key={a}>{a} </code>
              ))}
              {e.filters.addresses.length > 3 ? <span class="muted">and {e.filters.addresses.length - 3} more</span> : null}
            </dd>
          </>
        ) : null}
        <dt>Created</dt>
        <dd>{formatTime(e.createdAt)}</dd>
      </dl>
      <ErrorBanner error={form.error} onDismiss={() => form.setError(undefined)} />
      {note ? <Notice>{note}</Notice> : null}
      <div class="card-actions">
        <button
          type="button"
          class="secondary small"
          disabled={form.busy || e.status !== 'enabled'}
          aria-busy={form.doing === 'test'}
          title={e.status !== 'enabled' ? 'Enable the webhook first' : undefined}
          onClick={() =>
            void act(
              'test',
              async () => {
                await api.post('/api/v1/webhooks/{id}/test', { params: { id: e.id } });
                setOpen(true);
                setTick((n) => n + 1);
              },
              'Test event queued: its delivery is listed below.',
            )
          }
        >
          Send test event
        </button>
        <button type="button" class="secondary outline small" aria-expanded={open} aria-controls={`wh-${e.id}-deliveries`} onClick={() => setOpen(!open)}>
          {open ? 'Hide deliveries' : 'Deliveries'}
        </button>
        <button
          type="button"
          class="secondary outline small"
          disabled={form.busy}
          aria-busy={form.doing === 'status'}
          onClick={() =>
            void act('status', async () => {
              await api.patch('/api/v1/webhooks/{id}', { params: { id: e.id }, body: { status: e.status === 'enabled' ? 'disabled' : 'enabled' } });
              props.onChanged();
            })
          }
        >
          {e.status === 'enabled' ? 'Disable' : 'Enable'}
        </button>
        <button type="button" class="secondary outline small" disabled={form.busy} onClick={props.onRotate}>
          Rotate secret
        </button>
        <button type="button" class="danger outline small" disabled={form.busy} onClick={props.onDelete}>
          Delete
        </button>
      </div>
      {open ? (
        <section id={`wh-${e.id}-deliveries`} aria-label={`Deliveries to ${e.url}`} class="wh-deliveries">
          <div class="live">
            <h4 class="h-section">Deliveries</h4>
            <button type="button" class="secondary outline small" onClick={() => setTick((n) => n + 1)}>
              Refresh
            </button>
          </div>
          <Deliveries endpoint={e} tick={tick} />
        </section>
      ) : null}
    </li>
  );
}

function Webhooks() {
  const list = useApi(() => api.get('/api/v1/webhooks'));
  const nets = useApi(loadNetworks);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<{ secret: string; url: string; rotated: boolean } | undefined>(undefined);
  // One dialog for the page (its heading id is fixed), for whichever endpoint asked.
  const [confirm, setConfirm] = useState<{ kind: 'delete' | 'rotate'; endpoint: WebhookEndpoint } | undefined>(undefined);
  const [note, setNote] = useState<string | undefined>(undefined);

  return (
    <>
      {secret ? <SecretOnce {...secret} onDone={() => setSecret(undefined)} /> : null}
      {note ? <Notice>{note}</Notice> : null}
      {creating ? (
        <CreateForm
          networks={nets.data ?? []}
          onCancel={() => setCreating(false)}
          onCreated={(created) => {
            setCreating(false);
            setNote(undefined);
            setSecret({ secret: created.secret, url: created.url, rotated: false });
            list.reload();
          }}
        />
      ) : (
        <button
          type="button"
          onClick={() => {
            setCreating(true);
            setNote(undefined);
          }}
        >
          New webhook
        </button>
      )}
      <h2 class="h-section">Your webhooks</h2>
      <ErrorBanner error={list.error} />
      {!list.data ? (
        list.error ? null : (
          <Loading what="webhooks" />
        )
      ) : list.data.length === 0 ? (
        <EmptyState title="No webhooks yet">
          <p class="muted">Create one to have events POSTed to your server as they happen.</p>
        </EmptyState>
      ) : (
        <ul class="card-list">
          {list.data.map((e) => (
            <EndpointCard key={e.id} endpoint={e} networks={nets.data ?? []} onChanged={list.reload} onRotate={() => setConfirm({ kind: 'rotate', endpoint: e })} onDelete={() => setConfirm({ kind: 'delete', endpoint: e })} />
          ))}
        </ul>
      )}
      <ConfirmDialog
        open={confirm !== undefined}
        title={confirm?.kind === 'rotate' ? 'Rotate the signing secret?' : 'Delete this webhook?'}
        confirmLabel={confirm?.kind === 'rotate' ? 'Rotate secret' : 'Delete webhook'}
        danger={confirm?.kind === 'delete'}
        onCancel={() => setConfirm(undefined)}
        onConfirm={async () => {
          if (!confirm) return;
          const e = confirm.endpoint;
          if (confirm.kind === 'rotate') {
            const answer = await api.post('/api/v1/webhooks/{id}/rotate-secret', { params: { id: e.id } });
            setSecret({ secret: answer.secret, url: e.url, rotated: true });
          } else {
            await api.delete('/api/v1/webhooks/{id}', { params: { id: e.id } });
            setNote(`Webhook ${e.url} deleted.`);
            list.reload();
          }
          setConfirm(undefined);
        }}
      >
        {confirm?.kind === 'rotate' ? (
          <p>
            A new secret for <code>{confirm.endpoint.url}</code> is made and shown once. For 24 hours deliveries carry signatures by both the old and the
            new one, so your server can switch over.
          </p>
        ) : (
          <p>
            Events stop going to <code>{confirm?.endpoint.url}</code> and its deliveries are deleted with it. This cannot be undone.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

export default function WebhooksPage() {
  const me = useApi(loadMe);
  let body;
  if (me.error) body = <ErrorBanner error={me.error} />;
  else if (!me.data) body = <Loading />;
  else if (!(FEATURE_PLANS.webhooks as readonly string[]).includes(me.data.tier)) body = <Gated tier={me.data.tier} />;
  else body = <Webhooks />;
  return (
    <Page title="Webhooks" intro="Events POSTed to your own server as they happen, signed so that your server can tell they come from here.">
      {body}
    </Page>
  );
}
