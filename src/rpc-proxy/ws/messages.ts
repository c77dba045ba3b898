import { randomBytes } from 'node:crypto';
import { skipValue } from '../lossless.ts';

/** A subscription id as clients see it: 16 random bytes in 0x hex, never the upstream node's id. */
export function newSubscriptionId(): string {
  return `0x${randomBytes(16).toString('hex')}`;
}

/**
 * The notification a client receives, under its own subscription id; `resultText` is the node's
 * result as the node wrote it (one upstream notification serves every client of a topic).
 */
export function notificationText(subscriptionId: string, resultText: string): string {
  return `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"${subscriptionId}","result":${resultText}}}`;
}

const WS = new Set([0x20, 0x0a, 0x0d, 0x09]);
function skipWs(t: string, i: number): number {
  while (i < t.length && WS.has(t.charCodeAt(i))) i++;
  return i;
}

/** Start and end of the value of the top-level member `name` of the object text `t`, or null. */
export function memberSpan(t: string, name: string, from = 0, to = t.length): [number, number] | null {
  const quoted = `"${name}"`;
  let i = skipWs(t, from);
  if (t.charCodeAt(i) !== 0x7b) return null;
  i = skipWs(t, i + 1);
  while (i < to && t.charCodeAt(i) === 0x22) {
    const keyEnd = skipValue(t, i);
    const match = keyEnd - i === quoted.length && t.startsWith(quoted, i);
    i = skipWs(t, keyEnd);
    if (t.charCodeAt(i) !== 0x3a) return null;
    const valStart = skipWs(t, i + 1);
    const valEnd = skipValue(t, valStart);
    if (match) return [valStart, valEnd];
    i = skipWs(t, valEnd);
    if (t.charCodeAt(i) !== 0x2c) return null;
    i = skipWs(t, i + 1);
  }
  return null;
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
