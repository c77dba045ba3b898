// The upstream nodes of one network (C26): the pool that ties health, choice and sending together.
import { type FailedAttempt, inWords, NetworkDownError, NoUpstreamError, UpstreamRpcError } from '../../errors/upstream.ts';
import { looksLikeJsonRpc } from './answers.ts';
import { attempt } from './attempt.ts';
import { consensusForward, consensusStats, isConsensusCall } from './consensus.ts';
import { finalError, request, send } from './failover.ts';
import { agreedHead, bestHead, checkHealth, healthReport, isDown, jumpCeiling, markFailed, markOk, startProbes } from './health.ts';
import { maybeSample, samplingStats } from './sampling.ts';
import { observe, PoolState } from './state.ts';
import type { CallOptions, ConsensusStats, ForwardResult, PoolOptions, SamplingStats, UpstreamCallStats, UpstreamHealth } from './types.ts';

export { type FailedAttempt, NetworkDownError, NoUpstreamError, UpstreamRpcError };
export { agreedHead, inWords, looksLikeJsonRpc };
export {
  type CallOptions,
  type ConsensusStats,
  type FailureKind,
  type ForwardResult,
  type PoolLogger,
  type PoolOptions,
  type SamplingOptions,
  type SamplingStats,
  UPSTREAM_BUCKETS,
  type UpstreamCallStats,
  type UpstreamConfig,
  type UpstreamHealth,
  type UpstreamState,
} from './types.ts';

/**
 * The upstream nodes of one network: health and head tracking, selection and failover (C26).
 *
 * The parts live beside it, each over the pool's shared {@link PoolState}: health.ts (probes,
 * states, heads), choice.ts (order, archive routing, weights), failover.ts (sending, hedging, the
 * `maybeSent` rule), broadcast.ts (transactions to every node), consensus.ts (C49 reads),
 * sampling.ts (C55 checks of answers in the background) and attempt.ts (one undici attempt).
 * While the probes run and every upstream is known to be down, calls fail at once
 * ({@link NetworkDownError}); the first good probe lifts that.
 */
export class UpstreamPool {
  readonly network: string;
  readonly #p: PoolState;
  readonly #first: Promise<void>;

  constructor(opts: PoolOptions) {
    this.#p = new PoolState(opts);
    this.network = this.#p.network;
    this.#first = new Promise<void>((resolve) => (this.#p.onFirstRound = resolve));
  }

  /**
   * Starts the periodic health probes (one round at once); the timers do not keep the process alive.
   * `quietFirst`: the first round's states are logged at debug (the start sums every network up).
   */
  start(opts: { quietFirst?: boolean } = {}): void {
    const p = this.#p;
    if (p.started || p.closed) return;
    p.quietFirst = opts.quietFirst === true;
    startProbes(p);
  }

  /** Resolves once the first probe round is over (never, for a pool whose probes never start). */
  firstRound(): Promise<void> {
    return this.#first;
  }

  /** Stops the probes, aborts calls still running and closes the connections. */
  async close(): Promise<void> {
    const p = this.#p;
    if (p.closed) return;
    p.closed = true;
    clearTimeout(p.timer);
    // destroy() fails the calls still running at once (they end as "pool closed").
    await Promise.all(p.upstreams.map((u) => u.dispatcher.destroy().catch(() => undefined)));
  }

  /**
   * Probes every upstream once with `eth_blockNumber` and records head, latency or failure.
   * Never rejects. {@link start} runs it periodically; tests and readiness checks may call it.
   */
  checkHealth(): Promise<void> {
    return checkHealth(this.#p);
  }

  /**
   * The network's head: the highest that at least half of the answering upstreams reach within
   * `maxLagBlocks`, never a jump further than the chain could have moved (one node far ahead is
   * an outlier, not proof that the others lag), or null before any probe answered. Set when
   * heads or states change, read here as it is. See {@link agreedHead}.
   */
  head(): number | null {
    return bestHead(this.#p);
  }

  /**
   * Whether a head one upstream announces (a `newHeads` block) may be passed on as the network's
   * (C26): with two upstreams or more, only once the probes set a head and not further above
   * it than the chain could have moved; one upstream alone is its own head.
   */
  believes(head: number): boolean {
    const p = this.#p;
    if (p.upstreams.length < 2) return true;
    return p.lastHead >= 0 && head <= jumpCeiling(p, p.now());
  }

  /** C49: whether a call of `method` is a consensus read on this network (the caller sends such calls one by one). */
  isConsensusRead(method: string): boolean {
    return this.#p.consensus?.methods.has(method) === true;
  }

  /**
   * Sends a serialised JSON-RPC request or batch and returns the first acceptable answer unchanged.
   * `methods` lists the method(s) in it: they pick the timeout and whether failover is allowed.
   * A JSON-RPC error answered by a node is an answer, not a failure. A single call of a
   * consensus method (C49) goes to several nodes instead (consensus.ts). A share of the answers
   * to single reads is checked against another node after it is returned (C55, sampling.ts).
   *
   * @throws NoUpstreamError when no upstream answered within `totalTimeoutMs`.
   * @throws NoConsensusError when the nodes asked for a consensus read have no majority (C49).
   * @throws TooFewNodesError when fewer nodes than `consensus.nodes` agreed on a consensus read, none contradicting them (C49).
   */
  async forward(body: string | Buffer, methods: readonly string[], opts: CallOptions & { expectAnswer?: boolean } = {}): Promise<ForwardResult> {
    const c = this.#p.consensus;
    // C49: a single call of a consensus method is answered only when nodes agree (consensus.ts).
    if (c !== undefined && opts.expectAnswer !== false && isConsensusCall(this.#p, body, methods)) {
      return consensusForward(this.#p, c, body, methods[0] as string, opts);
    }
    // Notifications only: nodes answer 2xx with an empty body, which is a success here.
    const quiet = opts.expectAnswer === false;
    const { value, upstream } = await send(
      this.#p,
      body,
      methods,
      (status, buf) => (looksLikeJsonRpc(buf) || (quiet && status >= 200 && status < 300) ? { status, body: buf } : undefined),
      opts,
    );
    // C55: checked in the background, once the answer is on its way.
    const s = this.#p.sampling;
    if (s !== undefined && methods.length === 1 && !quiet) maybeSample(this.#p, s, body, methods[0] as string, upstream, value.body);
    // Built whole, not spread: a spread gives the object its shape property by property on every call.
    return { status: value.status, body: value.body, upstream };
  }

  /**
   * {@link forward} to one upstream only (its config index), without failover or hedging: for
   * state that lives on one node, such as a filter made by `eth_newFilter`.
   *
   * @throws NoUpstreamError when that upstream does not exist or gave no acceptable answer.
   */
  async forwardTo(upstream: number, body: string | Buffer, methods: readonly string[], opts: CallOptions = {}): Promise<ForwardResult> {
    const p = this.#p;
    const u = p.upstreams[upstream];
    if (!u || p.closed) throw new NoUpstreamError(p.network, [{ upstream, reason: 'no such upstream' }]);
    let attemptMs = p.requestTimeoutMs;
    for (const m of methods) attemptMs = Math.max(attemptMs, p.methodTimeoutsMs[m] ?? p.requestTimeoutMs);
    const startedAt = performance.now();
    const outcome = await attempt(p, u, body, Math.min(attemptMs, p.totalTimeoutMs), (status, buf) => (looksLikeJsonRpc(buf) ? { status, body: buf } : undefined));
    observe(u.calls, (performance.now() - startedAt) / 1000);
    if (outcome.ok) {
      markOk(p, u, opts.reqId);
      return { status: outcome.value.status, body: outcome.value.body, upstream };
    }
    u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
    if (!p.closed && !outcome.final) markFailed(p, u, outcome.reason, opts.reqId);
    throw finalError(p, outcome.kind, [{ upstream, reason: outcome.reason }]);
  }

  /**
   * One call for internal callers (faucet, health, devnet): the parsed `result`.
   *
   * @throws UpstreamRpcError carrying the node's JSON-RPC error object.
   * @throws NoUpstreamError when no upstream answered.
   */
  request<T = unknown>(method: string, params: readonly unknown[], opts: CallOptions = {}): Promise<T> {
    return request<T>(this.#p, method, params, opts.reqId);
  }

  /** Each upstream's state, by config index (C3 reports it; names, never URLs). */
  health(): UpstreamHealth[] {
    return healthReport(this.#p);
  }

  /** True while the probes run and every upstream is known to be down: calls fail at once. */
  isDown(): boolean {
    return isDown(this.#p);
  }

  /** Per upstream: the calls sent to it (durations, failures by kind), for /metrics. */
  callStats(): UpstreamCallStats[] {
    return this.#p.upstreams.map((u) => ({ index: u.index, name: u.name, ...u.calls }));
  }

  /** C55: what the sampled checks of answers came to (all zero while sampling is off). */
  samplingStats(): SamplingStats {
    return samplingStats(this.#p);
  }

  /** C49: what the consensus reads came to, by method and outcome (empty while consensus is off). */
  consensusStats(): ConsensusStats {
    return consensusStats(this.#p);
  }

  /** C55: resolves once the sampled checks under way now are over (tests, and a stop that wants them done). */
  async samplesSettled(): Promise<void> {
    await Promise.all([...this.#p.samples.running]);
  }
}
