// What became of each call of a message, and how it is recorded: once, when the message is
// answered. The pipeline's stages (rpc/pipeline.ts) and the dispatcher only write down outcomes
// in the message's Outcomes; Settlement.settle reads them for the metrics, the C46 analytics and
// the log lines.
import type { Logger } from 'pino';
import { type AnalyticsRecorder, NODE_ERROR, OK, UPSTREAM_ERROR } from '../analytics/recorder.ts';
import { ApiKeyRevokedError, InternalRpcError, InvalidApiKeyError, KeyAccessDeniedError, MethodNotSupportedError, NetworkNotAllowedError, NodeAnsweredError, QuotaExceededError, RateLimitedError, RpcError, UnknownNetworkError, UpstreamError } from '../errors/rpc.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { answerErrorCode } from '../json/lossless.ts';
import type { ResolvedKey } from '../keys/cache.ts';
import type { RpcCallMetrics, RpcOutcome } from '../ops/metrics.ts';
import { NetworkDownError } from '../upstreams/http/pool.ts';

/** The stage that gave a call its outcome (rpc/pipeline.ts runs them in this order). */
export type Stage = 'read' | 'admit' | 'split' | 'judge' | 'cost' | 'meter' | 'dispatch';

/** The outcome of one call, or of a message refused whole. */
export interface Outcome {
  stage: Stage;
  method: string;
  /** The error the gateway answered (a refusal, or an upstream failure); null: an answer went back. */
  err: RpcError | null;
  /**
   * The answer sent, when it came from a node and may hold an error object (read at settlement,
   * only when metrics or analytics want it); undefined: known to be a result (the cache, `nat_*`).
   */
  answer?: string | Buffer | null;
  /** The calls it stands for: a batch refused whole stands for each of its calls (C46a). */
  calls: number;
  /** Compute units of a dispatched call (C10), for the analytics. */
  cu: number;
}

/** The list of a message with no outcome yet: shared, never added to (see `Outcomes.list`). */
const NONE: Outcome[] = Object.freeze([]) as unknown as Outcome[];

/**
 * The outcomes of one message, in the order they were given. A message refused whole has one;
 * otherwise one per call that reached a verdict (a notification's too: it was still a call).
 */
export class Outcomes {
  /**
   * The outcomes in order. Made with its first one: a message of one call then holds a list of
   * one, where a push into an empty list reserves sixteen (the cached path's garbage per call).
   */
  list: Outcome[] = NONE;
  /** Network name for the metrics (`unknown` for an address naming none). */
  slug: string;
  readonly requestId: string | undefined;
  /** The key whose account the calls count for (C46); null: none (public endpoint, unknown key). */
  key: ResolvedKey | null = null;
  /** Whether the message was a single call (its refusal is one log line of its own). */
  single = true;
  /** `performance.now()` at arrival (C46 latency); 0 when analytics are off. */
  at = 0;
  /** Upstream failures to log: the methods of the call (or forwarded batch) and the cause. */
  failures: Array<{ methods: string[]; cause: unknown }> | undefined;

  constructor(slug: string, requestId: string | undefined) {
    this.slug = slug;
    this.requestId = requestId;
  }

  /** A call (or a whole message: `calls`) refused at `stage`. */
  refused(stage: Stage, method: string, err: RpcError, calls = 1): void {
    this.#add({ stage, method, err, calls, cu: 0 });
  }

  /** A dispatched call answered: `answer` is a node's answer to read, or undefined for a result. */
  answered(method: string, cu: number, answer?: string | Buffer | null): void {
    this.#add({ stage: 'dispatch', method, err: null, answer, calls: 1, cu });
  }

  /** A dispatched call answered with the gateway's error `err` (a node failed it, or it could not be translated). */
  failed(method: string, cu: number, err: RpcError): void {
    this.#add({ stage: 'dispatch', method, err, calls: 1, cu });
  }

  #add(o: Outcome): void {
    if (this.list === NONE) this.list = [o];
    else this.list.push(o);
  }

  /** An upstream failure to log once: the methods it failed and why (an RpcError is the node's or ours, said in the answer). */
  failure(methods: string[], cause: unknown): void {
    if (cause instanceof UpstreamRpcError || cause instanceof RpcError) return;
    (this.failures ??= []).push({ methods, cause });
  }
}

/**
 * Records a message's outcomes, once: the metrics' counts by network, method, outcome and code;
 * C46 analytics for a known key (latency and outcome of each dispatched call, refusals by reason);
 * a debug line for refusals (one per message) and a warn line per upstream failure. Cheap when a
 * sink is off: an answer is read for its error code only when metrics or analytics want it.
 */
export class Settlement {
  readonly #metrics: RpcCallMetrics | undefined;
  readonly #analytics: AnalyticsRecorder | undefined;
  readonly #log: Logger;

  constructor(deps: { metrics: RpcCallMetrics | undefined; analytics: AnalyticsRecorder | undefined; logger: Logger }) {
    this.#metrics = deps.metrics;
    this.#analytics = deps.analytics;
    this.#log = deps.logger;
  }

  /** Whether calls must carry their arrival time (C46 latency). */
  get timed(): boolean {
    return this.#analytics !== undefined;
  }

  /** C46a: `calls` refused calls of `key` (null: none to count for), in the analytics only. */
  refusedFor(key: ResolvedKey | null, slug: string, method: string, err: RpcError, calls = 1): void {
    if (key) this.#analytics?.refused(key.userId, key.keyId, slug, method, err, calls);
  }

  settle(o: Outcomes): void {
    const m = this.#metrics;
    const a = this.#analytics;
    const key = o.key;
    let refusals = 0;
    let first: Outcome | undefined;
    for (const c of o.list) {
      const err = c.err;
      // A node's answer is read once, for both sinks.
      const code = err !== null || c.answer === undefined || (!m && !a) ? null : c.answer === null || c.answer.length === 0 ? null : answerErrorCode(c.answer);
      if (m) {
        if (err !== null) m.failed(o.slug, c.method, outcomeOf(err), err.code);
        else if (code === null) m.ok(o.slug, c.method);
        else m.failed(o.slug, c.method, 'node_error', code);
      }
      if (c.stage === 'dispatch') {
        // C46: an admitted call answered, its latency since arrival; a gateway error of 5xx is an upstream failure.
        if (a && key) a.call(key.userId, key.keyId, o.slug, c.method, c.cu, err !== null ? (err.httpStatus >= 500 ? UPSTREAM_ERROR : NODE_ERROR) : code !== null ? NODE_ERROR : OK, performance.now() - o.at);
        continue;
      }
      refusals += c.calls;
      first ??= c;
      // C46a: counted for the key's account under its reason (errors that are no refusal are not counted).
      if (a && key && err) a.refused(key.userId, key.keyId, o.slug, c.method, err, c.calls);
    }
    if (first?.err && this.#log.isLevelEnabled('debug')) {
      const { err } = first;
      const line = { reqId: o.requestId, network: o.slug, status: err.httpStatus, code: err.code, reason: err.message };
      if (o.single || first.calls > 1) this.#log.debug({ ...line, method: first.method }, 'rpc call refused');
      else this.#log.debug({ ...line, calls: refusals }, 'rpc calls refused');
    }
    if (o.failures) for (const f of o.failures) this.#failure(o, f.methods, f.cause);
  }

  /** An upstream call that failed: one warn line (debug for a network already said to be down). */
  #failure(o: Outcomes, methods: string[], cause: unknown): void {
    const line = {
      reqId: o.requestId,
      network: o.slug,
      methods: methods.slice(0, 5),
      ...(cause instanceof NoUpstreamError ? { attempts: cause.attempts } : { err: cause }),
      error: (cause as Error).name,
    };
    // A network known to be down was said so once (the pool's "0 of n upstreams answer"): each
    // call refused for it is only a debug line.
    if (cause instanceof NetworkDownError) this.#log.debug(line, 'upstream call failed: no upstream answers');
    else this.#log.warn(line, 'upstream call failed');
  }
}

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

/** How a gateway error counts in the metrics. */
export function outcomeOf(err: RpcError): RpcOutcome {
  if (err instanceof NodeAnsweredError) return 'node_error';
  // C46a: the key's own allowlists share -32003 with the network refusal, but are their own reason.
  if (err instanceof KeyAccessDeniedError) return 'refused_access';
  return OUTCOME_BY_CODE.get(err.code) ?? 'invalid';
}
