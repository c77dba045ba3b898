// C38: the event types, and which endpoint wants which event (its filters).
import type { WebhookFilters } from './schema.ts';

export const EVENT_TYPES = ['whale.alert', 'address.activity', 'usage.quota', 'intent.updated', 'webhook.test'] as const;
export type WebhookEventType = (typeof EVENT_TYPES)[number];

/** An event as publishers hand it over (C38). */
export interface PublishedEvent {
  type: WebhookEventType;
  /** ISO 8601 UTC; default now. */
  timestamp?: string;
  data: Record<string, unknown>;
  /** For events of one account (usage.quota, intent.updated): only its endpoints get it. */
  accountId?: string;
}

/** The body every receiver gets: `{type, timestamp, data}` (C38). */
export function eventBody(event: PublishedEvent): string {
  return JSON.stringify({ type: event.type, timestamp: event.timestamp ?? new Date().toISOString(), data: event.data });
}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/** Compares two non-negative decimal strings exactly ("10000.5" vs "9999.999"): -1, 0 or 1. */
export function compareDecimal(a: string, b: string): number {
  const ma = DECIMAL.exec(a);
  const mb = DECIMAL.exec(b);
  if (!ma || !mb) throw new Error('not a decimal string');
  const scale = Math.max(ma[2]?.length ?? 0, mb[2]?.length ?? 0);
  const big = (m: RegExpExecArray) => BigInt((m[1] as string) + (m[2] ?? '').padEnd(scale, '0'));
  const x = big(ma);
  const y = big(mb);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Whether an endpoint with `filters` wants this event (its type already matched). `networks`
 * and `minValue` narrow every event that has a `network` or a `value`; an event without one
 * (usage.quota, webhook.test) passes them. address.activity events are addressed by their
 * producer, which matched the addresses already.
 */
export function matchesFilters(filters: WebhookFilters, data: Record<string, unknown>): boolean {
  const network = data.network;
  if (filters.networks?.length && typeof network === 'string' && !filters.networks.includes(network)) return false;
  const value = data.value;
  if (filters.minValue !== undefined && typeof value === 'string' && DECIMAL.test(value) && compareDecimal(value, filters.minValue) < 0) return false;
  return true;
}
