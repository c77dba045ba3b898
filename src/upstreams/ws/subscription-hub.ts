// One network's subscription hub: upstream WebSocket subscriptions shared by every client of a topic.
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { NodeAnsweredError, type RpcError, UpstreamError } from '../../errors/rpc.ts';
import { UpstreamWsNoAnswerError, UpstreamWsRpcError } from '../../errors/upstream.ts';
import { type FillHost, fillGap } from './gap-fill.ts';
import { alreadyPassedOn, newTopicState, Notification, type Subscriber, type TopicState } from './topic-state.ts';
import { readNotification } from './subscription-messages.ts';
import type { Topic } from './topic.ts';

export { Notification, type Subscriber };

export interface HubOptions {
  network: string;
  /** The network's upstream WebSocket addresses in config order (may hold credentials: never logged). */
  urls: readonly string[];
  /** Their names from the config (same order), for logs; the URLs never are. */
  names?: readonly string[];
  logger: Logger;
  /** Milliseconds for a connection to open or a node to answer `eth_subscribe`. */
  timeoutMs: number;
  /** Milliseconds before the first reconnection; doubles per failure up to `reconnectMaxMs`. */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /** Milliseconds between pings to the node, and without a pong before the socket is given up. */
  pingIntervalMs: number;
  idleTimeoutMs: number;
  /** Milliseconds the upstream socket stays open with no subscription left. */
  lingerMs?: number;
  /** Blocks of `newHeads` and `logs` fetched after a reconnect (the latest ones); 0 or absent: none. */
  gapFillMaxBlocks?: number;
}

/** Counters of one hub (tests, the benchmark and /metrics read them). */
export interface HubStats {
  network: string;
  connected: boolean;
  /** Config index of the upstream the hub is connected to (never its URL). */
  upstream: number | null;
  /** Distinct streams subscribed upstream (one per topic, whatever the number of clients). */
  topics: number;
  subscribers: number;
  upstreamSubscribes: number;
  upstreamUnsubscribes: number;
  reconnects: number;
  notifications: number;
  /** Blocks and logs sent to subscribers from a gap fill after a reconnect. */
  gapFilled: number;
  /** Notifications not passed on because subscribers already had them (a block or log seen twice). */
  duplicatesDropped: number;
  /** Seconds spent handing notifications to their subscribers (the fan-out: framing and writing to every client). */
  deliverSeconds: number;
}

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

const DEFAULT_LINGER_MS = 30_000;
// Blocks with full transactions can be large; this bounds one message from a node.
const UPSTREAM_MAX_PAYLOAD = 64 * 1024 * 1024;

/**
 * The subscriptions of one network, shared: one upstream WebSocket connection, and one
 * upstream subscription per distinct topic however many clients follow it. Each notification
 * from the node is handed to every subscriber of its topic. When the connection drops, the hub
 * reconnects with backoff (moving to the next upstream with a WebSocket address) and subscribes
 * every topic again; subscribers keep their ids and never notice, except for the notifications
 * the node sent while the hub was away, which are lost.
 */
export class SubscriptionHub {
  readonly network: string;
  readonly #o: HubOptions;
  readonly #log: Logger;
  readonly #topics = new Map<string, TopicState>();
  readonly #byUpstreamId = new Map<string, TopicState>();
  readonly #pending = new Map<number, Pending>();
  #socket: WebSocket | null = null;
  #open = false;
  #connectedIndex: number | null = null;
  #urlIndex = 0;
  #failures = 0;
  #nextId = 1;
  #closed = false;
  #lastPongAt = 0;
  #pingTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #lingerTimer: NodeJS.Timeout | undefined;
  readonly #counters = { upstreamSubscribes: 0, upstreamUnsubscribes: 0, reconnects: 0, notifications: 0, gapFilled: 0, duplicatesDropped: 0, deliverSeconds: 0 };

  constructor(opts: HubOptions) {
    this.network = opts.network;
    this.#o = opts;
    this.#log = opts.logger;
  }

  /** An upstream's name for the log (its WebSocket index when the hub was given no names). */
  #name(index: number | null): string | number | null {
    return index === null ? null : (this.#o.names?.[index] ?? index);
  }

  /**
   * Adds a subscriber to a topic; resolves once the node confirmed the topic's upstream
   * subscription (at once when it already runs), with the topic's key as the hub keeps it (one
   * string for every subscriber of the topic: theirs can be let go).
   *
   * @throws RpcError: -32000 when no node could take the subscription in time, or the node's
   *   own error when it refused it.
   */
  async subscribe(topic: Topic, subscriber: Subscriber): Promise<string> {
    if (this.#closed) throw new UpstreamError('Upstream RPC error: the gateway is shutting down');
    if (this.#o.urls.length === 0) {
      throw new UpstreamError(`Upstream RPC error: network ${this.network} has no WebSocket upstream for subscriptions`, {
        details: { network: this.network },
      });
    }
    let st = this.#topics.get(topic.key);
    if (!st) {
      st = newTopicState(topic);
      this.#topics.set(topic.key, st);
      const created = st;
      created.timer = setTimeout(() => {
        this.#failTopic(created, new UpstreamError('Upstream RPC error: no node accepted the subscription in time', { details: { network: this.network } }));
      }, this.#o.timeoutMs);
      created.timer.unref();
      clearTimeout(this.#lingerTimer);
      if (this.#open) this.#subscribeUpstream(created);
      else if (!this.#socket && !this.#reconnectTimer) this.#connect();
    }
    st.subscribers.add(subscriber);
    if (st.active) return st.topic.key;
    const waiting = st;
    await new Promise<void>((resolve, reject) => waiting.waiters.set(subscriber, { resolve, reject }));
    return waiting.topic.key;
  }

  /** Removes a subscriber; the topic's upstream subscription is dropped with its last subscriber. */
  unsubscribe(topicKey: string, subscriber: Subscriber): void {
    const st = this.#topics.get(topicKey);
    if (!st || !st.subscribers.delete(subscriber)) return;
    st.waiters.get(subscriber)?.reject(new UpstreamError('Upstream RPC error: subscription cancelled'));
    st.waiters.delete(subscriber);
    if (st.subscribers.size > 0) return;
    this.#topics.delete(topicKey);
    clearTimeout(st.timer);
    if (st.upstreamId !== null) {
      this.#byUpstreamId.delete(st.upstreamId);
      this.#unsubscribeUpstream(st.upstreamId);
    }
    if (this.#topics.size === 0) this.#linger();
  }

  stats(): HubStats {
    let subscribers = 0;
    for (const st of this.#topics.values()) subscribers += st.subscribers.size;
    return {
      network: this.network,
      connected: this.#open,
      upstream: this.#open ? this.#connectedIndex : null,
      topics: this.#topics.size,
      subscribers,
      ...this.#counters,
    };
  }

  /** Drops every subscriber and closes the upstream connection (graceful stop). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    clearTimeout(this.#lingerTimer);
    clearInterval(this.#pingTimer);
    const closing = new UpstreamError('Upstream RPC error: the gateway is shutting down');
    for (const st of this.#topics.values()) {
      clearTimeout(st.timer);
      for (const w of st.waiters.values()) w.reject(closing);
    }
    this.#topics.clear();
    this.#byUpstreamId.clear();
    const socket = this.#socket;
    if (!socket || socket.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        socket.terminate();
        resolve();
      }, 1_000);
      socket.once('close', () => {
        clearTimeout(force);
        resolve();
      });
      if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      else socket.close(1001, 'gateway shutting down');
    });
  }

  #connect(): void {
    if (this.#closed || this.#socket || this.#topics.size === 0) return;
    const index = this.#urlIndex % this.#o.urls.length;
    const socket = new WebSocket(this.#o.urls[index] as string, {
      handshakeTimeout: this.#o.timeoutMs,
      maxPayload: UPSTREAM_MAX_PAYLOAD,
      perMessageDeflate: false,
    });
    this.#socket = socket;
    this.#open = false;
    socket.on('open', () => {
      this.#open = true;
      this.#connectedIndex = index;
      this.#lastPongAt = Date.now();
      this.#log.debug({ network: this.network, upstream: this.#name(index) }, 'upstream WebSocket connected');
      this.#pingTimer = setInterval(() => this.#ping(socket), this.#o.pingIntervalMs);
      this.#pingTimer.unref();
      for (const st of this.#topics.values()) this.#subscribeUpstream(st);
      if (this.#topics.size === 0) this.#linger();
    });
    socket.on('message', (data: Buffer) => this.#onMessage(data));
    socket.on('pong', () => {
      this.#lastPongAt = Date.now();
    });
    socket.on('error', (err) => {
      // 'close' follows; the URL stays out of the log.
      this.#log.debug({ network: this.network, upstream: this.#name(index), error: (err as NodeJS.ErrnoException).code ?? err.name }, 'upstream WebSocket error');
    });
    socket.on('close', () => this.#onClose(socket, index));
  }

  #ping(socket: WebSocket): void {
    if (socket !== this.#socket || socket.readyState !== WebSocket.OPEN) return;
    if (Date.now() - this.#lastPongAt > this.#o.idleTimeoutMs) {
      this.#log.warn({ network: this.network, upstream: this.#name(this.#connectedIndex) }, 'upstream WebSocket stopped answering pings; reconnecting');
      socket.terminate();
      return;
    }
    socket.ping();
  }

  /** Forgets the current connection: its requests fail and every topic must be subscribed again. */
  #detach(): void {
    this.#socket = null;
    this.#open = false;
    this.#connectedIndex = null;
    clearInterval(this.#pingTimer);
    const lost = new UpstreamWsNoAnswerError('upstream connection lost');
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(lost);
    }
    this.#pending.clear();
    this.#byUpstreamId.clear();
    for (const st of this.#topics.values()) {
      st.upstreamId = null;
      st.subscribing = false;
    }
  }

  #onClose(socket: WebSocket, index: number): void {
    if (socket !== this.#socket) return;
    const wasOpen = this.#open;
    this.#detach();
    if (this.#closed || this.#topics.size === 0) return;
    // Try the next upstream with a WebSocket address (the same one when it is the only one).
    // The backoff resets once a subscription is confirmed, so a node that accepts connections
    // but drops them at once is retried ever more slowly.
    this.#urlIndex = index + 1;
    this.#failures++;
    const delay = Math.min(this.#o.reconnectMaxMs, this.#o.reconnectMinMs * 2 ** (this.#failures - 1));
    this.#log.warn({ network: this.network, upstream: this.#name(index), topics: this.#topics.size, retryInMs: delay }, wasOpen ? 'upstream WebSocket lost; reconnecting' : 'upstream WebSocket could not connect; retrying');
    this.#counters.reconnects++;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.#connect();
    }, delay);
    this.#reconnectTimer.unref();
  }

  #onMessage(data: Buffer): void {
    const text = data.toString('utf8');
    let msg: { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
    try {
      msg = JSON.parse(text) as typeof msg;
    } catch {
      return;
    }
    if (typeof msg !== 'object' || msg === null || Array.isArray(msg)) return;
    if (typeof msg.id === 'number') {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.error !== undefined) p.reject(new UpstreamWsRpcError((msg.error ?? {})));
      else p.resolve(msg.result);
      return;
    }
    const note = readNotification(text, msg);
    if (!note) return;
    const st = this.#byUpstreamId.get(note.upstreamId);
    if (!st) return;
    this.#counters.notifications++;
    if (st.buffer) st.buffer.push(note.resultText);
    else this.#deliver(st, note.resultText, true);
  }

  /**
   * Passes a notification on to a topic's subscribers, unless it is a block header or log they
   * already had (C26; see {@link alreadyPassedOn}).
   */
  #deliver(st: TopicState, text: string, live: boolean): void {
    if (st.kind !== 'other' && alreadyPassedOn(st, text, live)) {
      this.#counters.duplicatesDropped++;
      return;
    }
    if (!live) this.#counters.gapFilled++;
    const started = performance.now();
    const note = new Notification(text);
    for (const s of st.subscribers) s.deliver(note);
    this.#counters.deliverSeconds += (performance.now() - started) / 1000;
  }

  /** After a reconnect, fetches and passes on what a topic missed (gap-fill.ts), over this connection. */
  #fill(st: TopicState, socket: WebSocket | null): void {
    const host: FillHost = {
      request: (method, params) => this.#request(method, params),
      current: () => socket === this.#socket && this.#topics.get(st.topic.key) === st,
      deliver: (text, live) => this.#deliver(st, text, live),
      failed: (err) => this.#log.warn({ network: this.network, topic: st.kind, error: err.message }, 'upstream WebSocket gap fill failed; going on live'),
    };
    fillGap(st, this.#o.gapFillMaxBlocks ?? 0, host);
  }

  /** logs: the head when the topic starts, as the block its logs are known from. */
  #markStart(st: TopicState): void {
    if (st.kind !== 'logs' || (this.#o.gapFillMaxBlocks ?? 0) <= 0) return;
    this.#request('eth_blockNumber', []).then(
      (h) => {
        const n = Number.parseInt(String(h), 16);
        if (Number.isSafeInteger(n) && (st.mark === null || n > st.mark)) st.mark = n;
      },
      () => {},
    );
  }

  #request(method: string, params: readonly unknown[]): Promise<unknown> {
    const socket = this.#socket;
    if (!socket || !this.#open) return Promise.reject(new UpstreamWsNoAnswerError('upstream not connected'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new UpstreamWsNoAnswerError('upstream did not answer in time'));
      }, this.#o.timeoutMs);
      timer.unref();
      this.#pending.set(id, { resolve, reject, timer });
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  #subscribeUpstream(st: TopicState): void {
    if (!this.#open || st.subscribing || st.upstreamId !== null) return;
    st.subscribing = true;
    const socket = this.#socket;
    this.#counters.upstreamSubscribes++;
    this.#request('eth_subscribe', st.topic.params).then(
      (result) => {
        if (socket !== this.#socket) return; // that connection is gone; the next one subscribes again
        st.subscribing = false;
        if (typeof result !== 'string') {
          this.#subscribeFailed(st, new UpstreamWsRpcError({ message: 'the node answered eth_subscribe without a subscription id' }));
          return;
        }
        if (this.#topics.get(st.topic.key) !== st) {
          // Every client left (or gave up) while the node was answering.
          this.#unsubscribeUpstream(result);
          return;
        }
        st.upstreamId = result;
        this.#byUpstreamId.set(result, st);
        this.#failures = 0;
        if (st.active) {
          this.#fill(st, socket); // a subscription taken again after a reconnect: catch up first
          return;
        }
        this.#markStart(st);
        st.active = true;
        clearTimeout(st.timer);
        for (const w of st.waiters.values()) w.resolve();
        st.waiters.clear();
      },
      (err: Error) => {
        if (socket !== this.#socket) return;
        st.subscribing = false;
        this.#subscribeFailed(st, err);
      },
    );
  }

  #subscribeFailed(st: TopicState, err: Error): void {
    if (!st.active && err instanceof UpstreamWsRpcError) {
      // The node refused this filter: its clients get the node's own error (C22).
      const e = err.error;
      this.#failTopic(st, new NodeAnsweredError(typeof e.code === 'number' ? e.code : -32603, err.message, { details: e.data }));
      return;
    }
    if (this.#topics.get(st.topic.key) !== st) return;
    // A node that cannot re-take a running subscription is in trouble: move to the next one.
    this.#log.warn({ network: this.network, upstream: this.#name(this.#connectedIndex), error: err.message }, 'upstream eth_subscribe failed; reconnecting');
    this.#socket?.terminate();
  }

  /** Gives up a topic that never started: its waiting clients get `err`. */
  #failTopic(st: TopicState, err: RpcError): void {
    if (st.active || this.#topics.get(st.topic.key) !== st) return;
    this.#topics.delete(st.topic.key);
    clearTimeout(st.timer);
    for (const w of st.waiters.values()) w.reject(err);
    st.waiters.clear();
    st.subscribers.clear();
    if (st.upstreamId !== null) {
      this.#byUpstreamId.delete(st.upstreamId);
      this.#unsubscribeUpstream(st.upstreamId);
    }
    if (this.#topics.size === 0) this.#linger();
  }

  #unsubscribeUpstream(upstreamId: string): void {
    if (!this.#open) return; // the subscription died with its connection
    this.#counters.upstreamUnsubscribes++;
    this.#request('eth_unsubscribe', [upstreamId]).catch(() => {});
  }

  /** With no topic left the connection is kept a while for the next client, then closed. */
  #linger(): void {
    clearTimeout(this.#lingerTimer);
    this.#lingerTimer = setTimeout(() => {
      const socket = this.#socket;
      if (this.#topics.size > 0 || !socket) return;
      this.#detach();
      if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      else socket.close(1000);
    }, this.#o.lingerMs ?? DEFAULT_LINGER_MS);
    this.#lingerTimer.unref();
  }
}
