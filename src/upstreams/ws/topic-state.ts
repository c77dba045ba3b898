// A hub's topics: who follows each, and what was passed on, so nothing is passed on twice (C26).
import type { RpcError } from '../../errors/rpc.ts';
import type { Topic } from './topic.ts';

/**
 * A subscription hub's topics (subscription-hub.ts): who follows each, and what was passed on to them, so a
 * block or log seen twice (after a reconnect, a failover or a gap fill) is dropped (C26).
 */

/**
 * One notification of a topic, handed to every subscriber of it. What a subscriber makes of it
 * (the WebSocket frame every client gets, but for its subscription id) is made once, by the
 * first subscriber that asks, and shared by the rest: a notification is serialised once per
 * topic, not once per client (docs/scaling.md).
 */
export class Notification {
  /** The node's `result`, as the node wrote it. */
  readonly resultText: string;
  #make: ((resultText: string) => unknown) | undefined;
  #made: unknown;

  constructor(resultText: string) {
    this.resultText = resultText;
  }

  /** `make(resultText)`, made once per notification (for one `make`; another one replaces it). */
  shared<T>(make: (resultText: string) => T): T {
    if (this.#make !== make) {
      this.#made = make(this.resultText);
      this.#make = make;
    }
    return this.#made as T;
  }
}

/** One client subscription as the hub sees it: where the node's notifications go. */
export interface Subscriber {
  /** Called with each notification of the topic; must not throw. */
  deliver(note: Notification): void;
}

/** One topic of a hub: its subscribers, its upstream subscription, and what was passed on. */
export interface TopicState {
  topic: Topic;
  subscribers: Set<Subscriber>;
  /** Clients waiting for the first upstream confirmation, with how to answer them. */
  waiters: Map<Subscriber, { resolve(): void; reject(err: RpcError): void }>;
  /** The node's id for this stream on the current connection; null while (re)subscribing. */
  upstreamId: string | null;
  subscribing: boolean;
  /** Confirmed once: later clients join at once, even while the hub reconnects. */
  active: boolean;
  timer: NodeJS.Timeout | undefined;
  /** What is tracked for gap fill and duplicates: block headers, logs, or nothing. */
  kind: 'newHeads' | 'logs' | 'other';
  /** newHeads: the highest block number passed on. */
  lastNumber: number | null;
  /** newHeads: hashes of the blocks passed on lately, oldest first. */
  recent: Set<string>;
  /** newHeads: the members of a live header (a fetched block is cut to them). */
  headerKeys: readonly string[] | null;
  /** logs: block number and log index of the last log passed on. */
  lastLog: [number, number] | null;
  /** logs: the block up to which every matching log was passed on (at least as far as known). */
  mark: number | null;
  /** Live notifications held while a gap fill runs, then passed on after it. */
  buffer: string[] | null;
}

// Block hashes a newHeads topic remembers to drop a block seen twice (after a failover or a fill).
const RECENT_HASHES = 1_024;

/** A topic no client follows yet, not subscribed upstream. */
export function newTopicState(topic: Topic): TopicState {
  const kind = topic.params[0] === 'newHeads' ? 'newHeads' : topic.params[0] === 'logs' ? 'logs' : 'other';
  return {
    topic,
    subscribers: new Set(),
    waiters: new Map(),
    upstreamId: null,
    subscribing: false,
    active: false,
    timer: undefined,
    kind,
    lastNumber: null,
    recent: new Set(),
    headerKeys: null,
    lastLog: null,
    mark: null,
    buffer: null,
  };
}

/**
 * True when a topic's subscribers already had this block header or log: a header whose hash was
 * passed on lately, or a log at or before the last one passed on (block number, log index; logs
 * removed by a reorganisation always pass, and let the new chain's logs of those blocks through).
 * Otherwise records it as passed on and returns false. For `newHeads` and `logs` topics only.
 */
export function alreadyPassedOn(st: TopicState, text: string, live: boolean): boolean {
  const x = readObject(text);
  if (st.kind === 'newHeads' && x && typeof x.hash === 'string' && typeof x.number === 'string') {
    if (st.recent.has(x.hash)) return true;
    st.recent.add(x.hash);
    if (st.recent.size > RECENT_HASHES) st.recent.delete(st.recent.values().next().value as string);
    const n = Number.parseInt(x.number, 16);
    if (st.lastNumber === null || n > st.lastNumber) st.lastNumber = n;
    if (live && st.headerKeys === null) st.headerKeys = Object.keys(x);
  } else if (st.kind === 'logs' && x && typeof x.blockNumber === 'string' && typeof x.logIndex === 'string') {
    const at: [number, number] = [Number.parseInt(x.blockNumber, 16), Number.parseInt(x.logIndex, 16)];
    const last = st.lastLog;
    if (x.removed === true) {
      if (last && (at[0] < last[0] || (at[0] === last[0] && at[1] <= last[1]))) st.lastLog = [at[0], at[1] - 1];
    } else {
      if (last && (at[0] < last[0] || (at[0] === last[0] && at[1] <= last[1]))) return true;
      st.lastLog = at;
      if (st.mark === null || at[0] > st.mark) st.mark = at[0];
    }
  }
  return false;
}

/** The members of a header or log that the hub reads; null when the text is not a JSON object. */
function readObject(text: string): { number?: unknown; hash?: unknown; blockNumber?: unknown; logIndex?: unknown; removed?: unknown } | null {
  try {
    const x: unknown = JSON.parse(text);
    return typeof x === 'object' && x !== null && !Array.isArray(x) ? x : null;
  } catch {
    return null;
  }
}
