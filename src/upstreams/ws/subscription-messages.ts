// The messages of subscriptions: client subscription ids and the notifications clients receive.
import { randomFillSync } from 'node:crypto';
import { memberSpan } from '../../json/lossless.ts';

/** Random bytes drawn 4 KiB at a time (256 ids), as Node's randomUUID does, not one draw per id. */
const entropy = Buffer.allocUnsafe(4096);
let entropyAt = entropy.length;
/** Where an id is written: `0x`, then the digits. */
const idScratch = Buffer.from('0x'.padEnd(34, '0'), 'latin1');
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/** A subscription id as clients see it: 16 random bytes in 0x hex, never the upstream node's id. */
export function newSubscriptionId(): string {
  if (entropyAt === entropy.length) {
    randomFillSync(entropy);
    entropyAt = 0;
  }
  for (let i = 0; i < 16; i++) {
    const byte = entropy[entropyAt + i] as number;
    idScratch[2 + 2 * i] = HEX_DIGITS[byte >> 4] as number;
    idScratch[3 + 2 * i] = HEX_DIGITS[byte & 15] as number;
  }
  // Each byte is used once: the next id starts past these, and the pool is drawn anew when used up.
  entropyAt += 16;
  // Written whole into one buffer, so the string is one flat piece (a template would keep '0x' and
  // the digits as two parts, for as long as the subscription lives).
  return idScratch.toString('latin1');
}

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
