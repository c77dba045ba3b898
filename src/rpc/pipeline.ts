import type { Logger } from 'pino';
import type { Network } from '../chains/registry.ts';
import type { Config } from '../config/schema.ts';
import { ApiKeyRevokedError, InternalRpcError, InvalidApiKeyError, InvalidRequestError, MethodNotSupportedError, NetworkNotAllowedError, NodeAnsweredError, ParseError, QuotaExceededError, RateLimitedError, RpcError, toRpcError, UnknownNetworkError, UpstreamError } from '../errors/rpc.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { NetworkDownError } from '../upstreams/pool.ts';
import type { KeyCache, ResolvedKey } from '../keys/cache.ts';
import { admit, Refusal } from '../keys/admission.ts';
import type { Meter } from '../metering/meter.ts';
import { ComputeUnits } from '../metering/weights.ts';
import type { UsageSink } from '../usage/sink.ts';
import { type AnalyticsRecorder, NODE_ERROR, OK, UPSTREAM_ERROR } from '../analytics/recorder.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { callNativeMethod, nodeCallFromPool } from './dispatch/native.ts';
import { errorText, parseItem, type RpcCall, resultText } from './jsonrpc.ts';
import { answerErrorCode, arrayElements, idSpan, idText, nestsDeeperThan, withId } from '../json/lossless.ts';
import { answerText, type CachePlan, type ResponseCache } from './dispatch/cache.ts';
import { FILTER_METHODS, FilterPins } from './dispatch/filters.ts';
import { GET_LOGS, type LogsLimits, type LogsPlan, planLogs, runLogs } from './dispatch/logs.ts';
import { paramsProblem } from './param-guards.ts';
import type { MethodPolicy } from './policy.ts';
import { OTHER_METHOD, type RpcCallMetrics, type RpcOutcome, UNKNOWN_NETWORK } from '../ops/metrics.ts';

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
  /** The `Origin` and `Authorization` headers as sent, for a key's allowlists and JWT option (issue 15). */
  origin?: string | undefined;
  authorization?: string | undefined;
  /** For log lines that belong to this request. */
  requestId?: string;
  /** WebSocket only: serves eth_subscribe / eth_unsubscribe. Absent on HTTP, where they are -32601. */
  subscriptions?: SubscriptionDispatcher;
  /** C46: `performance.now()` when the request arrived (default: when `handle` is called). */
  arrivedAt?: number;
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
  /** The node's answer holds an error object; set when the answer was already read for it (one scan for metrics and analytics). */
  nodeError?: boolean;
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
/** C23: levels of arrays and objects a message may nest, its batch array and call object included. */
export const MAX_NESTING = 128;
const UNSUBSCRIBE = 'eth_unsubscribe';

/** One call of a message, once parsed. */
interface Item {
  index: number;
  /** The item's JSON text (the whole body for a single call). */
  text: string;
  call: RpcCall;
  /** Answer text, once known. */
  answer?: string | null;
  /** An eth_getLogs wider than the network's maxLogsRange: the chunks it is split into. */
  logs?: LogsPlan;
  /** Compute units when not the method's weight (a split eth_getLogs: its weight x chunks). */
  cu?: number;
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
  readonly #metrics: RpcCallMetrics | undefined;
  /** Issue 15: filters pinned to the upstream that made them, for HTTP and WebSocket alike. */
  readonly #filters = new FilterPins();
  readonly #logsLimitsBySlug = new Map<string, LogsLimits>();
  readonly #analytics: AnalyticsRecorder | undefined;

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
    /** Calls by network, method, outcome and error code. */
    metrics?: RpcCallMetrics;
    /** C46: latency, errors and refusals per key, network, method and hour. */
    analytics?: AnalyticsRecorder;
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
    this.#metrics = deps.metrics;
    this.#analytics = deps.analytics;
  }

  async handle(input: RpcInput): Promise<RpcOutput> {
    const text = input.body.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      const err = new ParseError('Parse error: the body is not valid JSON');
      this.#tally(input.network instanceof RpcError ? UNKNOWN_NETWORK : input.network.slug, OTHER_METHOD, err, input.requestId);
      return plain(err, 'null');
    }
    // C23: nesting past MAX_NESTING is refused like a parse error (the params' readers recurse).
    if (nestsDeeperThan(text, MAX_NESTING)) {
      const err = new InvalidRequestError(`Invalid request: JSON nested more than ${MAX_NESTING} levels deep`);
      this.#tally(input.network instanceof RpcError ? UNKNOWN_NETWORK : input.network.slug, OTHER_METHOD, err, input.requestId);
      return plain(err, 'null');
    }
    const isBatch = Array.isArray(parsed);
    const single = isBatch ? undefined : parseItem(parsed, text);
    // The id as the client wrote it (an id of the wrong type is answered as null); read from the
    // text only when the gateway writes the answer itself: a forwarded call needs none of it.
    let idCache: string | undefined;
    const singleId = () => (idCache ??= single && (single.call || single.id !== null) ? idText(text) : 'null');

    // The method a refusal of the whole message is counted under (a batch: `other`).
    const messageMethod = single?.call?.method ?? OTHER_METHOD;
    if (input.network instanceof RpcError) {
      this.#tally(UNKNOWN_NETWORK, messageMethod, input.network, input.requestId);
      return plain(input.network, singleId());
    }
    const network = input.network;
    let key: ResolvedKey | null = null;
    if (input.apiKey !== null) {
      let admitted = admit(this.#keys, input.apiKey, network.slug, input, this.#meter);
      if (admitted instanceof Promise) admitted = await admitted;
      if (admitted instanceof Refusal) {
        const { error: err, key: known } = admitted;
        this.#tally(network.slug, messageMethod, err, input.requestId);
        if (admitted.reason === 'rate') return { ...plain(err, singleId()), headers: admitted.headers };
        if (admitted.reason === 'key') {
          // C46: a revoked or expired key is a known one: counted for its account.
          if (known && err instanceof ApiKeyRevokedError) this.#analytics?.refused(known.userId, known.keyId, network.slug, messageMethod, err.code);
          return { ...plain(err, singleId()), keyRefused: true };
        }
        const caller: Caller = { key: known, network, ip: input.ip, requestId: input.requestId, at: 0 };
        if (admitted.reason === 'network') {
          if (known) this.#analytics?.refused(known.userId, known.keyId, network.slug, messageMethod, err.code);
          return { ...(await this.#refusal(caller, singleId(), err)), keyRefused: true };
        }
        // Issue 15: the key's origin, IP and JWT rules refuse the whole message.
        return this.#refusal(caller, singleId(), err);
      }
      key = admitted;
    }
    const caller: Caller = { key, network, ip: input.ip, requestId: input.requestId, at: this.#analytics ? (input.arrivedAt ?? performance.now()) : 0 };
    const access = key?.access ?? null;

    // Each call of the message, with its text; refusals answered at once.
    let items: Item[];
    let count = 1;
    const refused: Refused[] = [];
    if (single) {
      if (single.error) {
        this.#tally(network.slug, OTHER_METHOD, single.error, caller.requestId);
        return this.#refusal(caller, singleId(), single.error);
      }
      items = [{ index: 0, text, call: single.call }];
    } else {
      const list = parsed as unknown[];
      if (list.length === 0) {
        const err = new InvalidRequestError('Invalid request: empty batch');
        this.#tally(network.slug, OTHER_METHOD, err, caller.requestId);
        return this.#refusal(caller, 'null', err);
      }
      const max = this.#config.rpc.maxBatchSize;
      if (list.length > max) {
        const err = new InvalidRequestError(`Invalid request: a batch holds at most ${max} calls`, { details: { maxBatchSize: max } });
        this.#tally(network.slug, OTHER_METHOD, err, caller.requestId);
        return this.#refusal(caller, 'null', err);
      }
      const elements = arrayElements(text);
      count = list.length;
      items = [];
      list.forEach((raw, index) => {
        const itemText = elements[index] ?? 'null';
        const item = parseItem(raw, itemText);
        if (item.error) {
          refused.push({ index, id: item.id !== null ? idText(itemText) : 'null', err: item.error });
          this.#tally(network.slug, OTHER_METHOD, item.error);
        } else items.push({ index, text: itemText, call: item.call });
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
        // Issue 15: the key's method and contract lists first, so a refused call takes no slot.
        // C50: members a node reads as one, numbers it cannot bound: refused before anything else judges the params.
        err = paramsProblem(call.method, call.params, item.text) ?? (access !== null ? access.checkCall(call) : null);
        if (!err && call.method === SUBSCRIBE) {
          err = subs.reserve(key);
          if (!err) reserved++;
        }
      } else {
        err = this.#policy.check(call.method, network.native, tier);
        // C50: before the key's lists judge the params, so they judge what the node will run.
        if (err === null) err = paramsProblem(call.method, call.params, item.text);
        // Issue 15: the key's method and contract lists, item by item like the method policy.
        if (err === null && access !== null) err = access.checkCall(call);
      }
      if (err) {
        this.#tally(network.slug, call.method, err, single ? caller.requestId : undefined);
        if (key) this.#analytics?.refused(key.userId, key.keyId, network.slug, call.method, err.code);
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
    let logsRefused: Item[] | undefined;
    for (const item of admitted) {
      // Issue 15: an eth_getLogs wider than the network's maxLogsRange is planned before it is
      // metered (tags resolved, chunks counted) and costs its weight per chunk; one too wide is refused.
      if (item.call.method === GET_LOGS) {
        const err = await this.#planLogs(caller, item);
        if (err) {
          this.#tally(network.slug, GET_LOGS, err, single ? caller.requestId : undefined);
          if (single) {
            releaseAll();
            return item.call.id === undefined ? nothing(undefined, key) : this.#refusal(caller, singleId(), err);
          }
          if (item.call.id !== undefined) refused.push({ index: item.index, id: idText(item.text), err });
          (logsRefused ??= []).push(item);
          continue;
        }
      }
      cu += item.cu ?? this.#cu.of(item.call.method);
    }
    if (logsRefused) for (const item of logsRefused) admitted.splice(admitted.indexOf(item), 1);
    const who = key ? { key } : { ip: input.ip };
    // In process the limits answer at once; only a shared store (Redis) is awaited.
    const metered = this.#meter.rpcNow(who, admitted.length, cu) ?? (await this.#meter.rpc(who, admitted.length, cu));
    const headers = metered.headers;
    if (metered.error) {
      releaseAll();
      for (const item of admitted) this.#tally(network.slug, item.call.method, metered.error);
      if (key && this.#analytics) for (const item of admitted) this.#analytics.refused(key.userId, key.keyId, network.slug, item.call.method, metered.error.code);
      this.#refused(caller, metered.error, admitted.length);
      return { status: metered.error.httpStatus, body: errorText(single ? singleId() : 'null', metered.error), headers, keyRefused: false, key };
    }
    if (key) {
      for (const item of admitted) {
        const m = item.call.method;
        this.#usage.record({ userId: key.userId, keyId: key.keyId, network: network.slug, method: m, computeUnits: item.cu ?? this.#cu.of(m) });
      }
    }

    if (single) {
      const item = admitted[0];
      if (!item) return nothing(headers, key);
      const out = await this.#single(caller, item, headers, subs);
      if (key && this.#analytics) this.#observe(caller, key, item.call.method, out.status >= 500, out.nodeError ?? out.body);
      return out;
    }
    if (refused.length > 0) this.#refused(caller, (refused[0] as Refused).err, refused.length);
    return this.#batch(caller, count, admitted, refused, headers, subs);
  }

  /**
   * Counts one call by network, method, outcome and code; `reqId` given: a refusal is also
   * logged at debug, with the request id and the reason (one line per request, not per item).
   */
  #tally(slug: string, method: string, err: RpcError | null, reqId?: string): void {
    if (err === null) {
      this.#metrics?.ok(slug, method);
      return;
    }
    const outcome = outcomeOf(err);
    this.#metrics?.failed(slug, method, outcome, err.code);
    if (reqId !== undefined && outcome.startsWith('refused') && this.#log.isLevelEnabled('debug')) {
      this.#log.debug({ reqId, network: slug, method, status: err.httpStatus, code: err.code, reason: err.message }, 'rpc call refused');
    }
  }

  /** A batch's refused calls in one debug line: how many, and the first reason. */
  #refused(caller: Caller, first: RpcError, calls: number): void {
    if (!this.#log.isLevelEnabled('debug')) return;
    this.#log.debug(
      { reqId: caller.requestId, network: caller.network.slug, calls, status: first.httpStatus, code: first.code, reason: first.message },
      'rpc calls refused',
    );
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
    // Built as one literal and added to, not spread: the forwarded answer's path runs this per call.
    const out = (status: number, body: Buffer | string | null, extra?: Partial<RpcOutput>): RpcOutput => {
      const o: RpcOutput = { status: notification ? 204 : status, body: notification ? null : body, headers, keyRefused: false, key: caller.key };
      return extra ? Object.assign(o, extra) : o;
    };
    const slug = caller.network.slug;
    if (subs && caller.key && (call.method === SUBSCRIBE || call.method === UNSUBSCRIBE)) {
      const a = await this.#subscription(item, subs, caller.key);
      this.#tallyAnswer(slug, call.method, a.text);
      return out(200, a.text, a.after ? { after: a.after } : undefined);
    }
    if (call.method.startsWith('nat_')) {
      const a = await this.#native(item, caller);
      return out(a.status, a.text);
    }
    // Issue 15: a split eth_getLogs, and filters kept on the node that made them.
    if (item.logs || FILTER_METHODS.has(call.method)) {
      const a = await this.#routed(caller, item);
      return out(a.status, a.text);
    }
    try {
      const pool = this.#upstreams.pool(slug);
      const cache = this.#cache;
      const plan = cache && !notification ? cache.plan(caller.network, call.method, call.params, pool.head()) : null;
      if (cache && plan) {
        // C44: from memory, or shared with an identical read under way; the caller's own id either way.
        const id = idText(item.text);
        const stored = plan.cacheable ? cache.get(caller.network, plan.key) : null;
        if (stored !== null) {
          // Only results are stored: a hit is one (no node error to look for in it).
          this.#metrics?.ok(slug, call.method);
          return out(200, answerText(id, stored), HIT);
        }
        const body = await cache.shared(plan, id, async () => (await pool.forward(item.text, [call.method], { expectAnswer: true, reqId: caller.requestId })).body);
        const code = this.#tallyAnswer(slug, call.method, body);
        const o = out(200, body, MISS);
        if (code !== undefined) o.nodeError = code !== null;
        return o;
      }
      // The client's bytes go to the node and the node's bytes come back (C22: 200, unchanged).
      const res = await pool.forward(item.text, [call.method], { expectAnswer: !notification, reqId: caller.requestId });
      const code = this.#tallyAnswer(slug, call.method, res.body);
      const o = out(200, res.body);
      if (code !== undefined) o.nodeError = code !== null;
      return o;
    } catch (err) {
      this.#logFailure(caller, [call.method], err);
      const e = toRpcError(err);
      this.#tally(slug, call.method, e);
      return out(e.httpStatus, errorText(idText(item.text), e));
    }
  }

  /** A network's eth_getLogs limits: its own, else those of `rpc`. */
  #logsLimits(network: Network): LogsLimits {
    let limits = this.#logsLimitsBySlug.get(network.slug);
    if (!limits) {
      const r = this.#config.rpc;
      limits = {
        maxRange: network.maxLogsRange === undefined ? r.maxLogsRange : network.maxLogsRange,
        maxResults: network.maxLogsResults === undefined ? r.maxLogsResults : network.maxLogsResults,
        concurrency: r.logsChunkConcurrency,
        maxChunks: r.maxLogsChunks,
      };
      this.#logsLimitsBySlug.set(network.slug, limits);
    }
    return limits;
  }

  /** Plans an eth_getLogs (issue 15): a wide one gets its chunks and compute units; the -32602 for one too wide. */
  async #planLogs(caller: Caller, item: Item): Promise<RpcError | null> {
    const limits = this.#logsLimits(caller.network);
    if (limits.maxRange === null) return null;
    const plan = await planLogs(item.call.params, limits, this.#upstreams.pool(caller.network.slug), caller.requestId);
    if (plan instanceof RpcError) return plan;
    if (plan) {
      item.logs = plan;
      item.cu = this.#cu.of(GET_LOGS) * plan.chunks.length;
    }
    return null;
  }

  /** A split eth_getLogs or a filter call (issue 15): its answer (null for a notification) and HTTP status. */
  async #routed(caller: Caller, item: Item): Promise<{ status: number; text: string | null }> {
    const { call } = item;
    const slug = caller.network.slug;
    const pool = this.#upstreams.pool(slug);
    const id = call.id === undefined ? null : idText(item.text);
    let a: { status: number; text: string | null };
    if (item.logs) {
      const r = await runLogs(item.logs, this.#logsLimits(caller.network), pool, id ?? 'null', caller.requestId);
      a = { status: r.status, text: id === null ? null : r.text };
    } else {
      // A filter belongs to the account that made it (the public endpoint's to everyone there).
      const owner = caller.key ? caller.key.userId : 'public';
      a = await this.#filters.handle(pool, owner, { method: call.method, params: call.params, text: item.text, idText: id, reqId: caller.requestId });
    }
    if (a.status >= 500) this.#metrics?.failed(slug, call.method, 'upstream_error', UpstreamError.code);
    else this.#tallyAnswer(slug, call.method, a.text);
    return a;
  }

  /**
   * Counts a call by the answer it got: a result, or an error object with its code. Returns that
   * code (null: none), or undefined when nothing needed the answer read (no metrics, no analytics).
   */
  #tallyAnswer(slug: string, method: string, answer: string | Buffer | null): number | null | undefined {
    const m = this.#metrics;
    if (!m && !this.#analytics) return undefined;
    const code = answer === null || answer.length === 0 ? null : answerErrorCode(answer);
    if (!m) return code;
    if (code === null) m.ok(slug, method);
    else m.failed(slug, method, 'node_error', code);
    return code;
  }

  /** A `nat_*` call translated for the native node (C25): the answer under the caller's id, and its HTTP status. */
  async #native(item: Item, caller: Caller): Promise<{ status: number; text: string }> {
    const id = idText(item.text);
    const { method } = item.call;
    try {
      const pool = this.#upstreams.pool(caller.network.slug);
      const result = await callNativeMethod(method, item.call.params, this.#config.methods.native, nodeCallFromPool(pool));
      this.#tally(caller.network.slug, method, null);
      return { status: 200, text: resultText(id, result) };
    } catch (err) {
      this.#logFailure(caller, [method], err);
      const e = toRpcError(err);
      this.#tally(caller.network.slug, method, e);
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
      if (m.startsWith('nat_') || item.logs || FILTER_METHODS.has(m) || (subs && (m === SUBSCRIBE || m === UNSUBSCRIBE))) {
        others.push(item);
        continue;
      }
      const plan = cache && item.call.id !== undefined ? cache.plan(caller.network, m, item.call.params, head) : null;
      if (cache && plan?.cacheable) {
        const hit = cache.get(caller.network, plan.key);
        if (hit !== null) {
          answers.set(item.index, answerText(idText(item.text), hit));
          this.#metrics?.ok(caller.network.slug, m);
          continue;
        }
        plans.set(item.index, plan);
      }
      forward.push(item);
    }
    const afters: Array<() => void> = [];
    let allFailedUpstream = forward.length > 0 && others.length === 0;
    let forwardFailed = false;
    await Promise.all([
      forward.length > 0 &&
        (async () => {
          // Each call goes out under its position as id, so answers map back exactly even when
          // the client reused an id or the node reorders; the client's own id is put back after.
          const body = `[${forward.map((f) => (f.call.id === undefined ? f.text : withId(f.text, String(f.index)))).join(',')}]`;
          const expectAnswer = forward.some((f) => f.call.id !== undefined);
          try {
            const res = await pool.forward(body, forward.map((f) => f.call.method), { expectAnswer, reqId: caller.requestId });
            if (expectAnswer) matchBatch(forward, res.body, answers);
            for (const [index, plan] of plans) {
              const a = answers.get(index);
              if (a) cache?.put(plan, a);
            }
            for (const f of forward) this.#tallyAnswer(caller.network.slug, f.call.method, answers.get(f.index) ?? null);
            allFailedUpstream = false;
          } catch (err) {
            forwardFailed = true;
            const e = toRpcError(err);
            this.#logFailure(caller, forward.map((f) => f.call.method), err);
            for (const f of forward) {
              this.#tally(caller.network.slug, f.call.method, e);
              if (f.call.id !== undefined) answers.set(f.index, errorText(idText(f.text), e));
            }
          }
        })(),
      ...others.map(async (item) => {
        const id = item.call.id === undefined ? null : idText(item.text);
        let a: DispatchAnswer;
        if (item.call.method.startsWith('nat_')) {
          a = { text: id === null ? null : (await this.#native(item, caller)).text };
        } else if (item.logs || FILTER_METHODS.has(item.call.method)) {
          a = { text: (await this.#routed(caller, item)).text };
        } else {
          a = await this.#subscription(item, subs as SubscriptionDispatcher, caller.key as ResolvedKey);
          this.#tallyAnswer(caller.network.slug, item.call.method, a.text);
        }
        answers.set(item.index, a.text);
        if (a.after) afters.push(a.after);
      }),
    ]);

    const key = caller.key;
    if (key && this.#analytics) {
      // C46: forward is admitted's subsequence in the same order; a failed forward is an upstream failure for each of its calls.
      let j = 0;
      for (const item of admitted) {
        const forwarded = forward[j] === item;
        if (forwarded) j++;
        this.#observe(caller, key, item.call.method, forwarded && forwardFailed, answers.get(item.index) ?? null);
      }
    }
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

  /** C46: one admitted call answered: its latency since arrival and whether a node or no node failed it. */
  #observe(caller: Caller, key: ResolvedKey, method: string, upstreamFailed: boolean, answer: boolean | string | Buffer | null): void {
    // `answer` is whether the node answered an error when that is known already, else the answer to read.
    const nodeError = typeof answer === 'boolean' ? answer : answer !== null && answer.length > 0 && answerErrorCode(answer) !== null;
    const outcome = upstreamFailed ? UPSTREAM_ERROR : nodeError ? NODE_ERROR : OK;
    this.#analytics?.call(key.userId, key.keyId, caller.network.slug, method, this.#cu.of(method), outcome, performance.now() - caller.at);
  }

  #logFailure(caller: Caller, methods: string[], err: unknown): void {
    if (err instanceof UpstreamRpcError || err instanceof RpcError) return;
    const line = {
      reqId: caller.requestId,
      network: caller.network.slug,
      methods: methods.slice(0, 5),
      ...(err instanceof NoUpstreamError ? { attempts: err.attempts } : { err }),
      error: (err as Error).name,
    };
    // A network known to be down was said so once (the pool's "0 of n upstreams answer"): each
    // call refused for it is only a debug line.
    if (err instanceof NetworkDownError) this.#log.debug(line, 'upstream call failed: no upstream answers');
    else this.#log.warn(line, 'upstream call failed');
  }
}

interface Caller {
  key: ResolvedKey | null;
  network: Network;
  ip: string;
  requestId: string | undefined;
  /** C46: when the request arrived (performance.now()); 0 when analytics are off. */
  at: number;
}

interface Refused {
  index: number;
  /** The id text to answer under. */
  id: string;
  err: RpcError;
}

// C44: what a single call answered by the cache adds to its output (a stored answer is a result).
const HIT: Partial<RpcOutput> = { cache: 'HIT', nodeError: false };
const MISS: Partial<RpcOutput> = { cache: 'MISS' };

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

/** How a gateway error counts in the metrics. */
/** The metrics outcome of each refusal, by the error classes' pinned codes (never literals). */
const OUTCOME_BY_CODE: ReadonlyMap<number, RpcOutcome> = new Map<number, RpcOutcome>([
  [InvalidApiKeyError.code, 'refused_key'],
  [ApiKeyRevokedError.code, 'refused_key'],
  [NetworkNotAllowedError.code, 'refused_network'],
  [UnknownNetworkError.code, 'refused_network'],
  [RateLimitedError.code, 'refused_rate'],
  [QuotaExceededError.code, 'refused_quota'],
  [MethodNotSupportedError.code, 'refused_method'],
  [UpstreamError.code, 'upstream_error'],
  [InternalRpcError.code, 'internal_error'],
]);

function outcomeOf(err: RpcError): RpcOutcome {
  if (err instanceof NodeAnsweredError) return 'node_error';
  return OUTCOME_BY_CODE.get(err.code) ?? 'invalid';
}
