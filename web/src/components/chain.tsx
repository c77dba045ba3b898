// Pieces shared by the faucet, whale alerts, webhooks, intents and analytics pages: the account's
// plan, the networks, explorer links, polling and what a plan-gated page shows instead of an error.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { api } from '../api.ts';
import type { NetworkDetail, NetworkSummary, User } from '../api-types.ts';
import { CopyButton, Link } from './page.tsx';

export type Tier = User['tier'];

export const PLAN_NAMES: Record<Tier, string> = { free: 'Free', pro: 'Pro', max: 'Max', enterprise: 'Enterprise' };

/** C9: the plans that carry each feature (C36 whale alerts, C37 webhooks, C46 analytics). */
export const FEATURE_PLANS = {
  whaleAlerts: ['max', 'enterprise'],
  webhooks: ['max', 'enterprise'],
  analytics: ['pro', 'max', 'enterprise'],
} as const satisfies Record<string, readonly Tier[]>;

/** The account as GET /me answers it now (the plan may have changed since sign-in). */
export const loadMe = () => api.get('/api/v1/me');

let networks: Promise<NetworkSummary[]> | undefined;
/** GET /networks, once per page load (the list comes from the config and does not change). */
export function loadNetworks(): Promise<NetworkSummary[]> {
  networks ??= api.get('/api/v1/networks').catch((e: unknown) => {
    networks = undefined;
    throw e;
  });
  return networks;
}

const details = new Map<string, Promise<NetworkDetail>>();
/** GET /networks/:slug (it carries the explorer), once per network and page load. */
export function loadNetwork(slug: string): Promise<NetworkDetail> {
  let p = details.get(slug);
  if (!p) {
    p = api.get('/api/v1/networks/{slug}', { params: { slug } });
    p.catch(() => details.delete(slug));
    details.set(slug, p);
  }
  return p;
}

/** "0x1234…abcd". */
export const shortHex = (hex: string, keep = 6): string => (hex.length > keep * 2 + 3 ? `${hex.slice(0, keep + 2)}…${hex.slice(-keep)}` : hex);

/** 1234.5 → "$1,234.50"; null (no price, C34) → "no price". */
export const formatUsd = (usd: number | null | undefined): string =>
  usd === null || usd === undefined ? 'no price' : usd.toLocaleString('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 2 });

/**
 * An exact decimal string with thousands separators ("1234567.5" → "1,234,567.5"); decimals past
 * `maxDecimals` are cut (never rounded up: a balance is never shown larger than it is).
 */
export function formatUnits(value: string, maxDecimals = 18): string {
  const [whole = '0', frac = ''] = value.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const cut = frac.slice(0, maxDecimals).replace(/0+$/, '');
  return cut ? `${grouped}.${cut}` : grouped;
}

/**
 * A transaction hash, linked to the network's explorer when it has one; on the devnet
 * (`explorerUrl` null) the hash alone, since there is nothing to link to.
 */
export function TxHash(props: { hash: string; explorerUrl: string | null | undefined; short?: boolean }) {
  const text = props.short ? shortHex(props.hash) : props.hash;
  if (!props.explorerUrl) return <code class="hash" title={props.hash}>{text}</code>;
  return (
    <a class="hash" href={`${props.explorerUrl.replace(/\/+$/, '')}/tx/${props.hash}`} target="_blank" rel="noopener noreferrer" title={props.hash}>
      <code>{text}</code>
      <span class="offscreen"> (opens the explorer in a new tab)</span>
    </a>
  );
}

/**
 * Runs `tick` every `ms` while `enabled` and the tab is visible (a hidden tab asks nothing, and
 * asks at once when it shows again). The latest `tick` is used, so it may close over fresh state.
 */
export function usePolling(tick: () => void, ms: number, enabled = true): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!enabled) return;
    let timer: ReturnType<typeof setInterval> | undefined;
    const start = () => {
      clearInterval(timer);
      timer = setInterval(() => {
        if (!document.hidden) latest.current();
      }, ms);
    };
    const onVisible = () => {
      if (!document.hidden) latest.current();
    };
    start();
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [ms, enabled]);
}

/**
 * What a page of a plan feature shows to an account whose plan lacks it: what the feature would
 * give, in words, and how to get it. Not an error: nothing went wrong (C7's 403 PLAN_FEATURE is
 * what the API itself would answer).
 */
export function PlanFeature(props: { feature: string; plans: readonly Tier[]; tier: Tier; children: ComponentChildren }) {
  const names = props.plans.map((p) => PLAN_NAMES[p]);
  const list = names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}` : (names[0] ?? '');
  return (
    <article class="plan-feature" aria-labelledby="plan-feature-title">
      <h2 id="plan-feature-title">
        {props.feature} come with the {list} {names.length > 1 ? 'plans' : 'plan'}
      </h2>
      <p>
        Your account is on the <strong>{PLAN_NAMES[props.tier]}</strong> plan. On {list} you would get:
      </p>
      {props.children}
      <p class="muted">
        Plans are changed by the gateway's administrator; ask them to move your account. Everything else on your plan keeps working
        meanwhile: see your <Link href="/keys">API keys</Link> and <Link href="/usage">usage</Link>.
      </p>
    </article>
  );
}

/**
 * A wide table that scrolls sideways on a narrow screen: the scrolling region is focusable and
 * named, so a keyboard can scroll it too.
 */
export function ScrollTable(props: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={props.label}>
      {props.children}
    </div>
  );
}

/** A long value (a secret, an address, wei) that wraps instead of scrolling, with its copy button. */
export function WrapCopy(props: { text: string; label: string; tall?: boolean }) {
  return (
    <div class="wrap-copy">
      {props.tall ? (
        // A box of a few lines that scrolls; focusable, so the keyboard scrolls it too.
        <code class="tall" tabIndex={0} role="region" aria-label={props.label}>
          {props.text}
        </code>
      ) : (
        <code aria-label={props.label}>{props.text}</code>
      )}
      <CopyButton text={props.text} label={`Copy ${props.label}`} />
    </div>
  );
}
