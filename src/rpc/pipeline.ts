import type { Logger } from 'pino';
import type { Network } from '../chains/registry.ts';
import type { Config } from '../config/schema.ts';
import { InvalidApiKeyError, InvalidRequestError, NetworkNotAllowedError, ParseError, RpcError, toRpcError, UpstreamError } from '../errors/rpc.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import type { KeyCache, ResolvedKey } from '../keys/cache.ts';
import type { Meter } from '../metering/meter.ts';
import { ComputeUnits } from '../metering/weights.ts';
import type { UsageSink } from '../usage/sink.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { callNativeMethod, nodeCallFromPool } from './dispatch/native.ts';
import { errorText, parseItem, type RpcCall, resultText } from './jsonrpc.ts';
import { arrayElements, idSpan, idText, withId } from './lossless.ts';
import { answerText, type CachePlan, type ResponseCache } from './dispatch/cache.ts';
import type { MethodPolicy } from './policy.ts';

/**
 * What a transport hands the pipeline: the bytes of one HTTP body or one WebSocket message, and
 * who sent them. Transports only frame; everything JSON-RPC happens here (docs/decisions.md C22-C24).
 */
export interface RpcInput {
  /** The network of the address, or the error for an unknown one (-32004). */
  network: Network | RpcError;
  /** The API key as sent; `null` on the public endpoint (no key, per-IP limit, C18). */
  apiKey: string | undefined | null;
  body: Buffer;
  /** The client's address (trusted proxies honoured). */
  ip: string;
  /** For log lines that belong to this request. */
  requestId?: string;
  /** WebSocket only: serves eth_subscribe / eth_unsubscribe. Absent on HTTP, where they are -32601. */
  subscriptions?: SubscriptionDispatcher;
}

export interface RpcOutput {
  /** The HTTP status of C22 (the HTTP transport sends it; a WebSocket ignores it). */
  status: number;
  /** null: nothing to answer (notifications only). Node bytes go through untouched. */
  body: Buffer | string | null;
  /** The C13 rate-limit headers, once the caller is known. */
  headers: Record<string, string> | undefined;
  /** The key cannot be used here (unknown, inactive, revoked, expired, network withdrawn): a WebSocket closes. */
  keyRefused: boolean;
  /** The key as checked for this request (a WebSocket keeps the latest). */
  key: ResolvedKey | null;
  /** C44: a single call answered from the response cache ('HIT') or not ('MISS'); absent when not cacheable. */
  cache?: 'HIT' | 'MISS';
  /** Runs once the answer is on its way (a new subscription starts delivering after its id was sent). */
  after?: () => void;
}

/** What a subscription dispatcher answers for one call. */
export interface DispatchAnswer {
  text: string | null;
  after?: () => void;
}

/** The WebSocket's `eth_subscribe` / `eth_unsubscribe` dispatcher. */
export interface SubscriptionDispatcher {
  /** Takes a subscription slot now, before any await, or answers why not (limit per connection). */
  reserve(key: ResolvedKey): RpcError | null;
  /** Gives back a reserved slot that will not be used. */
  release(): void;
  /** Subscribes on a reserved slot (the slot is released if it fails). */
  subscribe(params: unknown, idText: string, key: ResolvedKey): Promise<DispatchAnswer>;
  unsubscribe(params: unknown): boolean | RpcError;
}

const SUBSCRIBE = 'eth_subscribe';
const UNSUBSCRIBE = 'eth_unsubscribe';

/** One call of a message, once parsed. */
interface Item {
  index: number;
  /** The item's JSON text (the whole body for a single call). */
  text: string;
  call: RpcCall;
  /** Answer text, once known. */
  answer?: string | null;
}

/**
 * The JSON-RPC pipeline, one for every transport: parse -> authenticate -> authorise the network
 * -> method policy -> meter the whole call or batch -> dispatch each call (cache, forward,
 * `nat_*` translation, subscriptions). A single call is forwarded as the client's own bytes and
 * the node's answer goes back as its bytes (C22).
 */
export class RpcPipeline {
  readonly #config: Config;
  readonly #keys: KeyCache;
  readonly #policy: MethodPolicy;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #meter: Meter;
  readonly #cu: ComputeUnits;
  readonly #usage: UsageSink;
  readonly #cache: ResponseCache | undefined;

  constructor(deps: {
    config: Config;
    keys: KeyCache;
    policy: MethodPolicy;
    upstreams: Upstreams;
    logger: Logger;
    meter: Meter;
    usage: UsageSink;
    /** C44: answers that cannot change, and identical concurrent reads. */
    cache?: ResponseCache;
  }) {
    this.#config = deps.config;
    this.#keys = deps.keys;
    this.#policy = deps.policy;
    this.#upstreams = deps.upstreams;
    this.#log = deps.logger;
    this.#meter = deps.meter;
    this.#cu = new ComputeUnits(deps.config);
    this.#usage = deps.usage;
    this.#cache = deps.cache;
  }

  async handle(input: RpcInput): Promise<RpcOutput> {
    const text = input.body.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return plain(new ParseError('Parse error: the body is not valid JSON'), 'null');
    }
    const isBatch = Array.isArray(parsed);
    const single = isBatch ? undefined : parseItem(parsed, text);
    // The id as the client wrote it (an id of the wrong type is answered as null); read from the
    // text only when the gateway writes the answer itself: a forwarded call needs none of it.
    let idCache: string | undefined;
    const singleId = () => (idCache ??= single && (single.call || single.id !== null) ? idText(text) : 'null');

    if (input.network instanceof RpcError) return plain(input.network, singleId());
    const network = input.network;
    let key: ResolvedKey | null = null;
    if (input.apiKey !== null) {
      // A key in memory costs nothing more; one only storage can tell about takes a place in the
      // client's failed-lookup allowance first (given back when the key exists).
      let auth = this.#keys.peek(input.apiKey);
      if (auth === undefined) {
        const guard = await this.#meter.reserveKeyLookup(input.ip);
        if (guard.error) return { ...plain(guard.error, singleId()), headers: guard.headers };
        auth = await this.#keys.authenticate(input.apiKey);
        if (!(auth instanceof InvalidApiKeyError)) await guard.release();
      }
      if (auth instanceof RpcError) return { ...plain(auth, singleId()), keyRefused: true };
      key = auth;
    }
    const caller: Caller = { key, network, ip: input.ip, requestId: input.requestId };
    if (key && !key.networks.has(network.slug)) {
      const err = new NetworkNotAllowedError(`API key not authorized for network ${network.slug}`, {
        details: { network: network.slug, allowed: [...key.networks] },
      });
      return { ...(await this.#refusal(caller, singleId(), err)), keyRefused: true };
    }

    // Each call of the message, with its text; refusals answered at once.
    let items: Item[];
    let count = 1;
    const refused: Refused[] = [];
    if (single) {
      if (single.error) return this.#refusal(caller, singleId(), single.error);
      items = [{ index: 0, text, call: single.call }];
    } else {
      const list = parsed as unknown[];
      if (list.length === 0) return this.#refusal(caller, 'null', new InvalidRequestError('Invalid request: empty batch'));
      const max = this.#config.rpc.maxBatchSize;
      if (list.length > max) {
        const err = new InvalidRequestError(`Invalid request: a batch holds at most ${max} calls`, { details: { maxBatchSize: max } });
        return this.#refusal(caller, 'null', err);
      }
      const elements = arrayElements(text);
      count = list.length;
      items = [];
      list.forEach((raw, index) => {
        const itemText = elements[index] ?? 'null';
        const item = parseItem(raw, itemText);
        if (item.error) refused.push({ index, id: item.id !== null ? idText(itemText) : 'null', err: item.error });
        else items.push({ index, text: itemText, call: item.call });
      });
    }

    // Method policy, and subscription slots taken before the first await (a batch of 60
    // eth_subscribe cannot pass a limit of 50).
    const tier = key?.tier ?? null;
    const subs = input.subscriptions;
    let reserved = 0;
    const admitted: Item[] = [];
    for (const item of items) {
      const { call } = item;
      const notification = call.id === undefined;
      let err: RpcError | null;
      if (subs && (call.method === SUBSCRIBE || call.method === UNSUBSCRIBE) && key) {
        // A subscription without an id could never be told its id: nothing to do.
        if (call.method === SUBSCRIBE && notification) continue;
        err = call.method === SUBSCRIBE ? subs.reserve(key) : null;
        if (!err && call.method === SUBSCRIBE) reserved++;
      } else {
        err = this.#policy.check(call.method, network.native, tier);
      }
      if (err) {
        if (single) return notification ? nothing(undefined, key) : this.#refusal(caller, singleId(), err);
        if (!notification) refused.push({ index: item.index, id: idText(item.text), err });
        continue;
      }
      admitted.push(item);
    }
    const releaseAll = () => {
      for (; reserved > 0; reserved--) subs?.release();
    };

    // C10, C23: the whole message is metered at once; one that does not fit is refused whole.
    let cu = 0;
    for (const item of admitted) cu += this.#cu.of(item.call.method);
    const who = key ? { key } : { ip: input.ip };
    // In process the limits answer at once; only a shared store (Redis) is awaited.
    const metered = this.#meter.rpcNow(who, admitted.length, cu) ?? (await this.#meter.rpc(who, admitted.length, cu));
    const headers = metered.headers;
    if (metered.error) {
      releaseAll();
      return { status: metered.error.httpStatus, body: errorText(single ? singleId() : 'null', metered.error), headers, keyRefused: false, key };
    }
    if (key) {
      for (const item of admitted) {
        const m = item.call.method;
        this.#usage.record({ userId: key.userId, keyId: key.keyId, network: network.slug, method: m, computeUnits: this.#cu.of(m) });
      }
    }

    if (single) {
      const item = admitted[0];
      return item ? this.#single(caller, item, headers, subs) : nothing(headers, key);
    }
    return this.#batch(caller, count, admitted, refused, headers, subs);
  }

  /** An answer that sends nothing upstream: it consumes nothing but still reports the limits (C13). */
  async #refusal(caller: Caller, id: string, err: RpcError): Promise<RpcOutput> {
    const who = caller.key ? { key: caller.key } : { ip: caller.ip };
    const { headers } = this.#meter.rpcNow(who, 0, 0) ?? (await this.#meter.rpc(who, 0, 0));
    return { status: err.httpStatus, body: errorText(id, err), headers, keyRefused: false, key: caller.key };
  }

  async #single(caller: Caller, item: Item, headers: Record<string, string>, subs: SubscriptionDispatcher | undefined): Promise<RpcOutput> {
    const { call } = item;
    const notification = call.id === undefined;
    const out = (status: number, body: Buffer | string | null, extra: Partial<RpcOutput> = {}): RpcOutput => ({
      status: notification ? 204 : status,
      body: notification ? null : body,
      headers,
      keyRefused: false,
      key: caller.key,
      ...extra,
    });
    if (subs && caller.key && (call.method === SUBSCRIBE || call.method === UNSUBSCRIBE)) {
      const a = await this.#subscription(item, subs, caller.key);
      return out(200, a.text, a.after ? { after: a.after } : {});
    }
    if (call.method.startsWith('nat_')) {
      const a = await this.#native(item, caller.network);
      return out(a.status, a.text);
    }
    try {
      const pool = this.#upstreams.pool(caller.network.slug);
      const cache = this.#cache;
      const plan = cache && !notification ? cache.plan(caller.network, call.method, call.params, pool.head()) : null;
      if (cache && plan) {
        // C44: from memory, or shared with an identical read under way; the caller's own id either way.
        const a = await cache.serve(plan, idText(item.text), async () => (await pool.forward(item.text, [call.method], { expectAnswer: true })).body);
        return out(200, a.body, { cache: a.hit ? 'HIT' : 'MISS' });
      }
      // The client's bytes go to the node and the node's bytes come back (C22: 200, unchanged).
      const res = await pool.forward(item.text, [call.method], { expectAnswer: !notification });
      return out(200, res.body);
    } catch (err) {
      this.#logFailure(caller, [call.method], err);
      const e = toRpcError(err);
      return out(e.httpStatus, errorText(idText(item.text), e));
    }
  }

  /** A `nat_*` call translated for the native node (C25): the answer under the caller's id, and its HTTP status. */
  async #native(item: Item, network: Network): Promise<{ status: number; text: string }> {
    const id = idText(item.text);
    try {
      const pool = this.#upstreams.pool(network.slug);
      const result = await callNativeMethod(item.call.method, item.call.params, this.#config.methods.native, nodeCallFromPool(pool));
      return { status: 200, text: resultText(id, result) };
    } catch (err) {
      const e = toRpcError(err);
      return { status: e.httpStatus, text: errorText(id, e) };
    }
  }

  async #subscription(item: Item, subs: SubscriptionDispatcher, key: ResolvedKey): Promise<DispatchAnswer> {
    const { call } = item;
    const id = call.id === undefined ? null : idText(item.text);
    if (call.method === UNSUBSCRIBE) {
      const outcome = subs.unsubscribe(call.params);
      if (id === null) return { text: null };
      return { text: outcome instanceof RpcError ? errorText(id, outcome) : resultText(id, outcome) };
    }
    return subs.subscribe(call.params, id ?? 'null', key);
  }

  async #batch(
    caller: Caller,
    count: number,
    admitted: Item[],
    refused: Refused[],
    headers: Record<string, string>,
    subs: SubscriptionDispatcher | undefined,
  ): Promise<RpcOutput> {
    const answers = new Map<number, string | null>();
    for (const r of refused) answers.set(r.index, errorText(r.id, r.err));
    const forward: Item[] = [];
    const others: Item[] = [];
    const pool = this.#upstreams.pool(caller.network.slug);
    const cache = this.#cache;
    const plans = new Map<number, CachePlan>();
    const head = cache ? pool.head() : null;
    for (const item of admitted) {
      const m = item.call.method;
      if (m.startsWith('nat_') || (subs && (m === SUBSCRIBE || m === UNSUBSCRIBE))) {
        others.push(item);
        continue;
      }
      const plan = cache && item.call.id !== undefined ? cache.plan(caller.network, m, item.call.params, head) : null;
      if (cache && plan?.cacheable) {
        const hit = cache.get(caller.network, plan.key);
        if (hit !== null) {
          answers.set(item.index, answerText(idText(item.text), hit));
          continue;
        }
        plans.set(item.index, plan);
      }
      forward.push(item);
    }
    const afters: Array<() => void> = [];
    let allFailedUpstream = forward.length > 0 && others.length === 0;
    await Promise.all([
      forward.length > 0 &&
        (async () => {
          // Each call goes out under its position as id, so answers map back exactly even when
          // the client reused an id or the node reorders; the client's own id is put back after.
          const body = `[${forward.map((f) => (f.call.id === undefined ? f.text : withId(f.text, String(f.index)))).join(',')}]`;
          const expectAnswer = forward.some((f) => f.call.id !== undefined);
          try {
            const res = await pool.forward(body, forward.map((f) => f.call.method), { expectAnswer });
            if (expectAnswer) matchBatch(forward, res.body, answers);
            for (const [index, plan] of plans) {
              const a = answers.get(index);
              if (a) cache?.put(plan, a);
            }
            allFailedUpstream = false;
          } catch (err) {
            const e = toRpcError(err);
            this.#logFailure(caller, forward.map((f) => f.call.method), err);
            for (const f of forward) if (f.call.id !== undefined) answers.set(f.index, errorText(idText(f.text), e));
          }
        })(),
      ...others.map(async (item) => {
        const id = item.call.id === undefined ? null : idText(item.text);
        let a: DispatchAnswer;
        if (item.call.method.startsWith('nat_')) {
          a = { text: id === null ? null : (await this.#native(item, caller.network)).text };
        } else {
          a = await this.#subscription(item, subs as SubscriptionDispatcher, caller.key as ResolvedKey);
        }
        answers.set(item.index, a.text);
        if (a.after) afters.push(a.after);
      }),
    ]);

    // C23: answers in request order; notifications have none.
    const out: string[] = [];
    for (let i = 0; i < count; i++) {
      const a = answers.get(i);
      if (a) out.push(a);
    }
    const after = afters.length > 0 ? () => afters.forEach((f) => f()) : undefined;
    if (out.length === 0) return { ...nothing(headers, caller.key), ...(after ? { after } : {}) };
    return {
      status: allFailedUpstream ? UpstreamError.httpStatus : 200,
      body: `[${out.join(',')}]`,
      headers,
      keyRefused: false,
      key: caller.key,
      ...(after ? { after } : {}),
    };
  }

  #logFailure(caller: Caller, methods: string[], err: unknown): void {
    if (err instanceof UpstreamRpcError || err instanceof RpcError) return;
    const attempts = err instanceof NoUpstreamError ? err.attempts : undefined;
    this.#log.warn(
      { reqId: caller.requestId, network: caller.network.slug, methods: methods.slice(0, 5), attempts, error: (err as Error).name },
      'upstream call failed',
    );
  }
}

interface Caller {
  key: ResolvedKey | null;
  network: Network;
  ip: string;
  requestId: string | undefined;
}

interface Refused {
  index: number;
  /** The id text to answer under. */
  id: string;
  err: RpcError;
}

const nothing = (headers: Record<string, string> | undefined, key: ResolvedKey | null): RpcOutput => ({ status: 204, body: null, headers, keyRefused: false, key });
const plain = (err: RpcError, id: string): RpcOutput => ({ status: err.httpStatus, body: errorText(id, err), headers: undefined, keyRefused: false, key: null });

/** Puts the node's answers (ids = positions) back under the client's ids, bytes otherwise untouched. */
function matchBatch(forward: Item[], body: Buffer, answers: Map<number, string | null>): void {
  const text = body.toString('utf8');
  const expected = new Map(forward.filter((f) => f.call.id !== undefined).map((f) => [f.index, f]));
  const trimmed = text.trimStart();
  if (trimmed.startsWith('[')) {
    for (const el of arrayElements(trimmed)) {
      const span = idSpan(el);
      const index = span ? Number(el.slice(span[0], span[1])) : Number.NaN;
      const f = expected.get(index);
      if (!f) continue;
      expected.delete(index);
      answers.set(index, withId(el, idText(f.text)));
    }
  } else {
    // One error for the whole batch (some nodes refuse batches): every call gets it.
    let nodeError: unknown;
    try {
      nodeError = (JSON.parse(text) as { error?: unknown }).error;
    } catch {}
    const err = nodeError && typeof nodeError === 'object' ? JSON.stringify(nodeError) : JSON.stringify(new UpstreamError('Upstream RPC error: invalid batch answer').toJSON());
    for (const [index, f] of expected) answers.set(index, `{"jsonrpc":"2.0","id":${idText(f.text)},"error":${err}}`);
    return;
  }
  for (const [index, f] of expected) answers.set(index, errorText(idText(f.text), new UpstreamError('Upstream RPC error: no answer for this call')));
}
