import type { Logger } from 'pino';
import { type AnalyticsRecorder, NODE_ERROR, OK, UPSTREAM_ERROR } from '../analytics/recorder.ts';
import { ApiKeyRevokedError, InternalRpcError, InvalidApiKeyError, KeyAccessDeniedError, MethodNotSupportedError, NetworkNotAllowedError, NodeAnsweredError, QuotaExceededError, RateLimitedError, RpcError, UnknownNetworkError, UpstreamError } from '../errors/rpc.ts';
import { NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { answerErrorCode } from '../json/lossless.ts';
import type { ResolvedKey } from '../keys/cache.ts';
import type { ComputeUnits } from '../metering/weights.ts';
import type { RpcCallMetrics, RpcOutcome } from '../ops/metrics.ts';
import { NetworkDownError } from '../upstreams/pool.ts';
import { type Caller, UNSUBSCRIBE } from './message.ts';

/**
 * What the pipeline reports about each call: the metrics' counts by network, method, outcome and
 * code; C46 analytics (latency, errors, refusals) for calls of a known key; and the log lines of
 * refusals (debug) and upstream failures. Every method is synchronous and cheap when its sink is off.
 */
export class CallTally {
  readonly #metrics: RpcCallMetrics | undefined;
  readonly #analytics: AnalyticsRecorder | undefined;
  readonly #log: Logger;
  readonly #cu: ComputeUnits;

  constructor(deps: { metrics: RpcCallMetrics | undefined; analytics: AnalyticsRecorder | undefined; logger: Logger; cu: ComputeUnits }) {
    this.#metrics = deps.metrics;
    this.#analytics = deps.analytics;
    this.#log = deps.logger;
    this.#cu = deps.cu;
  }

  /** Whether answers must be read for analytics (latency and outcome per call of a key). */
  get analytics(): boolean {
    return this.#analytics !== undefined;
  }

  /**
   * Counts one call by network, method, outcome and code; `reqId` given: a refusal is also
   * logged at debug, with the request id and the reason (one line per request, not per item).
   */
  call(slug: string, method: string, err: RpcError | null, reqId?: string): void {
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

  /** C46: `calls` calls of a known key refused with `err` (counted under the error's reason). */
  refusedFor(key: ResolvedKey | null, slug: string, method: string, err: RpcError, calls = 1): void {
    if (key) this.#analytics?.refused(key.userId, key.keyId, slug, method, err, calls);
  }

  /** A batch's refused calls in one debug line: how many, and the first reason. */
  refusedLine(caller: Caller, first: RpcError, calls: number): void {
    if (!this.#log.isLevelEnabled('debug')) return;
    this.#log.debug(
      { reqId: caller.requestId, network: caller.network.slug, calls, status: first.httpStatus, code: first.code, reason: first.message },
      'rpc calls refused',
    );
  }

  /**
   * Counts a call by the answer it got: a result, or an error object with its code. Returns that
   * code (null: none), or undefined when nothing needed the answer read (no metrics, no analytics).
   */
  answer(slug: string, method: string, answer: string | Buffer | null): number | null | undefined {
    const m = this.#metrics;
    if (!m && !this.#analytics) return undefined;
    const code = answer === null || answer.length === 0 ? null : answerErrorCode(answer);
    if (!m) return code;
    if (code === null) m.ok(slug, method);
    else m.failed(slug, method, 'node_error', code);
    return code;
  }

  /** C46: one admitted call answered: its latency since arrival and whether a node or no node failed it. */
  observe(caller: Caller, key: ResolvedKey, method: string, upstreamFailed: boolean, answer: boolean | string | Buffer | null): void {
    const a = this.#analytics;
    // Not metered, so not a request of the key's either (eth_unsubscribe is admitted on a WebSocket only).
    if (!a || method === UNSUBSCRIBE) return;
    // `answer` is whether the node answered an error when that is known already, else the answer to read.
    const nodeError = typeof answer === 'boolean' ? answer : answer !== null && answer.length > 0 && answerErrorCode(answer) !== null;
    const outcome = upstreamFailed ? UPSTREAM_ERROR : nodeError ? NODE_ERROR : OK;
    a.call(key.userId, key.keyId, caller.network.slug, method, this.#cu.of(method), outcome, performance.now() - caller.at);
  }

  /** An upstream call that failed: one warn line (debug for a network already said to be down). */
  failure(caller: Caller, methods: string[], err: unknown): void {
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

  /** An upstream failure of a call answered without the pool's error (a split eth_getLogs, a filter). */
  upstreamFailed(slug: string, method: string): void {
    this.#metrics?.failed(slug, method, 'upstream_error', UpstreamError.code);
  }

  /** A call answered with a result from memory. */
  ok(slug: string, method: string): void {
    this.#metrics?.ok(slug, method);
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
