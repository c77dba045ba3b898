// One client WebSocket connection: its messages, its subscriptions and its key's rules.
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { Network } from '../../chains/networks.ts';
import type { WsConfig } from '../../config/schema.ts';
import { InternalRpcError, InvalidParamsError, ParseError, RateLimitedError, RpcError, ShuttingDownRpcError, toRpcError } from '../../errors/rpc.ts';
import { admit, Refusal } from '../../keys/admission.ts';
import type { KeyCache, ResolvedKey } from '../../keys/cache.ts';
import type { Notification, Subscriber } from '../../upstreams/ws/subscription-hub.ts';
import { newSubscriptionId, notificationText } from '../../upstreams/ws/subscription-messages.ts';
import { parseTopic } from '../../upstreams/ws/topic.ts';
import type { Upstreams } from '../../upstreams/upstreams.ts';
import { errorText, messageIdText, parseItem, resultText } from '../jsonrpc.ts';
import type { Connection, DispatchAnswer, RpcInput, RpcOutput, SubscriptionDispatcher } from '../message.ts';
import type { RpcPipeline } from '../pipeline.ts';
import type { Cuttable, CutReason, Outbound } from '../../http/outbound.ts';
import type { Tracing } from '../../ops/tracing.ts';
import { STOPPING_RETRY_AFTER_S } from '../../http/drain.ts';
import { type NotificationFrame, SUBSCRIPTION_ID_BYTES } from './frame.ts';

/** The key a connection was opened with: its id and its text as sent. */
export interface SlotKey {
  readonly keyId: string;
  readonly text: string;
}

/** What every connection shares. */
export interface ConnectionContext {
  settings: WsConfig;
  pipeline: RpcPipeline;
  keys: KeyCache;
  upstreams: Upstreams;
  logger: Logger;
  /** A notification's frame, made once for all its clients (frame.ts). */
  frameOf(note: Notification): NotificationFrame;
  /** The connection closed (its subscriptions have left their hubs). */
  closed(conn: WsConnection): void;
  /**
   * C57: true from the start of a stop (the gateway's, for every connection: no field per
   * connection). A message that arrives then is refused; calls already in flight are answered.
   */
  stopping: boolean;
  /** C57: during a stop, the connection's last call in flight was answered and its 1001 sent. */
  drained(conn: WsConnection): void;
  /** C60: the instance's unsent bytes and the write timeout. */
  outbound?: Outbound | undefined;
  /** C58: a span per message; undefined while tracing is off. */
  tracing?: Tracing | undefined;
}

/**
 * One subscription of a client. Per connection and subscription only small objects, no closures:
 * with thousands of connections per instance each costs its bytes many times over (docs/scaling.md).
 */
class ClientSubscription implements Subscriber {
  readonly conn: WsConnection;
  readonly id: string;
  topicKey: string;
  /** False until the client has its subscription id: notifications before that are dropped. */
  armed = false;

  constructor(conn: WsConnection, id: string, topicKey: string) {
    this.conn = conn;
    this.id = id;
    this.topicKey = topicKey;
  }

  deliver(note: Notification): void {
    if (this.armed) this.conn.notify(note, this.id);
  }
}

/** Subscriptions a connection keeps in a list; past this many, in a Map by id (see WsConnection's #subs). */
const FEW_SUBSCRIPTIONS = 8;

/** Characters past which a text is sent as its bytes (see WsConnection.send). */
const LARGE_TEXT = 64 * 1024;

/** The close a stop sends (C57): 1001, going away. */
export const GOING_AWAY = 1001;
export const GOING_AWAY_REASON = 'server shutting down';

/** The process's monotonic clock in whole milliseconds (see WsConnection.lastPongAt). */
export const wholeMs = (): number => Math.floor(performance.now());

/**
 * A client's ws WebSocket, made by the server (its `WebSocket` option), which hands its events
 * straight to its connection: no listener table per client and no map from socket to connection
 * (memory per connection, docs/scaling.md). Listeners added as usual (a stop waiting for `close`)
 * are still called.
 */
export class ClientWebSocket extends WebSocket {
  /** Its connection, from the end of the handshake on. */
  conn: WsConnection | undefined = undefined;

  override emit(event: string | symbol, a?: unknown, b?: unknown): boolean {
    const c = this.conn;
    if (c !== undefined) WsConnection.event(c, event, a, b);
    // ws closes the connection itself on an error (e.g. 1009 for a message over maxPayload); an
    // error nobody else listens for is logged by the connection, not thrown.
    if (event === 'error' && this.listenerCount('error') === 0) return c !== undefined;
    return super.emit(event, a, b);
  }
}

/**
 * One client's WebSocket: it only frames. Every message goes through the same RPC pipeline as an
 * HTTP body (C10: a message counts like a request, a batch item by item, refused whole when it
 * does not fit, C23); this connection is the pipeline's dispatcher for `eth_subscribe` and
 * `eth_unsubscribe`, served from the network's shared subscription hub.
 */
export class WsConnection implements SubscriptionDispatcher, Connection, Cuttable {
  readonly ws: ClientWebSocket;
  readonly network: Network;
  readonly ip: string;
  /** The request id of the upgrade: every log line about the connection and its messages carries it. */
  readonly reqId: string | undefined;
  /** The key as of the last check; `handle` checks it again on every message. */
  key: ResolvedKey;
  /**
   * The key as sent at the upgrade, whose connection slot this connection holds: its id and its
   * text, one object shared by the key's connections that sent the same text (server.ts).
   */
  readonly slotKey: SlotKey;
  /** Largest send queue seen (bytes); tests read it to show memory stays bounded. */
  peakBufferedBytes = 0;
  /**
   * When the last pong came (or the connection opened), in whole milliseconds of the process's
   * monotonic clock (`performance.now()`): a small integer V8 keeps in the field itself, where an
   * epoch time would be a boxed number held per connection (memory per connection, docs/scaling.md;
   * boxed only past 24 days of a process's life).
   */
  lastPongAt = wholeMs();
  closed = false;
  /** The upgrade's Origin and Authorization (or `jwt` query parameter): every message is checked against the key's allowlists and JWT option. */
  readonly #origin: string | undefined;
  readonly #authorization: string | undefined;
  /** C58: the upgrade's traceparent (and tracestate), linked from each message's trace. */
  readonly #traceLink: Readonly<Record<string, string>> | undefined;
  readonly #ctx: ConnectionContext;
  /**
   * The connection's subscriptions: none, the one (most connections have one), a list of a few
   * from the second on, or a Map of them by id past {@link FEW_SUBSCRIPTIONS}. An empty Map costs
   * ~180 bytes, a list of two ~70, held for the connection's life (memory per connection,
   * docs/scaling.md); a list is searched only up to a handful of ids.
   */
  #subs: ClientSubscription | ClientSubscription[] | Map<string, ClientSubscription> | undefined;
  /** Slots taken by subscriptions being made (reserved before any await). */
  #reserved = 0;
  #inFlight = 0;

  /** The connection's TCP socket, which notification frames are written to (ws writes its own frames there too). */
  readonly #socket: Duplex;

  constructor(
    ws: ClientWebSocket,
    socket: Duplex,
    init: { network: Network; slotKey: SlotKey; key: ResolvedKey; ip: string; origin?: string | undefined; authorization?: string | undefined; reqId?: string; traceLink?: Readonly<Record<string, string>> | undefined },
    ctx: ConnectionContext,
  ) {
    this.ws = ws;
    this.#socket = socket;
    this.reqId = init.reqId;
    this.network = init.network;
    this.key = init.key;
    this.slotKey = init.slotKey;
    this.ip = init.ip;
    this.#origin = init.origin;
    this.#authorization = init.authorization;
    this.#traceLink = init.traceLink;
    this.#ctx = ctx;
    ws.conn = this;
  }

  /** An event of the connection's WebSocket (see {@link ClientWebSocket}). */
  static event(c: WsConnection, event: string | symbol, a: unknown, b: unknown): void {
    switch (event) {
      case 'message':
        void c.#onMessage(a as Buffer, b as boolean);
        return;
      case 'pong':
        c.lastPongAt = wholeMs();
        return;
      case 'error':
        c.#ctx.logger.debug({ reqId: c.reqId, network: c.network.slug, keyId: c.key.keyId, error: (a as Error).message }, 'websocket client error');
        return;
      case 'close':
        c.cleanup();
        c.#ctx.closed(c);
    }
  }

  /**
   * Sends one text frame. A client that does not read lets its queue grow; a message that would
   * take it past `ws.maxBufferedBytes` closes the connection instead (C60), so one slow reader
   * never holds more than that (plus one message) of the gateway's memory.
   */
  send(data: string | Buffer): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    // A large text goes out as its bytes: a string waiting in the socket's queue is held twice
    // (the string, and the copy the socket writes from).
    const bytes = typeof data === 'string' && data.length > LARGE_TEXT ? Buffer.from(data) : data;
    const size = typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length;
    if (!this.#room(size)) return;
    this.ws.send(bytes, { binary: false });
    this.#sent();
  }

  /**
   * Sends a subscription's notification: the frame shared by every client of the topic, with this
   * subscription's id spliced in (nothing of it is serialised per client: memory per connection, C60/docs/scaling.md). Written to the
   * socket as ws writes its own frames, whole and in order; the same queue limit as {@link send}.
   */
  notify(note: Notification, subscriptionId: string): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (subscriptionId.length !== SUBSCRIPTION_ID_BYTES) {
      this.send(notificationText(subscriptionId, note.resultText));
      return;
    }
    const frame = this.#ctx.frameOf(note);
    if (!this.#room(frame.length)) return;
    // The shared parts are written together, never copied per client: a client that does not read
    // holds references to them in its queue, not copies.
    const socket = this.#socket;
    socket.cork();
    socket.write(frame.head);
    socket.write(subscriptionId, 'latin1');
    socket.write(frame.tail);
    socket.uncork();
    this.#sent();
  }

  /**
   * C60: whether a message of `size` bytes may be queued. One that would take a queue already
   * holding bytes past `ws.maxBufferedBytes` is not: the client is closed with 1013 (try again
   * later), its subscriptions released at once. The close frame waits behind what is queued; a
   * client that reads none of it is cut by the write timeout.
   */
  #room(size: number): boolean {
    const queued = this.ws.bufferedAmount;
    if (queued > 0 && queued + size > this.#ctx.settings.maxBufferedBytes) {
      this.#ctx.logger.warn({ reqId: this.reqId, network: this.network.slug, keyId: this.key.keyId, queuedBytes: queued }, 'websocket client does not read; closed (1013)');
      this.cleanup();
      this.ws.close(1013, 'client does not read its messages');
      return false;
    }
    this.#ctx.outbound?.makeRoom(size, this.#socket);
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** After a message: the queue's peak, and a queue left behind is watched (C60: the write timeout). */
  #sent(): void {
    const queued = this.ws.bufferedAmount;
    if (queued > this.peakBufferedBytes) this.peakBufferedBytes = queued;
    if (queued > 0) this.#ctx.outbound?.wrote(this.#socket, this);
  }

  /** C60: cut by the write timeout or the instance's cap on unsent bytes; subscriptions released. */
  cut(why: CutReason): void {
    this.#ctx.logger.warn({ reqId: this.reqId, network: this.network.slug, keyId: this.key.keyId, reason: why }, 'websocket client does not read; disconnected');
    this.cleanup();
    this.ws.terminate();
  }

  /** Pings, or drops a client that answered no ping for `ws.idleTimeoutMs`; `now` as {@link wholeMs} reads it. */
  heartbeat(now: number): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (now - this.lastPongAt > this.#ctx.settings.idleTimeoutMs) {
      this.#ctx.logger.info({ reqId: this.reqId, network: this.network.slug, keyId: this.key.keyId }, 'websocket client answered no ping; disconnected');
      this.ws.terminate();
      return;
    }
    this.ws.ping();
  }

  /**
   * Checks the key again (after a key change, and periodically for expiry) through the same
   * admission step as the upgrade and every message: a key no longer usable here (or allowlists
   * that now refuse this connection, or a JWT that expired) is told why, as an answer to a message
   * would be, and the connection closes with 1008, so its subscriptions stop too (C20).
   */
  async recheckKey(): Promise<void> {
    if (this.closed) return;
    let admitted = admit(this.#ctx.keys, this.slotKey.text, this.network.slug, { origin: this.#origin, ip: this.ip, authorization: this.#authorization });
    if (admitted instanceof Promise) admitted = await admitted;
    if (this.closed) return;
    if (admitted instanceof Refusal) {
      this.send(errorText('null', admitted.error));
      this.ws.close(1008, admitted.error.message.slice(0, 120));
      return;
    }
    this.key = admitted;
  }

  /** The connection closed: its subscriptions leave their hubs. */
  cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    this.#leaveHubs();
  }

  /** The subscriptions leave their hubs: no notification reaches this connection any more. */
  #leaveHubs(): void {
    const subs = this.#subs;
    if (subs === undefined) return;
    this.#subs = undefined;
    const hub = this.#ctx.upstreams.hub(this.network.slug);
    if (subs instanceof ClientSubscription) hub.unsubscribe(subs.topicKey, subs);
    else for (const s of subs.values()) hub.unsubscribe(s.topicKey, s);
  }

  /**
   * C57: the gateway is stopping ({@link ConnectionContext.stopping} is already true). The
   * subscriptions leave their hubs (no more notifications); a connection with no call in flight
   * gets its 1001 now, one with calls in flight once they are answered (see `#onMessage`).
   * @returns whether the connection is done (its 1001 sent, or it was closing already).
   */
  stop(): boolean {
    this.#leaveHubs();
    if (this.#inFlight > 0 && this.ws.readyState === WebSocket.OPEN) return false;
    this.ws.close(GOING_AWAY, GOING_AWAY_REASON);
    return true;
  }

  /** C57: the message's answer counts unless a stop left this WebSocket unable to carry it (message.ts `Connection`). */
  answerable(): boolean {
    return !this.#ctx.stopping || this.ws.readyState === WebSocket.OPEN;
  }

  async #onMessage(data: Buffer, isBinary: boolean): Promise<void> {
    // C57: a message that arrives during a stop is turned away before anything else runs (nothing
    // metered or counted), as a new HTTP request on an open connection is.
    if (this.#ctx.stopping) {
      if (this.ws.readyState === WebSocket.OPEN) this.send(errorText(isBinary ? 'null' : messageId(data), new ShuttingDownRpcError(STOPPING_RETRY_AFTER_S)));
      return;
    }
    // Messages are handled concurrently, like HTTP requests; past maxInFlight the socket is not
    // read until some finish, so a flood of messages cannot pile up in memory.
    if (++this.#inFlight >= this.#ctx.settings.maxInFlight) this.ws.pause();
    try {
      const answer = await this.#answer(data, isBinary);
      if (answer.text !== null) this.send(answer.text);
      answer.after?.();
    } catch (err) {
      this.#ctx.logger.error({ err, reqId: this.reqId, network: this.network.slug }, 'websocket message failed');
      this.send(errorText('null', new InternalRpcError('Internal error')));
    } finally {
      if (--this.#inFlight < this.#ctx.settings.maxInFlight && this.ws.isPaused) this.ws.resume();
      // C57: during a stop, the last call in flight is answered: the 1001 follows its answer.
      if (this.#inFlight === 0 && this.#ctx.stopping) {
        this.ws.close(GOING_AWAY, GOING_AWAY_REASON);
        this.#ctx.drained(this);
      }
    }
  }

  async #answer(data: Buffer, isBinary: boolean): Promise<{ text: string | Buffer | null; after?: () => void }> {
    if (isBinary) return { text: errorText('null', new ParseError('Parse error: send JSON-RPC as text frames, not binary')) };
    const input = { network: this.network, apiKey: this.slotKey.text, body: data, ip: this.ip, origin: this.#origin, authorization: this.#authorization, requestId: this.reqId, subscriptions: this, connection: this, arrivedAt: performance.now() };
    const tracing = this.#ctx.tracing;
    const out = await (tracing ? this.#traced(tracing, input) : this.#ctx.pipeline.handle(input));
    if (out.key) this.key = out.key;
    // The node's bytes as they came (no string made of a large answer).
    const text = out.body;
    if (!out.keyRefused) return out.after ? { text, after: out.after } : { text };
    // The key stopped being usable here (revoked, expired, deleted, network withdrawn): it is
    // told why, then the connection ends, since everything on it depends on that key.
    return { text, after: () => this.ws.close(1008, 'API key no longer valid for this connection') };
  }

  /**
   * C58: a message as its own trace (a connection lives too long to be one), linked to the
   * traceparent its upgrade carried; a traceparent inside a message is not looked for.
   */
  async #traced(tracing: Tracing, input: RpcInput): Promise<RpcOutput> {
    const attributes = { 'rpc.system': 'jsonrpc', 'junction.transport': 'websocket', 'junction.request_id': this.reqId ?? '', 'junction.network': this.network.slug };
    const span = tracing.request('websocket message', undefined, attributes, input.arrivedAt, this.#traceLink);
    try {
      return await tracing.within(span, () => this.#ctx.pipeline.handle(input));
    } finally {
      span.end();
    }
  }

  reserve(key: ResolvedKey): RpcError | null {
    const max = this.#ctx.settings.plans[key.tier].subscriptionsPerConnection;
    if (max !== null && this.#subscriptions() + this.#reserved >= max) {
      return new RateLimitedError(`Subscription limit exceeded: at most ${max} per connection`, { details: { limit: 'subscriptions', max } });
    }
    this.#reserved++;
    return null;
  }

  release(): void {
    if (this.#reserved > 0) this.#reserved--;
  }

  unsubscribe(params: unknown): boolean | RpcError {
    if (!Array.isArray(params) || params.length !== 1 || typeof params[0] !== 'string') {
      return new InvalidParamsError('Invalid params: eth_unsubscribe takes [subscriptionId]');
    }
    const sub = this.#take(params[0]);
    if (!sub) return false;
    this.#ctx.upstreams.hub(this.network.slug).unsubscribe(sub.topicKey, sub);
    return true;
  }

  #subscriptions(): number {
    const subs = this.#subs;
    return subs === undefined ? 0 : subs instanceof ClientSubscription ? 1 : Array.isArray(subs) ? subs.length : subs.size;
  }

  #keep(sub: ClientSubscription): void {
    const subs = this.#subs;
    if (subs === undefined) this.#subs = sub;
    else if (subs instanceof ClientSubscription) this.#subs = [subs, sub];
    else if (!Array.isArray(subs)) subs.set(sub.id, sub);
    else if (subs.length < FEW_SUBSCRIPTIONS) subs.push(sub);
    else this.#subs = new Map([...subs, sub].map((s) => [s.id, s]));
  }

  /** The subscription `id`, no longer kept; undefined when the connection has none of that id. */
  #take(id: string): ClientSubscription | undefined {
    const subs = this.#subs;
    if (subs === undefined) return undefined;
    if (subs instanceof ClientSubscription) {
      if (subs.id !== id) return undefined;
      this.#subs = undefined;
      return subs;
    }
    if (!Array.isArray(subs)) {
      const sub = subs.get(id);
      subs.delete(id);
      return sub;
    }
    const at = subs.findIndex((s) => s.id === id);
    if (at === -1) return undefined;
    const [sub] = subs.splice(at, 1);
    if (subs.length === 0) this.#subs = undefined;
    return sub;
  }

  async subscribe(params: unknown, id: string): Promise<DispatchAnswer> {
    const refuse = (err: RpcError): DispatchAnswer => ({ text: errorText(id, err) });
    const topic = parseTopic(params);
    if (topic instanceof RpcError) {
      this.release();
      return refuse(topic);
    }
    const subscriptionId = newSubscriptionId();
    const sub = new ClientSubscription(this, subscriptionId, topic.key);
    const hub = this.#ctx.upstreams.hub(this.network.slug);
    try {
      sub.topicKey = await hub.subscribe(topic, sub);
    } catch (err) {
      return refuse(toRpcError(err));
    } finally {
      this.release();
    }
    if (this.closed) {
      hub.unsubscribe(topic.key, sub);
      return { text: null };
    }
    // C57: a subscription that was in flight when a stop began is answered, but delivers nothing:
    // the connection's 1001 follows.
    if (this.#ctx.stopping) {
      hub.unsubscribe(topic.key, sub);
      return { text: resultText(id, subscriptionId) };
    }
    this.#keep(sub);
    return {
      text: resultText(id, subscriptionId),
      after: () => {
        sub.armed = true;
      },
    };
  }
}

/**
 * The id to answer a refusal of a whole message under, as the pipeline answers one (C23, jsonrpc.ts `messageIdText`): a single
 * call's id as written, `null` for a batch or for text that is not a call (read only during a stop).
 */
function messageId(data: Buffer): string {
  const text = data.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return 'null';
  }
  return messageIdText(Array.isArray(parsed) ? undefined : parseItem(parsed, text), text);
}
