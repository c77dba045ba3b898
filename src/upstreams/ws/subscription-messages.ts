// The messages of subscriptions: client subscription ids and the notifications clients receive.
import { memberSpan } from '../../json/lossless.ts';
import { randomHexId } from '../../ids/random.ts';

/** A subscription id as clients see it: 16 random bytes in 0x hex, never the upstream node's id. */
export const newSubscriptionId = randomHexId;

/**
 * The notification a client receives, under its own subscription id; `resultText` is the node's
 * result as the node wrote it (one upstream notification serves every client of a topic).
 */
export function notificationText(subscriptionId: string, resultText: string): string {
  return `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${subscriptionId}","result":${resultText}}}`;
}


/**
 * Reads an `eth_subscription` notification from a node: the node's subscription id and the
 * result as text (bytes untouched). Anything else: null.
 */
export function readNotification(text: string, parsed: { method?: unknown; params?: unknown }): { upstreamId: string; resultText: string } | null {
  if (parsed.method !== 'eth_subscription' || typeof parsed.params !== 'object' || parsed.params === null) return null;
  const upstreamId = (parsed.params as { subscription?: unknown }).subscription;
  if (typeof upstreamId !== 'string') return null;
  const params = memberSpan(text, 'params');
  const result = params && memberSpan(text, 'result', params[0], params[1]);
  if (!result) return null;
  return { upstreamId, resultText: text.slice(result[0], result[1]) };
}
