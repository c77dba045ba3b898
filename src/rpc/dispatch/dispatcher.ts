// Dispatches each admitted call to its answer: cache, filters, logs, native methods or the upstreams.
import type { Network } from '../../chains/networks.ts';
import type { MethodsConfig, RpcConfig } from '../../config/schema.ts';
import { RpcError, toRpcError, UpstreamError } from '../../errors/rpc.ts';
import { answerIdIsNull, arrayElements, idSpan, withId } from '../../json/lossless.ts';
import type { ResolvedKey } from '../../keys/cache.ts';
import type { ComputeUnits } from '../../metering/weights.ts';
import type { CallOptions } from '../../upstreams/http/types.ts';
import type { UpstreamPool } from '../../upstreams/http/pool.ts';
import type { Upstreams } from '../../upstreams/upstreams.ts';
import { methodFacts } from '../../methods/catalogue.ts';
import { blockNumberOf } from '../../methods/values.ts';
import { errorText, resultText } from '../jsonrpc.ts';
import { type Caller, type DispatchAnswer, HIT, type ParsedCall, MISS, noAnswer, type Refused, type RpcOutput, SUBSCRIBE, type SubscriptionDispatcher, UNSUBSCRIBE } from '../message.ts';
import type { TraceSpan, Tracing } from '../../ops/tracing.ts';
import { answerText, type CachePlan, type ResponseCache } from './cache.ts';
import { FilterPins, isFilterMethod } from './filters.ts';
import { GET_LOGS, type LogsLimits, planLogs, runLogs } from './logs.ts';
import { callNativeMethod, nodeCallFromPool } from './native.ts';

/**
 * A single call's output. Built as one literal and added to, not spread: the forwarded answer's
 * path runs this per call.
 */
function answerOf(notification: boolean, status: number, body: Buffer | string | null, headers: Record<string, string>, key: ResolvedKey | null, extra: Partial<RpcOutput> | undefined): RpcOutput {
  const o: RpcOutput = { status: notification ? 204 : status, body: notification ? null : body, headers, keyRefused: false, key };
  return extra ? Object.assign(o, extra) : o;
}

/** The settings dispatch reads: eth_getLogs limits of `rpc`, and the node methods the `nat_*` names stand for. */
export interface DispatcherSettings {
  rpc: Pick<RpcConfig, 'maxLogsRange' | 'maxLogsResults' | 'logsChunkConcurrency' | 'maxLogsChunks'>;
  methods: Pick<MethodsConfig, 'native'>;
}

/**
 * The last stage of the pipeline: admitted, metered calls to their answers. A single call is
 * answered from the cache, forwarded as the client's bytes, translated (`nat_*`, C25), split
 * (a wide eth_getLogs), pinned (filters) or subscribed; a batch's forwardable calls go to the
 * node as one batch and the others (consensus reads among them, C49) run beside it, answers back
 * in request order (C23).
 */
export class Dispatcher {
  readonly #settings: DispatcherSettings;
  readonly #upstreams: Upstreams;
  readonly #cache: ResponseCache | undefined;
  readonly #cu: ComputeUnits;
  /** C58: the cache's span; undefined while tracing is off. */
  readonly #tracing: Tracing | undefined;
  /** C26: filters pinned to the upstream that made them, for HTTP and WebSocket alike. */
  readonly #filters = new FilterPins();
  readonly #logsLimitsBySlug = new Map<string, LogsLimits>();

  constructor(deps: { settings: DispatcherSettings; upstreams: Upstreams; cache: ResponseCache | undefined; cu: ComputeUnits; tracing?: Tracing | undefined }) {
    this.#settings = deps.settings;
    this.#upstreams = deps.upstreams;
    this.#cache = deps.cache;
    this.#cu = deps.cu;
    this.#tracing = deps.tracing;
  }

  /** The compute units a dispatched call was metered at (C10). */
  #cuOf(item: ParsedCall): number {
    return item.cu ?? this.#cu.of(item.call.method);
  }

  /**
   * One call to its answer; its outcome goes into `caller.outcomes`. An answer from memory is
   * returned at once (no promise: the cached path awaits nothing); everything else resolves later.
   */
  single(caller: Caller, item: ParsedCall, headers: Record<string, string>, subs: SubscriptionDispatcher | undefined): RpcOutput | Promise<RpcOutput> {
    const { call } = item;
    const method = call.method;
    if ((subs && caller.key && (method === SUBSCRIBE || method === UNSUBSCRIBE)) || method.startsWith('nat_') || item.logs || isFilterMethod(method)) {
      return this.#routedSingle(caller, item, headers, subs);
    }
    const notification = call.id === undefined;
    let cacheSpan: TraceSpan | undefined;
    try {
      const pool = this.#upstreams.pool(caller.network.slug);
      const cache = this.#cache;
      const plan = cache && !notification ? cache.plan(caller.network, method, call.params, pool.head()) : null;
      if (cache && plan) {
        // C44: from memory, the caller's own id (C23).
        cacheSpan = this.#tracing?.stage('cache');
        const id = item.idText;
        const hit = cache.hit(plan, id);
        if (hit !== null) {
          cacheSpan?.set('junction.cache', 'hit');
          cacheSpan?.end();
          // Only results are stored: a hit is one (no node error to look for in it).
          caller.outcomes.answered(method, this.#cuOf(item));
          return answerOf(notification, 200, hit, headers, caller.key, HIT);
        }
        return this.#fromNode(caller, item, headers, pool, { cache, plan, id, span: cacheSpan });
      }
      return this.#fromNode(caller, item, headers, pool, null);
    } catch (err) {
      return this.#failed(caller, item, headers, err, cacheSpan);
    }
  }

  /** A single call no node answered (or that could not be sent): the error under the caller's id. */
  #failed(caller: Caller, item: ParsedCall, headers: Record<string, string>, err: unknown, cacheSpan: TraceSpan | undefined): RpcOutput {
    const { method } = item.call;
    cacheSpan?.end('no answer');
    caller.outcomes.failure([method], err);
    const e = toRpcError(err);
    caller.outcomes.failed(method, this.#cuOf(item), e);
    return answerOf(item.call.id === undefined, e.httpStatus, errorText(item.idText, e), headers, caller.key, undefined);
  }

  /** A subscription, a `nat_*` call, a split eth_getLogs or a filter call: the single call's answer. */
  async #routedSingle(caller: Caller, item: ParsedCall, headers: Record<string, string>, subs: SubscriptionDispatcher | undefined): Promise<RpcOutput> {
    const { call } = item;
    const notification = call.id === undefined;
    if (subs && caller.key && (call.method === SUBSCRIBE || call.method === UNSUBSCRIBE)) {
      const a = await this.#subscription(item, subs, caller.key);
      caller.outcomes.answered(call.method, this.#cuOf(item), a.text);
      return answerOf(notification, 200, a.text, headers, caller.key, a.after ? { after: a.after } : undefined);
    }
    if (call.method.startsWith('nat_')) {
      const a = await this.#native(item, caller);
      return answerOf(notification, a.status, a.text, headers, caller.key, undefined);
    }
    // A split eth_getLogs, and filters kept on the node that made them.
    const a = await this.#routed(caller, item);
    return answerOf(notification, a.status, a.text, headers, caller.key, undefined);
  }

  /**
   * A single call the node answers: shared with an identical read in flight and stored when
   * `cached` (C44, memory had nothing), else the client's bytes to the node and its bytes back
   * (C22: 200, unchanged).
   */
  async #fromNode(caller: Caller, item: ParsedCall, headers: Record<string, string>, pool: UpstreamPool, cached: { cache: ResponseCache; plan: CachePlan; id: string; span: TraceSpan | undefined } | null): Promise<RpcOutput> {
    const { call } = item;
    const notification = call.id === undefined;
    const outcomes = caller.outcomes;
    const cacheSpan = cached?.span; // C58: ended below, or as failed in the catch
    try {
      if (cached) {
        const body = await cached.cache.shared(cached.plan, cached.id, async () => (await pool.forward(item.text, [call.method], forwardOptions(caller, item, true))).body);
        cacheSpan?.set('junction.cache', cached.plan.cacheable ? 'miss' : 'not stored (identical calls shared)');
        cacheSpan?.end();
        const answer = underCallerId(body, item);
        outcomes.answered(call.method, this.#cuOf(item), answer);
        return answerOf(notification, 200, answer, headers, caller.key, MISS);
      }
      const res = await pool.forward(item.text, [call.method], forwardOptions(caller, item, !notification));
      const body = underCallerId(res.body, item);
      outcomes.answered(call.method, this.#cuOf(item), body);
      return answerOf(notification, 200, body, headers, caller.key, undefined);
    } catch (err) {
      return this.#failed(caller, item, headers, err, cacheSpan);
    }
  }

  /** A network's eth_getLogs limits: its own, else those of `rpc`. */
  #logsLimits(network: Network): LogsLimits {
    let limits = this.#logsLimitsBySlug.get(network.slug);
    if (!limits) {
      const r = this.#settings.rpc;
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

  /** Plans an eth_getLogs (C26): a wide one gets its chunks and compute units; the -32602 for one too wide. */
  async planLogs(caller: Caller, item: ParsedCall): Promise<RpcError | null> {
    const limits = this.#logsLimits(caller.network);
    if (limits.maxRange === null) return null;
    const plan = planLogs(item.call.params, limits, this.#upstreams.pool(caller.network.slug));
    if (plan instanceof RpcError) return plan;
    if (plan) {
      item.logs = plan;
      item.cu = this.#cu.of(GET_LOGS) * plan.chunks.length;
    }
    return null;
  }

  /** A split eth_getLogs or a filter call (C26): its answer (null for a notification) and HTTP status. */
  async #routed(caller: Caller, item: ParsedCall): Promise<{ status: number; text: string | null }> {
    const { call } = item;
    const slug = caller.network.slug;
    const pool = this.#upstreams.pool(slug);
    const id = call.id === undefined ? null : item.idText;
    let a: { status: number; text: string | null };
    if (item.logs) {
      const r = await runLogs(item.logs, this.#logsLimits(caller.network), pool, id ?? 'null', caller.requestId);
      a = { status: r.status, text: id === null ? null : r.text };
    } else {
      // A filter belongs to the account that made it (the public endpoint's to everyone there).
      const owner = caller.key ? caller.key.userId : 'public';
      a = await this.#filters.handle(pool, owner, { method: call.method, params: call.params, text: item.text, idText: id, reqId: caller.requestId });
    }
    if (a.status >= 500) caller.outcomes.failed(call.method, this.#cuOf(item), ROUTED_FAILURE);
    else caller.outcomes.answered(call.method, this.#cuOf(item), a.text);
    return a;
  }

  /** A `nat_*` call translated for the native node (C25): the answer under the caller's id, and its HTTP status. */
  async #native(item: ParsedCall, caller: Caller): Promise<{ status: number; text: string }> {
    const id = item.idText;
    const { method } = item.call;
    try {
      const pool = this.#upstreams.pool(caller.network.slug);
      const result = await callNativeMethod(method, item.call.params, this.#settings.methods.native, nodeCallFromPool(pool));
      caller.outcomes.answered(method, this.#cuOf(item));
      return { status: 200, text: resultText(id, result) };
    } catch (err) {
      caller.outcomes.failure([method], err);
      const e = toRpcError(err);
      caller.outcomes.failed(method, this.#cuOf(item), e);
      return { status: e.httpStatus, text: errorText(id, e) };
    }
  }

  async #subscription(item: ParsedCall, subs: SubscriptionDispatcher, key: ResolvedKey): Promise<DispatchAnswer> {
    const { call } = item;
    const id = call.id === undefined ? null : item.idText;
    if (call.method === UNSUBSCRIBE) {
      const outcome = subs.unsubscribe(call.params);
      if (id === null) return { text: null };
      return { text: outcome instanceof RpcError ? errorText(id, outcome) : resultText(id, outcome) };
    }
    return subs.subscribe(call.params, id ?? 'null', key);
  }

  async batch(
    caller: Caller,
    count: number,
    admitted: ParsedCall[],
    refused: Refused[],
    headers: Record<string, string>,
    subs: SubscriptionDispatcher | undefined,
  ): Promise<RpcOutput> {
    const outcomes = caller.outcomes;
    const answers = new Map<number, string | null>();
    for (const r of refused) answers.set(r.index, errorText(r.id, r.err));
    const forward: ParsedCall[] = [];
    const others: ParsedCall[] = [];
    const pool = this.#upstreams.pool(caller.network.slug);
    const cache = this.#cache;
    const plans = new Map<number, CachePlan>();
    const head = cache ? pool.head() : null;
    for (const item of admitted) {
      const m = item.call.method;
      // C49: a consensus read of a batch is asked of several nodes and judged alone, as a single call is.
      if (m.startsWith('nat_') || item.logs || isFilterMethod(m) || (subs && (m === SUBSCRIBE || m === UNSUBSCRIBE)) || (item.call.id !== undefined && pool.isConsensusRead(m))) {
        others.push(item);
        continue;
      }
      const plan = cache && item.call.id !== undefined ? cache.plan(caller.network, m, item.call.params, head) : null;
      if (cache && plan?.cacheable) {
        const hit = cache.get(caller.network, plan.key);
        if (hit !== null) {
          answers.set(item.index, answerText(item.idText, hit));
          outcomes.answered(m, this.#cuOf(item));
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
            const res = await pool.forward(body, forward.map((f) => f.call.method), { expectAnswer, reqId: caller.requestId, block: oldestBlock(forward) });
            if (expectAnswer) matchBatch(forward, res.body, answers);
            for (const [index, plan] of plans) {
              const a = answers.get(index);
              if (a) cache?.put(plan, a);
            }
            for (const f of forward) outcomes.answered(f.call.method, this.#cuOf(f), answers.get(f.index) ?? null);
            allFailedUpstream = false;
          } catch (err) {
            const e = toRpcError(err);
            outcomes.failure(forward.map((f) => f.call.method), err);
            for (const f of forward) {
              outcomes.failed(f.call.method, this.#cuOf(f), e);
              if (f.call.id !== undefined) answers.set(f.index, errorText(f.idText, e));
            }
          }
        })(),
      ...others.map(async (item) => {
        const id = item.call.id === undefined ? null : item.idText;
        let a: DispatchAnswer;
        if (item.call.method.startsWith('nat_')) {
          a = { text: id === null ? null : (await this.#native(item, caller)).text };
        } else if (item.logs || isFilterMethod(item.call.method)) {
          a = { text: (await this.#routed(caller, item)).text };
        } else if (item.call.method !== SUBSCRIBE && item.call.method !== UNSUBSCRIBE) {
          // A consensus read (C49): the single call's path, the cache's included.
          const out = await this.single(caller, item, headers, undefined);
          a = { text: out.body === null ? null : out.body.toString() };
        } else {
          a = await this.#subscription(item, subs as SubscriptionDispatcher, caller.key as ResolvedKey);
          outcomes.answered(item.call.method, this.#cuOf(item), a.text);
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
    if (out.length === 0) return { ...noAnswer(headers, caller.key), ...(after ? { after } : {}) };
    return {
      status: allFailedUpstream ? UpstreamError.httpStatus : 200,
      body: `[${out.join(',')}]`,
      headers,
      keyRefused: false,
      key: caller.key,
      // C44: a batch every call of which memory answered is a hit as a whole.
      ...(forward.length === 0 && others.length === 0 && refused.length === 0 ? HIT : {}),
      ...(after ? { after } : {}),
    };
  }
}

/** What a split eth_getLogs or a filter call that no node answered counts as (its answer is the routed path's own). */
const ROUTED_FAILURE = new UpstreamError('Upstream RPC error: no upstream answered');

/**
 * C23: the answer under the caller's id. A node that could not read a call at all answers it with
 * id null (anvil for a lone surrogate escape such as "\ud800", which JSON.parse accepts, or a call
 * nested close to the gateway's limit); passed on as it is, that answer would never reach the
 * client's pending call. Only an answer whose id is null to a call with another id is rewritten:
 * the common answer is only read up to its id.
 */
function underCallerId<T extends Buffer | string>(body: T, item: ParsedCall): T | string {
  if (item.call.id === null || item.call.id === undefined || !answerIdIsNull(body)) return body;
  return withId(body.toString(), item.idText);
}

/** Puts the node's answers (ids = positions) back under the client's ids, bytes otherwise untouched. */
function matchBatch(forward: ParsedCall[], body: Buffer, answers: Map<number, string | null>): void {
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
      answers.set(index, withId(el, f.idText));
    }
  } else {
    // One error for the whole batch (some nodes refuse batches): every call gets it.
    let nodeError: unknown;
    try {
      nodeError = (JSON.parse(text) as { error?: unknown }).error;
    } catch {}
    const err = nodeError && typeof nodeError === 'object' ? JSON.stringify(nodeError) : JSON.stringify(new UpstreamError('Upstream RPC error: invalid batch answer').toJSON());
    for (const [index, f] of expected) answers.set(index, `{"jsonrpc":"2.0","id":${f.idText},"error":${err}}`);
    return;
  }
  for (const [index, f] of expected) answers.set(index, errorText(f.idText, new UpstreamError('Upstream RPC error: no answer for this call')));
}

/**
 * What the pool is told of a single call as judged (C53): the block it reads state at (archive
 * routing) and, for a signed transaction, the transaction itself (broadcast): nothing upstream
 * parses the call's text again.
 */
function forwardOptions(caller: Caller, item: ParsedCall, expectAnswer: boolean): CallOptions & { expectAnswer: boolean } {
  const { call } = item;
  const raw = methodFacts(call.method)?.contract === 'rawTx' && Array.isArray(call.params) ? (call.params as unknown[])[0] : undefined;
  return {
    expectAnswer,
    reqId: caller.requestId,
    block: blockNumberOf(item.block),
    transaction: typeof raw === 'string' && call.id !== undefined ? { raw, id: item.idText } : undefined,
  };
}

/** The oldest block the calls of a batch read state at, as judged (null: none named by number). */
function oldestBlock(items: ParsedCall[]): number | null {
  let oldest: number | null = null;
  for (const item of items) {
    const n = blockNumberOf(item.block);
    if (n !== null && (oldest === null || n < oldest)) oldest = n;
  }
  return oldest;
}
