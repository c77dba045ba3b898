import type { Logger } from 'pino';
import WebSocket from 'ws';
import { NodeAnsweredError, type RpcError, UpstreamError } from '../errors/rpc.ts';
import { readNotification } from './messages.ts';
import type { Topic } from './topics.ts';

/** One client subscription as the hub sees it: where the node's notifications go. */
export interface Subscriber {
  /** Called with the node's `result` text of each notification; must not throw. */
  deliver(resultText: string): void;
}

export interface HubOptions {
  network: string;
  /** The network's upstream WebSocket addresses in config order (may hold credentials: never logged). */
  urls: readonly string[];
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
}

interface TopicState {
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
}

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

const DEFAULT_LINGER_MS = 30_000;
// Blocks with full transactions can be large; this bounds one message from a node.
const UPSTREAM_MAX_PAYLOAD = 64 * 1024 * 1024;

/** A node answered a JSON-RPC error to one of the hub's requests. */
class NodeError extends Error {
  constructor(readonly error: { code?: unknown; message?: unknown; data?: unknown }) {
    super(typeof error.message === 'string' ? error.message : 'upstream error');
  }
}

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
  readonly #counters = { upstreamSubscribes: 0, upstreamUnsubscribes: 0, reconnects: 0, notifications: 0 };

  constructor(opts: HubOptions) {
    this.network = opts.network;
    this.#o = opts;
    this.#log = opts.logger;
  }

  /**
   * Adds a subscriber to a topic; resolves once the node confirmed the topic's upstream
   * subscription (at once when it already runs).
   *
   * @throws RpcError: -32000 when no node could take the subscription in time, or the node's
   *   own error when it refused it.
   */
  async subscribe(topic: Topic, subscriber: Subscriber): Promise<void> {
    if (this.#closed) throw new UpstreamError('Upstream RPC error: the gateway is shutting down');
    if (this.#o.urls.length === 0) {
      throw new UpstreamError(`Upstream RPC error: network ${this.network} has no WebSocket upstream for subscriptions`, {
        details: { network: this.network },
      });
    }
    let st = this.#topics.get(topic.key);
    if (!st) {
      st = { topic, subscribers: new Set(), waiters: new Map(), upstreamId: null, subscribing: false, active: false, timer: undefined };
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
    if (st.active) return;
    const waiting = st;
    await new Promise<void>((resolve, reject) => waiting.waiters.set(subscriber, { resolve, reject }));
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
      this.#log.info({ network: this.network, upstream: index }, 'upstream WebSocket connected');
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
      this.#log.debug({ network: this.network, upstream: index, error: (err as NodeJS.ErrnoException).code ?? err.name }, 'upstream WebSocket error');
    });
    socket.on('close', () => this.#onClose(socket, index));
  }

  #ping(socket: WebSocket): void {
    if (socket !== this.#socket || socket.readyState !== WebSocket.OPEN) return;
    if (Date.now() - this.#lastPongAt > this.#o.idleTimeoutMs) {
      this.#log.warn({ network: this.network, upstream: this.#connectedIndex }, 'upstream WebSocket stopped answering pings; reconnecting');
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
    const lost = new Error('upstream connection lost');
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
    this.#log.warn({ network: this.network, upstream: index, topics: this.#topics.size, retryInMs: delay }, wasOpen ? 'upstream WebSocket lost; reconnecting' : 'upstream WebSocket could not connect; retrying');
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
      if (msg.error !== undefined) p.reject(new NodeError((msg.error ?? {})));
      else p.resolve(msg.result);
      return;
    }
    const note = readNotification(text, msg);
    if (!note) return;
    const st = this.#byUpstreamId.get(note.upstreamId);
    if (!st) return;
    this.#counters.notifications++;
    for (const s of st.subscribers) s.deliver(note.resultText);
  }

  #request(method: string, params: readonly unknown[]): Promise<unknown> {
    const socket = this.#socket;
    if (!socket || !this.#open) return Promise.reject(new Error('upstream not connected'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error('upstream did not answer in time'));
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
          this.#subscribeFailed(st, new NodeError({ message: 'the node answered eth_subscribe without a subscription id' }));
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
        if (st.active) return;
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
    if (!st.active && err instanceof NodeError) {
      // The node refused this filter: its clients get the node's own error (C22).
      const e = err.error;
      this.#failTopic(st, new NodeAnsweredError(typeof e.code === 'number' ? e.code : -32603, err.message, { details: e.data }));
      return;
    }
    if (this.#topics.get(st.topic.key) !== st) return;
    // A node that cannot re-take a running subscription is in trouble: move to the next one.
    this.#log.warn({ network: this.network, upstream: this.#connectedIndex, error: err.message }, 'upstream eth_subscribe failed; reconnecting');
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
