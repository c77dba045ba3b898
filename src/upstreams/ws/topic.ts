// What one `eth_subscribe` asks for, in canonical form, so equal requests share one upstream subscription.
import { InvalidParamsError } from '../../errors/rpc.ts';

/**
 * What one `eth_subscribe` asks for, in canonical form: two requests for the same stream on one
 * network get the same `key` and so share one upstream subscription.
 */
export interface Topic {
  /** Canonical text: equal for every request that asks for the same stream. */
  key: string;
  /** The `eth_subscribe` params sent upstream (the canonical filter, not the client's text). */
  params: readonly unknown[];
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;
const MAX_ADDRESSES = 1_000;
const MAX_TOPIC_ALTERNATIVES = 1_000;

const invalid = (why: string) => new InvalidParamsError(`Invalid params: ${why}`);

/**
 * Reads the params of `eth_subscribe`: `newHeads`, `logs` with an optional `{address, topics}`
 * filter, and `newPendingTransactions` (with geth's optional `true` for full transactions).
 * Filters are canonicalised (lower case, sorted, duplicates and trailing wildcards dropped) so
 * equivalent filters share one upstream subscription.
 *
 * @returns the topic, or the -32602 error to answer.
 */
export function parseTopic(params: unknown): Topic | InvalidParamsError {
  if (!Array.isArray(params) || params.length === 0 || typeof params[0] !== 'string') {
    return invalid('eth_subscribe takes ["newHeads"], ["logs", filter?] or ["newPendingTransactions"]');
  }
  const [kind, arg, ...rest] = params as [string, unknown, ...unknown[]];
  if (rest.length > 0) return invalid(`too many params for ${kind}`);
  switch (kind) {
    case 'newHeads':
      if (arg !== undefined && !isEmptyObject(arg)) return invalid('newHeads takes no filter');
      return { key: 'newHeads', params: ['newHeads'] };
    case 'newPendingTransactions':
      if (arg !== undefined && typeof arg !== 'boolean') return invalid('newPendingTransactions takes an optional boolean (full transactions)');
      return arg === true
        ? { key: 'newPendingTransactions:full', params: ['newPendingTransactions', true] }
        : { key: 'newPendingTransactions', params: ['newPendingTransactions'] };
    case 'logs':
      return logsTopic(arg);
    default:
      return invalid(`unsupported subscription "${kind.slice(0, 64)}" (supported: newHeads, logs, newPendingTransactions)`);
  }
}

function isEmptyObject(x: unknown): boolean {
  return typeof x === 'object' && x !== null && !Array.isArray(x) && Object.keys(x).length === 0;
}

function logsTopic(arg: unknown): Topic | InvalidParamsError {
  if (arg === undefined || arg === null) return { key: 'logs:{}', params: ['logs', {}] };
  if (typeof arg !== 'object' || Array.isArray(arg)) return invalid('the logs filter must be an object');
  const filter = arg as Record<string, unknown>;
  for (const k of Object.keys(filter)) {
    if (k !== 'address' && k !== 'topics') return invalid(`logs subscriptions take "address" and "topics" only, not "${k.slice(0, 32)}"`);
  }
  const canonical: { address?: string[]; topics?: Array<string | string[] | null> } = {};

  if (filter.address !== undefined && filter.address !== null) {
    const list = Array.isArray(filter.address) ? filter.address : [filter.address];
    if (list.length > MAX_ADDRESSES) return invalid(`at most ${MAX_ADDRESSES} addresses`);
    if (!list.every((a): a is string => typeof a === 'string' && ADDRESS.test(a))) return invalid('address must be a 20-byte hex address or a list of them');
    // An empty list matches every address, as no address does.
    if (list.length > 0) canonical.address = sortedUnique(list.map((a) => a.toLowerCase()));
  }

  if (filter.topics !== undefined && filter.topics !== null) {
    if (!Array.isArray(filter.topics) || filter.topics.length > 4) return invalid('topics must be a list of at most 4 positions');
    const topics: Array<string | string[] | null> = [];
    for (const position of filter.topics as unknown[]) {
      if (position === null) {
        topics.push(null);
      } else if (typeof position === 'string') {
        if (!TOPIC.test(position)) return invalid('each topic must be a 32-byte hex value');
        topics.push(position.toLowerCase());
      } else if (Array.isArray(position)) {
        if (position.length > MAX_TOPIC_ALTERNATIVES) return invalid(`at most ${MAX_TOPIC_ALTERNATIVES} alternatives per topic position`);
        // A null or an empty list among the alternatives matches anything there (as geth reads it).
        if (position.length === 0 || position.includes(null)) {
          topics.push(null);
          continue;
        }
        if (!position.every((t): t is string => typeof t === 'string' && TOPIC.test(t))) return invalid('each topic must be a 32-byte hex value');
        const alternatives = sortedUnique(position.map((t) => t.toLowerCase()));
        topics.push(alternatives.length === 1 ? (alternatives[0] as string) : alternatives);
      } else {
        return invalid('a topic position must be null, a topic, or a list of topics');
      }
    }
    // Trailing wildcards change nothing.
    while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop();
    if (topics.length > 0) canonical.topics = topics;
  }
  const key = `logs:${JSON.stringify(canonical)}`;
  return { key, params: ['logs', canonical] };
}

function sortedUnique(xs: string[]): string[] {
  return [...new Set(xs)].sort();
}
