// The account (C43; C8, C9, C5): the plan and its limits from GET /me (with any override an
// administrator set), what is left of them now, the other plans from GET /plans, the password
// change and "sign out everywhere" (POST /auth/logout-all).
import { useState } from 'preact/hooks';
import { api, changePassword, signOutEverywhere, useApi } from '../api.ts';
import type { ListApiKeysData, Me, PlanLimits } from '../api-types.ts';
import { useForm } from '../components/form.ts';
import { ConfirmDialog, ErrorBanner, formatNumber, Loading, Notice, Page } from '../components/page.tsx';
import { PLAN_NAMES } from '../components/chain.tsx';
import { limitWords, loadPlans } from '../components/plans.ts';
import { HOME_SIGNED_OUT, navigate } from '../router.ts';
import '../components/chain.css';

type Remaining = Me['remaining'];

const ROWS: Array<{ key: keyof PlanLimits; label: string; left?: keyof Remaining; unit: string }> = [
  { key: 'requestsPerMinute', label: 'Requests per minute', left: 'requestsThisMinute', unit: 'over any 60 s, all keys together' },
  { key: 'dailyLimit', label: 'Requests per day', left: 'requestsToday', unit: 'resets at 00:00 UTC' },
  { key: 'monthlyLimit', label: 'Compute units per month', left: 'computeUnitsThisMonth', unit: 'resets on the 1st, 00:00 UTC' },
  { key: 'maxKeys', label: 'API keys', unit: 'revoked keys do not count' },
  { key: 'maxNetworks', label: 'Networks', unit: 'distinct networks over all your keys' },
];

const shown = (v: number | null, key: keyof PlanLimits) => (v === null ? (key === 'maxNetworks' ? 'all' : 'unlimited') : formatNumber(v));

function PasswordForm() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const form = useForm();
  const [done, setDone] = useState(false);
  const fields = form.fields;
  const submit = async (e: Event) => {
    e.preventDefault();
    setDone(false);
    await form.submit(async () => {
      await changePassword(current, next);
      setCurrent('');
      setNext('');
      setDone(true);
    });
  };
  return (
    <form onSubmit={(e) => void submit(e)} noValidate aria-labelledby="password-title">
      <h2 id="password-title" class="h-section">
        Change the password
      </h2>
      {done ? <Notice>The password is changed. Every other browser and app signed in with it is signed out; this one stays signed in.</Notice> : null}
      <ErrorBanner error={form.error} />
      <div class="row">
        <label for="password-current">
          Current password
          <input
            id="password-current"
            type="password"
            autocomplete="current-password"
            required
            value={current}
            onInput={(e) => setCurrent(e.currentTarget.value)}
            aria-invalid={fields.currentPassword ? true : undefined}
            aria-describedby="password-current-help"
          />
          <small id="password-current-help" class={fields.currentPassword ? 'field-error' : undefined}>
            {fields.currentPassword ? `The current password ${fields.currentPassword}.` : 'The one you signed in with.'}
          </small>
        </label>
        <label for="password-new">
          New password
          <input
            id="password-new"
            type="password"
            autocomplete="new-password"
            required
            minLength={8}
            value={next}
            onInput={(e) => setNext(e.currentTarget.value)}
            aria-invalid={fields.newPassword ? true : undefined}
            aria-describedby="password-new-help"
          />
          <small id="password-new-help">{fields.newPassword ? `The new password ${fields.newPassword}.` : 'At least 8 characters, not a common password.'}</small>
        </label>
      </div>
      <button type="submit" aria-busy={form.busy} disabled={form.busy || !current || !next}>
        Change password
      </button>
    </form>
  );
}

/** What the account's keys use of the key and network allowances (C15, C16): keys not revoked, and their distinct networks. */
function keyUse(keys: ListApiKeysData): { maxKeys: number; maxNetworks: number } {
  const live = keys.filter((k) => k.status !== 'revoked');
  return { maxKeys: live.length, maxNetworks: new Set(live.flatMap((k) => k.networks)).size };
}

export default function Account() {
  const me = useApi(() => api.get('/api/v1/me'));
  const plans = useApi(loadPlans);
  const keys = useApi(() => api.get('/api/v1/api-keys'));
  const used = keys.data ? keyUse(keys.data) : undefined;
  /** Left now: the meter's count for the request limits, the keys' use for the key and network allowances. */
  const left = (m: Me, r: (typeof ROWS)[number]): string => {
    if (r.left) return m.remaining[r.left] === null ? '—' : formatNumber(m.remaining[r.left]);
    const max = m.limits[r.key];
    if (max === null || max === undefined || !used || (r.key !== 'maxKeys' && r.key !== 'maxNetworks')) return '—';
    return formatNumber(Math.max(0, max - used[r.key]));
  };
  const [confirming, setConfirming] = useState(false);
  const m = me.data;
  return (
    <Page title="Account" intro="Your plan and its limits, your password, and where you are signed in.">
      <ErrorBanner error={me.error ?? plans.error} />
      {!m && me.loading ? <Loading what="the account" /> : null}
      {m ? (
        <>
          <dl class="facts account-facts">
            <div>
              <dt>Name</dt>
              <dd>{m.name}</dd>
            </div>
            <div>
              <dt>E-mail</dt>
              <dd>{m.email}</dd>
            </div>
            <div>
              <dt>Plan</dt>
              <dd>
                <strong data-testid="account-tier">{PLAN_NAMES[m.tier]}</strong>
              </dd>
            </div>
          </dl>
          <h2 class="h-section">Limits of your plan</h2>
          <div class="table-wrap">
            <table class="limits account-limits">
              <caption class="offscreen">The limits that apply to your account and what is left of them now</caption>
              <thead>
                <tr>
                  <th scope="col">Limit</th>
                  <th scope="col" class="num">
                    Yours
                  </th>
                  <th scope="col" class="num">
                    Left now
                  </th>
                </tr>
              </thead>
              <tbody>
                {ROWS.map((r) => (
                  <tr key={r.key} data-limit={r.key}>
                    <th scope="row">
                      {r.label}
                      <br />
                      <small class="muted">{r.unit}</small>
                    </th>
                    <td class="num">{shown(m.limits[r.key], r.key)}</td>
                    <td class="num">{left(m, r)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <p class="muted">Plans are changed by the gateway's administrator, who may also set other limits for your account.</p>
        </>
      ) : null}

      {plans.data ? (
        <details class="account-plans">
          <summary>Every plan</summary>
          <div class="table-wrap" tabIndex={0} role="region" aria-label="Every plan">
            <table class="striped">
              <thead>
                <tr>
                  <th scope="col">Plan</th>
                  {ROWS.map((r) => (
                    <th scope="col" class="num" key={r.key}>
                      {r.label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {plans.data.map((p) => (
                  <tr key={p.tier}>
                    <th scope="row">
                      {PLAN_NAMES[p.tier]}
                      {m?.tier === p.tier ? ' (yours)' : ''}
                    </th>
                    {ROWS.map((r) => (
                      <td class="num" key={r.key} title={limitWords[r.key](p.limits[r.key])}>
                        {shown(p.limits[r.key], r.key)}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      ) : null}

      <PasswordForm />

      <section aria-labelledby="everywhere-title">
        <h2 id="everywhere-title" class="h-section">
          Sign out everywhere
        </h2>
        <p>
          Ends every login of this account: this browser, other browsers and any app holding a refresh token. Pages already open keep working for at most 15
          minutes. API keys are not affected.
        </p>
        <button type="button" class="danger outline" onClick={() => setConfirming(true)}>
          Sign out everywhere
        </button>
      </section>
      <ConfirmDialog
        open={confirming}
        title="Sign out everywhere?"
        confirmLabel="Sign out everywhere"
        danger
        onConfirm={async () => {
          await signOutEverywhere();
          navigate(HOME_SIGNED_OUT);
        }}
        onCancel={() => setConfirming(false)}
      >
        <p>Every browser and app signed in to this account must sign in again, this one included.</p>
      </ConfirmDialog>
    </Page>
  );
}
