// The plans in words, from the gateway's configuration (GET /plans, GET /me): no figure of a plan
// is written into a page.
import { api } from '../api.ts';
import type { Plan, PlanLimits } from '../api-types.ts';
import { formatNumber } from './page.tsx';

let plans: Promise<Plan[]> | undefined;
/** GET /plans (public), once per page load: the plan table comes from the config. */
export function loadPlans(): Promise<Plan[]> {
  plans ??= api.get('/api/v1/plans').catch((e: unknown) => {
    plans = undefined;
    throw e;
  });
  return plans;
}

const n = formatNumber;
const count = (v: number, one: string, many: string) => `${n(v)} ${v === 1 ? one : many}`;

/** One limit in words, e.g. "100 requests a minute", "unlimited keys". */
export const limitWords = {
  requestsPerMinute: (v: number | null) => (v === null ? 'no limit per minute' : `${count(v, 'request', 'requests')} a minute`),
  dailyLimit: (v: number | null) => (v === null ? 'no daily limit' : `${count(v, 'request', 'requests')} a day`),
  monthlyLimit: (v: number | null) => (v === null ? 'no monthly quota' : `${count(v, 'compute unit', 'compute units')} a month`),
  maxKeys: (v: number | null) => (v === null ? 'unlimited API keys' : count(v, 'API key', 'API keys')),
  maxNetworks: (v: number | null) => (v === null ? 'every network' : `up to ${count(v, 'network', 'networks')}`),
};

/** "3 API keys, up to 5 networks, 100 requests a minute, 100,000 compute units a month". */
export function planSummary(l: PlanLimits): string {
  return [limitWords.maxKeys(l.maxKeys), limitWords.maxNetworks(l.maxNetworks), limitWords.requestsPerMinute(l.requestsPerMinute), limitWords.monthlyLimit(l.monthlyLimit)].join(', ');
}
