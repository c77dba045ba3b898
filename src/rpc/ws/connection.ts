import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { Network } from '../../chains/registry.ts';
import type { Config } from '../../config/schema.ts';
import { InternalRpcError, InvalidParamsError, NetworkNotAllowedError, ParseError, RateLimitedError, RpcError } from '../../errors/rpc.ts';
import type { KeyCache, ResolvedKey } from '../../keys/cache.ts';
import type { Meter } from '../../metering/meter.ts';
import type { ComputeUnits } from '../../metering/weights.ts';
import type { UsageSink } from '../../usage/sink.ts';
import { errorText, parseItem, resultText } from '../jsonrpc.ts';
import { arrayElements, idText } from '../lossless.ts';
import { type RpcProxy, UNPARSABLE } from '../pipeline.ts';
import type { Subscriber } from '../../upstreams/hub.ts';
import type { SubscriptionHubs } from '../../upstreams/hubs.ts';
import { newSubscriptionId, notificationText } from '../../upstreams/messages.ts';
import { parseTopic } from '../../upstreams/topics.ts';

/** What every connection shares. */
export interface ConnectionContext {
  config: Config;
  proxy: RpcProxy;
  keys: KeyCache;
  meter: Meter;
  usage: UsageSink | undefined;
  cu: ComputeUnits;
  hubs: SubscriptionHubs;
  logger: Logger;
}

/** An answer to send, and what to do once it is sent (a new subscription starts delivering). */
interface Answer {
  text: string | Buffer | null;
  after?: () => void;
}

interface ClientSubscription extends Subscriber {
  topicKey: string;
  /** False until the client has its subscription id: notifications before that are dropped. */
  armed: boolean;
}

const SUBSCRIPTION_METHODS = new Set(['eth_subscribe', 'eth_unsubscribe']);

function isSubscriptionCall(x: unknown): x is { method: string; params?: unknown } {
  return typeof x === 'object' && x !== null && !Array.isArray(x) && SUBSCRIPTION_METHODS.has((x as { method?: unknown }).method as string);
}

/**
 * One client's WebSocket: every message is a JSON-RPC call or batch handled by the same
 * RpcProxy as HTTP (policy, metering, errors), except `eth_subscribe` / `eth_unsubscribe`,
 * which are served here from the network's shared subscription hub.
 */
export class WsConnection {
  readonly ws: WebSocket;
  readonly network: Network;
  readonly ip: string;
  /** The key as of the last check; `handle` checks it again on every message. */
  key: ResolvedKey;
  /** Largest send queue seen (bytes); tests read it to show memory stays bounded. */
  peakBufferedBytes = 0;
  lastPongAt = Date.now();
  closed = false;
  readonly #apiKey: string;
  readonly #ctx: ConnectionContext;
  readonly #subs = new Map<string, ClientSubscription>();
  #subscribing = 0;
  #inFlight = 0;

  constructor(ws: WebSocket, init: { network: Network; apiKey: string; key: ResolvedKey; ip: string }, ctx: ConnectionContext) {
    this.ws = ws;
    this.network = init.network;
    this.#apiKey = init.apiKey;
    this.key = init.key;
    this.ip = init.ip;
    this.#ctx = ctx;
    ws.on('message', (data: Buffer, isBinary: boolean) => void this.#onMessage(data, isBinary));
    ws.on('pong', () => {
      this.lastPongAt = Date.now();
    });
    ws.on('error', (err) => {
      // ws closes the connection itself (e.g. 1009 for a message over maxPayload).
      ctx.logger.debug({ network: this.network.slug, keyId: this.key.keyId, error: err.message }, 'websocket client error');
    });
  }

  /**
   * Sends one text frame. A client that does not read lets its queue grow; past
   * `ws.maxBufferedBytes` it is cut off, so one slow reader never holds more than that (plus one
   * message) of the gateway's memory.
   */
  send(data: string | Buffer): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(data, { binary: false });
    const queued = this.ws.bufferedAmount;
    if (queued > this.peakBufferedBytes) this.peakBufferedBytes = queued;
    if (queued > this.#ctx.config.ws.maxBufferedBytes) {
      this.#ctx.logger.warn({ network: this.network.slug, keyId: this.key.keyId, queuedBytes: queued }, 'websocket client does not read; disconnected');
      this.ws.terminate();
    }
  }

  /** Pings, or drops a client that answered no ping for `ws.idleTimeoutMs`. */
  heartbeat(now: number): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (now - this.lastPongAt > this.#ctx.config.ws.idleTimeoutMs) {
      this.#ctx.logger.info({ network: this.network.slug, keyId: this.key.keyId }, 'websocket client answered no ping; disconnected');
      this.ws.terminate();
      return;
    }
    this.ws.ping();
  }

  /**
   * Checks the key again (after a key change, and periodically for expiry): a key that is no
   * longer usable here closes the connection with 1008, so its subscriptions stop too (C20).
   */
  async recheckKey(): Promise<void> {
    if (this.closed) return;
    const auth = await this.#ctx.keys.authenticate(this.#apiKey);
    if (this.closed) return;
    if (auth instanceof RpcError) {
      this.ws.close(1008, auth.message);
      return;
    }
    if (!auth.networks.has(this.network.slug)) {
      this.ws.close(1008, `API key not authorized for network ${this.network.slug}`);
      return;
    }
    this.key = auth;
  }

  /** The connection closed: its subscriptions leave their hubs. */
  cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    const hub = this.#ctx.hubs.get(this.network);
    for (const s of this.#subs.values()) hub.unsubscribe(s.topicKey, s);
    this.#subs.clear();
  }

  async #onMessage(data: Buffer, isBinary: boolean): Promise<void> {
    // Messages are handled concurrently, like HTTP requests; past maxInFlight the socket is not
    // read until some finish, so a flood of messages cannot pile up in memory.
    if (++this.#inFlight >= this.#ctx.config.ws.maxInFlight) this.ws.pause();
    try {
      const answer = await this.#answer(data, isBinary);
      if (answer.text !== null) this.send(answer.text);
      answer.after?.();
    } catch (err) {
      this.#ctx.logger.error({ err, network: this.network.slug }, 'websocket message failed');
      this.send(errorText('null', new InternalRpcError('Internal error')));
    } finally {
      if (--this.#inFlight < this.#ctx.config.ws.maxInFlight && this.ws.isPaused) this.ws.resume();
    }
  }

  async #answer(data: Buffer, isBinary: boolean): Promise<Answer> {
    if (isBinary) return { text: errorText('null', new ParseError('Parse error: send JSON-RPC as text frames, not binary')) };
    const text = data.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = UNPARSABLE;
    }
    if (isSubscriptionCall(parsed)) return this.#subscriptionCall(parsed, text);
    if (Array.isArray(parsed) && parsed.length <= this.#ctx.config.rpc.maxBatchSize && parsed.some(isSubscriptionCall)) {
      return this.#mixedBatch(parsed, text);
    }
    // Everything else is exactly an HTTP request (C10: a message counts like one).
    const reply = await this.#handle(parsed, data);
    if (reply.status !== 401 && reply.status !== 403) return { text: reply.body };
    // The key stopped being usable here (revoked, expired, deleted, network withdrawn): it is
    // told why, then the connection ends, since everything on it depends on that key.
    return { text: reply.body, after: () => this.ws.close(1008, 'API key no longer valid for this connection') };
  }

  #handle(parsed: unknown, raw: Buffer) {
    return this.#ctx.proxy.handle({ network: this.network, apiKey: this.#apiKey, parsed, raw, ip: this.ip });
  }

  /**
   * A batch holding eth_subscribe or eth_unsubscribe: each item is answered on its own (the
   * others still through the proxy, each metered as one request), in request order.
   */
  async #mixedBatch(items: unknown[], text: string): Promise<Answer> {
    const elements = arrayElements(text);
    const answers = await Promise.all(
      items.map(async (item, i): Promise<Answer> => {
        const itemText = elements[i] ?? 'null';
        if (isSubscriptionCall(item)) return this.#subscriptionCall(item, itemText);
        return { text: (await this.#handle(item, Buffer.from(itemText))).body };
      }),
    );
    const out = answers.flatMap((a) => (a.text === null ? [] : [a.text.toString()]));
    return {
      text: out.length > 0 ? `[${out.join(',')}]` : null,
      after: () => {
        for (const a of answers) a.after?.();
      },
    };
  }

  async #subscriptionCall(x: { method: string; params?: unknown }, text: string): Promise<Answer> {
    const item = parseItem(x);
    // The id exactly as written (C23); one of the wrong type is answered as null, as by the proxy.
    if (item.error) return { text: errorText(item.id !== null ? idText(text) : 'null', item.error) };
    const call = item.call;
    const id = call.id === undefined ? null : idText(text);
    if (call.method === 'eth_unsubscribe') {
      const outcome = this.#unsubscribe(call.params);
      return { text: id === null ? null : outcome instanceof RpcError ? errorText(id, outcome) : resultText(id, outcome) };
    }
    // A subscription without an id could never be told its subscription id: nothing to do.
    if (id === null) return { text: null };
    return this.#subscribe(call.params, id);
  }

  #unsubscribe(params: unknown): boolean | RpcError {
    if (!Array.isArray(params) || params.length !== 1 || typeof params[0] !== 'string') {
      return new InvalidParamsError('Invalid params: eth_unsubscribe takes [subscriptionId]');
    }
    const sub = this.#subs.get(params[0]);
    if (!sub) return false;
    this.#subs.delete(params[0]);
    this.#ctx.hubs.get(this.network).unsubscribe(sub.topicKey, sub);
    return true;
  }

  async #subscribe(params: unknown, id: string): Promise<Answer> {
    const refuse = (err: RpcError): Answer => ({ text: errorText(id, err) });
    // The key is checked again, as `handle` does for every other message.
    const key = await this.#ctx.keys.authenticate(this.#apiKey);
    if (key instanceof RpcError) return refuse(key);
    this.key = key;
    if (!key.networks.has(this.network.slug)) {
      return refuse(new NetworkNotAllowedError(`API key not authorized for network ${this.network.slug}`, { data: { network: this.network.slug } }));
    }
    const topic = parseTopic(params);
    if (topic instanceof RpcError) return refuse(topic);
    const max = this.#ctx.config.ws.plans[key.tier].subscriptionsPerConnection;
    if (max !== null && this.#subs.size + this.#subscribing >= max) {
      return refuse(new RateLimitedError(`Subscription limit exceeded: at most ${max} per connection`, { data: { limit: 'subscriptions', max } }));
    }
    // Subscribing counts as one request (C10); notifications are not metered.
    const cu = this.#ctx.cu.of('eth_subscribe');
    const metered = await this.#ctx.meter.rpc({ key }, 1, cu);
    if (metered.error) return refuse(metered.error);
    this.#ctx.usage?.record({ userId: key.userId, keyId: key.keyId, network: this.network.slug, method: 'eth_subscribe', computeUnits: cu });

    const subscriptionId = newSubscriptionId();
    const sub: ClientSubscription = {
      topicKey: topic.key,
      armed: false,
      deliver: (resultText) => {
        if (sub.armed) this.send(notificationText(subscriptionId, resultText));
      },
    };
    const hub = this.#ctx.hubs.get(this.network);
    this.#subscribing++;
    try {
      await hub.subscribe(topic, sub);
    } catch (err) {
      return refuse(err instanceof RpcError ? err : new InternalRpcError('Internal error'));
    } finally {
      this.#subscribing--;
    }
    if (this.closed) {
      hub.unsubscribe(topic.key, sub);
      return { text: null };
    }
    this.#subs.set(subscriptionId, sub);
    return {
      text: resultText(id, subscriptionId),
      after: () => {
        sub.armed = true;
      },
    };
  }
}
