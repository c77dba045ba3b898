import { createSecureContext, type SecureContext } from 'node:tls';
import { Pool } from 'undici';
import { type FailedAttempt, NetworkDownError, NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';
import { mayNeedArchive, needsArchive } from './archive.ts';
import { classifyTxAnswer, hashAnswer, rawTransaction } from './broadcast.ts';
import { Cancel, type HedgeOptions, hedgeDelay, LatencyWindow, NEVER_HEDGED } from './hedge.ts';
import { DEFAULT_PROVIDER_ERRORS, ProviderErrors, type ProviderVerdict } from './provider-errors.ts';
import { looksLikeJsonRpc, parseHead, parseResponse } from './answers.ts';
import {
  type CallOptions,
  type FailureKind,
  type ForwardResult,
  type PoolLogger,
  type PoolOptions,
  STATE_CHANGING_METHODS,
  UPSTREAM_BUCKETS,
  type UpstreamCallStats,
  type UpstreamHealth,
  type UpstreamState,
} from './types.ts';

export { type FailedAttempt, NetworkDownError, NoUpstreamError, UpstreamRpcError };
export { looksLikeJsonRpc };
export {
  type CallOptions,
  type FailureKind,
  type ForwardResult,
  type PoolLogger,
  type PoolOptions,
  STATE_CHANGING_METHODS,
  UPSTREAM_BUCKETS,
  type UpstreamCallStats,
  type UpstreamConfig,
  type UpstreamHealth,
  type UpstreamState,
} from './types.ts';

interface Upstream {
  readonly index: number;
  readonly name: string;
  readonly dispatcher: Pool;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  head: number | null;
  latencyMs: number | null;
  failures: number;
  unhealthyUntil: number;
  lastError: string | undefined;
  state: UpstreamState;
  readonly calls: { buckets: Float64Array; sum: number; count: number; errors: Map<FailureKind, number> };
  readonly archive: boolean;
  readonly weight: number;
  /** Smooth weighted round robin: the running score. */
  current: number;
  /** Group from the last sort (answering, lagging, unknown, down): weights share the calls within one. */
  tier: number;
  /** Durations of its recent calls (the hedge delay is their p90). */
  readonly window: LatencyWindow;
}

/** `final`: no other node would do better (e.g. an answer over the size cap): stop failing over. */
type Attempt<T> = { ok: true; value: T } | { ok: false; reason: string; kind: FailureKind; sent: boolean; final?: boolean };

let tlsContext: SecureContext | undefined;
/** The TLS context shared by the upstream pools' connections (made on first use). */
function sharedTlsContext(): SecureContext {
  return (tlsContext ??= createSecureContext());
}

const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
const LATENCY_WEIGHT = 0.3; // weight of a new sample in the moving average
const LATENCY_CLASS_MS = 20; // milliseconds; see latencyClass()

// Errors raised before the request could be written: safe to move on even for a transaction.
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * The upstream nodes of one network: health and head tracking, selection and failover (C26).
 *
 * An upstream is healthy only once it answered. Selection order: answering and not lagging, then
 * answering but lagging, then not heard from yet, then failed (last resort, soonest to recover
 * first); within a group the faster latency class first, then config order, so the operator's
 * order holds unless a node is clearly faster. While the probes run and every upstream is known
 * to be down, calls fail at once ({@link NetworkDownError}); the first good probe lifts that.
 */
export class UpstreamPool {
  readonly network: string;
  private readonly upstreams: Upstream[];
  private readonly requestTimeoutMs: number;
  private readonly methodTimeoutsMs: Readonly<Record<string, number>>;
  private readonly totalTimeoutMs: number;
  private readonly maxLagBlocks: number;
  private readonly healthIntervalMs: number;
  private readonly maxResponseBytes: number;
  private readonly log: PoolLogger | undefined;
  private readonly onHead: ((head: number) => void) | undefined;
  private readonly providerErrors: ProviderErrors;
  private readonly hedge: HedgeOptions | undefined;
  private readonly broadcastTransactions: boolean;
  private readonly pruneDepthBlocks: number;
  /** Some upstreams are archive nodes and some are not: old-state reads are worth routing. */
  private readonly mixedArchive: boolean;
  /** Some upstream has a weight: equally good upstreams share the calls. */
  private readonly weighted: boolean;
  private lastHead = -1;
  private ordered: Upstream[] | null = null;
  private orderedUntil = 0;
  /** The best head, kept as long as `ordered` is. */
  private best: number | null | undefined;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private nextId = 1;
  /** Upstreams whose state is `down`: all of them means the network is down. */
  private downCount = 0;
  /** Probe rounds under way (a round reports once at its end, not per upstream). */
  private probing = 0;
  /** The states last reported in the log ("x of n upstreams answer"), to report changes only. */
  private announced: string | undefined;

  constructor(opts: PoolOptions) {
    this.network = opts.network;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.methodTimeoutsMs = opts.methodTimeoutsMs ?? {};
    this.totalTimeoutMs = opts.totalTimeoutMs ?? 15_000;
    this.maxLagBlocks = opts.maxLagBlocks ?? 5;
    this.healthIntervalMs = opts.healthIntervalMs ?? 5_000;
    this.maxResponseBytes = opts.maxResponseBytes ?? 64 * 1024 * 1024;
    this.log = opts.logger;
    this.onHead = opts.onHead;
    this.providerErrors = new ProviderErrors(opts.providerErrors ?? DEFAULT_PROVIDER_ERRORS);
    this.hedge = opts.hedge?.enabled ? opts.hedge : undefined;
    this.broadcastTransactions = opts.broadcastTransactions ?? false;
    this.pruneDepthBlocks = opts.pruneDepthBlocks ?? 128;
    this.mixedArchive = opts.upstreams.some((u) => u.archive === true) && opts.upstreams.some((u) => u.archive !== true);
    this.weighted = opts.upstreams.some((u) => u.weight !== undefined);
    const connections = opts.connections ?? 32;
    this.upstreams = opts.upstreams.map((cfg, index) => {
      let url: URL;
      try {
        url = new URL(cfg.http);
      } catch {
        throw new Error(`network ${opts.network}: upstream ${index} has an invalid URL`);
      }
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
      if (url.username || url.password) {
        const user = decodeURIComponent(url.username);
        const pass = decodeURIComponent(url.password);
        headers.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
      }
      // undici's default keep-alive (4 s) stays below Node's server default (5 s), so a POST is
      // rarely written on a socket the node already closed: undici does not retry POSTs.
      // One TLS context (the default CA store) for every HTTPS upstream: without it each new
      // connection builds its own, ~0.3 ms of CPU and its garbage per connect or reconnect.
      const tls = url.protocol === 'https:' ? { connect: { secureContext: sharedTlsContext() } } : {};
      const dispatcher = new Pool(url.origin, { connections, pipelining: 1, ...tls });
      return {
        index,
        name: cfg.name ?? `${opts.network}-${index}`,
        dispatcher,
        path: `${url.pathname}${url.search}`,
        headers,
        head: null,
        latencyMs: null,
        failures: 0,
        unhealthyUntil: 0,
        lastError: undefined,
        state: 'unknown',
        calls: { buckets: new Float64Array(UPSTREAM_BUCKETS.length + 1), sum: 0, count: 0, errors: new Map<FailureKind, number>() },
        archive: cfg.archive === true,
        weight: cfg.weight ?? 1,
        current: 0,
        tier: 0,
        window: new LatencyWindow(),
      } satisfies Upstream;
    });
  }

  /** Starts the periodic health probes (one round at once); the timers do not keep the process alive. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    const tick = async (): Promise<void> => {
      await this.checkHealth();
      if (this.closed) return;
      this.timer = setTimeout(tick, this.healthIntervalMs);
      this.timer.unref();
    };
    void tick();
  }

  /** Stops the probes, aborts calls still running and closes the connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    // destroy() fails the calls still running at once (they end as "pool closed").
    await Promise.all(this.upstreams.map((u) => u.dispatcher.destroy().catch(() => undefined)));
  }

  /**
   * Probes every upstream once with `eth_blockNumber` and records head, latency or failure.
   * Never rejects. {@link start} runs it periodically; tests and readiness checks may call it.
   */
  async checkHealth(): Promise<void> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
    // A probe slower than the interval means the node is in trouble; at least 1 s for slow links.
    const timeoutMs = Math.min(this.requestTimeoutMs, Math.max(this.healthIntervalMs, 1_000));
    this.probing++;
    try {
      await Promise.all(
        this.upstreams.map(async (u) => {
          const startedAt = performance.now();
          const outcome = await this.attempt(u, body, timeoutMs, (_status, buf) => parseHead(buf));
          if (this.closed) return;
          if (!outcome.ok) {
            // A 200 that is not a block number: the node answers, but not as a node should.
            this.markFailed(u, outcome.kind === 'invalid_answer' ? `${outcome.reason} to eth_blockNumber` : outcome.reason);
            return;
          }
          const sample = performance.now() - startedAt;
          u.latencyMs = u.latencyMs === null ? sample : u.latencyMs + LATENCY_WEIGHT * (sample - u.latencyMs);
          u.head = outcome.value;
          this.markOk(u);
        }),
      );
    } finally {
      this.probing--;
    }
    if (this.closed) return;
    // One line per round at most, and only when something changed (the first round always says).
    this.announce();
    this.invalidate(); // heads and latencies changed
    const best = this.bestHead(Date.now());
    if (best !== null && best > this.lastHead) {
      this.lastHead = best;
      this.onHead?.(best);
    }
  }

  /**
   * The best known head: the highest head that at least two healthy upstreams agree on within
   * `maxLagBlocks` (one node far ahead is an outlier, not proof that the others lag), or null
   * before any probe answered. See {@link agreedHead}.
   */
  head(): number | null {
    return this.bestHead(Date.now());
  }

  /**
   * Sends a serialised JSON-RPC request or batch and returns the first acceptable answer unchanged.
   * `methods` lists the method(s) in it: they pick the timeout and whether failover is allowed.
   * A JSON-RPC error answered by a node is an answer, not a failure.
   *
   * @throws NoUpstreamError when no upstream answered within `totalTimeoutMs`.
   */
  async forward(body: string | Buffer, methods: readonly string[], opts: CallOptions & { expectAnswer?: boolean } = {}): Promise<ForwardResult> {
    // Notifications only: nodes answer 2xx with an empty body, which is a success here.
    const quiet = opts.expectAnswer === false;
    const { value, upstream } = await this.send(
      body,
      methods,
      (status, buf) => (looksLikeJsonRpc(buf) || (quiet && status >= 200 && status < 300) ? { status, body: buf } : undefined),
      opts.reqId,
    );
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
    const u = this.upstreams[upstream];
    if (!u || this.closed) throw new NoUpstreamError(this.network, [{ upstream, reason: 'no such upstream' }]);
    let attemptMs = this.requestTimeoutMs;
    for (const m of methods) attemptMs = Math.max(attemptMs, this.methodTimeoutsMs[m] ?? this.requestTimeoutMs);
    const startedAt = performance.now();
    const outcome = await this.attempt(u, body, Math.min(attemptMs, this.totalTimeoutMs), (status, buf) => (looksLikeJsonRpc(buf) ? { status, body: buf } : undefined));
    observe(u.calls, (performance.now() - startedAt) / 1000);
    if (outcome.ok) {
      this.markOk(u, opts.reqId);
      return { status: outcome.value.status, body: outcome.value.body, upstream };
    }
    u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
    if (!this.closed && !outcome.final) this.markFailed(u, outcome.reason, opts.reqId);
    throw new NoUpstreamError(this.network, [{ upstream, reason: outcome.reason }]);
  }

  /**
   * One call for internal callers (faucet, health, devnet): the parsed `result`.
   *
   * @throws UpstreamRpcError carrying the node's JSON-RPC error object.
   * @throws NoUpstreamError when no upstream answered.
   */
  async request<T = unknown>(method: string, params: readonly unknown[], opts: CallOptions = {}): Promise<T> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params });
    const { value, upstream } = await this.send(body, [method], (_status, buf) => parseResponse(buf), opts.reqId);
    if (value.error !== undefined) {
      const { code, message, data } = value.error;
      throw new UpstreamRpcError(
        typeof code === 'number' ? code : -32603,
        typeof message === 'string' ? message : 'upstream error',
        data,
        upstream,
      );
    }
    return value.result as T;
  }

  /** Each upstream's state, by config index (C3 reports it; names, never URLs). */
  health(): UpstreamHealth[] {
    const best = this.bestHead(Date.now());
    return this.upstreams.map((u) => ({
      index: u.index,
      name: u.name,
      state: u.state,
      healthy: u.state === 'up',
      head: u.head,
      lag: u.head === null || best === null ? null : Math.max(0, best - u.head),
      latencyMs: u.latencyMs === null ? null : Math.round(u.latencyMs),
      ...(u.lastError === undefined ? {} : { lastError: inWords(u.lastError) }),
      ...(u.head !== null && best !== null && u.head - best > this.maxLagBlocks ? { outlier: true as const } : {}),
    }));
  }

  /** True while the probes run and every upstream is known to be down: calls fail at once. */
  isDown(): boolean {
    return this.started && this.upstreams.length > 0 && this.downCount === this.upstreams.length;
  }

  /** Per upstream: the calls sent to it (durations, failures by kind), for /metrics. */
  callStats(): UpstreamCallStats[] {
    return this.upstreams.map((u) => ({ index: u.index, name: u.name, ...u.calls }));
  }

  private async send<T>(
    body: string | Buffer,
    methods: readonly string[],
    read: (status: number, body: Buffer) => T | undefined,
    reqId: string | undefined,
  ): Promise<{ value: T; upstream: number }> {
    if (this.isDown()) {
      // Known down: no node is asked (the probes keep asking), the caller learns it at once.
      throw new NetworkDownError(
        this.network,
        this.upstreams.map((u) => ({ upstream: u.index, reason: u.lastError ?? 'down' })),
      );
    }
    const deadline = Date.now() + this.totalTimeoutMs;
    const stateChanging = methods.some((m) => STATE_CHANGING_METHODS.has(m));
    let attemptMs = methods.length === 0 ? this.requestTimeoutMs : 0;
    for (const m of methods) attemptMs = Math.max(attemptMs, this.methodTimeoutsMs[m] ?? this.requestTimeoutMs);
    const candidates = this.closed ? [] : this.candidates(body, methods);
    if (stateChanging && this.broadcastTransactions && methods.length === 1 && methods[0] === 'eth_sendRawTransaction') {
      const targets = candidates.filter((u) => u.state !== 'down');
      const tx = targets.length > 1 ? rawTransaction(body) : null;
      if (tx) return this.broadcast(targets, body, tx, Math.min(attemptMs, this.totalTimeoutMs), read, reqId);
    }
    const hedge = this.hedge !== undefined && !stateChanging && candidates.length > 1 && !methods.some((m) => NEVER_HEDGED.has(m)) ? this.hedge : undefined;
    // Issue 15: a read answered with a provider error moves on; a transaction's answer is final (C26).
    const judge = !stateChanging && this.providerErrors.active;
    const judged = (status: number, buf: Buffer): Judged<T> | undefined => {
      const value = read(status, buf);
      return value === undefined ? undefined : { value, verdict: judge ? this.providerErrors.judge(buf) : null };
    };
    const tally: Tally<T> = { failed: [], fallback: undefined };
    const call = { reqId, methods, stateChanging };
    if (hedge === undefined) {
      // No second node can be asked while one is asked: one attempt after the other, awaited
      // directly (the common case, and the hot path's: no race, no bookkeeping per attempt).
      for (const u of candidates) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) break;
        const startedAt = performance.now();
        const outcome = await this.attempt(u, body, Math.min(attemptMs, remaining), judged);
        const step = this.settle(u, outcome, performance.now() - startedAt, tally, call);
        if (step === 'stop') break;
        if (step !== 'next') return step;
      }
    } else {
      const running: Array<Run<Judged<T>>> = [];
      let next = 0;
      const launch = (): void => {
        const remaining = deadline - Date.now();
        const u = candidates[next];
        if (u === undefined || remaining <= 0) return;
        next++;
        const ctrl = new Cancel();
        const run: Run<Judged<T>> = { u, ctrl, startedAt: performance.now(), done: undefined as never };
        run.done = this.attempt(u, body, Math.min(attemptMs, remaining), judged, ctrl).then((outcome) => ({ run, outcome }));
        running.push(run);
      };
      launch();
      try {
        while (running.length > 0) {
          let settled: Settled<Judged<T>> | null;
          const only = running.length === 1 ? running[0] : undefined;
          if (only && next < candidates.length && deadline > Date.now()) {
            // Issue 15: not answered within the hedge delay, the read also goes to the next node.
            settled = await withinMs(only.done, hedgeDelay(hedge, only.u.window) - (performance.now() - only.startedAt));
            if (settled === null) {
              this.log?.debug({ reqId, network: this.network, upstream: only.u.index, name: only.u.name, methods }, 'read hedged to the next upstream');
              launch();
              continue;
            }
          } else {
            settled = only ? await only.done : await Promise.race(running.map((r) => r.done));
          }
          const { run, outcome } = settled;
          running.splice(running.indexOf(run), 1);
          const u = run.u;
          const step = this.settle(u, outcome, performance.now() - run.startedAt, tally, call);
          if (step === 'stop') break;
          if (step !== 'next') return step;
          if (running.length === 0 && !this.closed) launch();
        }
      } finally {
        // The loser of a hedge is cancelled; how long it took so far still says how slow its node is.
        for (const r of running) {
          r.ctrl?.abort();
          r.u.window.add(performance.now() - r.startedAt);
        }
      }
    }
    const { failed, fallback } = tally;
    if (fallback) return { value: fallback.value, upstream: fallback.upstream };
    throw new NoUpstreamError(this.network, failed);
  }

  /**
   * What one attempt of {@link send} means for the call: the answer; or 'next' after a provider
   * error (kept as the fallback answer) or a failure (counted, the node marked); 'stop' when the
   * pool closed. Throws when no other node may be asked.
   */
  private settle<T>(
    u: Upstream,
    outcome: Attempt<Judged<T>>,
    ms: number,
    tally: Tally<T>,
    call: { reqId: string | undefined; methods: readonly string[]; stateChanging: boolean },
  ): { value: T; upstream: number } | 'next' | 'stop' {
    observe(u.calls, ms / 1000);
    const { reqId, methods } = call;
    if (outcome.ok && outcome.value.verdict === null) {
      u.window.add(ms);
      this.markOk(u, reqId);
      return { value: outcome.value.value, upstream: u.index };
    }
    if (outcome.ok) {
      const verdict = outcome.value.verdict as ProviderVerdict;
      const kind: FailureKind = verdict.kind === 'busy' ? 'node_busy' : 'node_missing';
      u.calls.errors.set(kind, (u.calls.errors.get(kind) ?? 0) + 1);
      tally.failed.push({ upstream: u.index, reason: verdict.reason });
      this.log?.debug({ reqId, network: this.network, upstream: u.index, name: u.name, reason: verdict.reason, methods }, 'upstream attempt failed');
      // A throttling node cools down like after a 429; one missing old state still serves the rest.
      if (verdict.kind === 'busy') this.markFailed(u, verdict.reason, reqId);
      else this.markOk(u, reqId);
      // The user sees a node's own error only when every node gave one: a missing-data answer
      // speaks about the request, a throttling one only about that node.
      const fallback = tally.fallback;
      if (!fallback || verdict.kind === 'missing' || fallback.kind === 'busy') tally.fallback = { value: outcome.value.value, upstream: u.index, kind: verdict.kind };
      return 'next';
    }
    u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
    tally.failed.push({ upstream: u.index, reason: outcome.reason });
    if (this.closed) return 'stop';
    this.log?.debug({ reqId, network: this.network, upstream: u.index, name: u.name, reason: outcome.reason, methods }, 'upstream attempt failed');
    if (outcome.final) throw new NoUpstreamError(this.network, tally.failed);
    this.markFailed(u, outcome.reason, reqId);
    // C26: a transaction that may have reached a node is not sent again elsewhere.
    if (call.stateChanging && outcome.sent) throw new NoUpstreamError(this.network, tally.failed, true);
    return 'next';
  }

  /**
   * Issue 15: a signed transaction goes to every healthy upstream at once, each exactly once. The
   * first hash answered wins; "already known" is success too (answered with the transaction's
   * hash), and so is "nonce too low" when the chain has this very transaction. Otherwise, once
   * every node is done, a node's refusal is the answer; with none, -32000 with `maybeSent` when
   * any node may have received it (C26: nothing is sent twice).
   */
  private broadcast<T>(
    targets: readonly Upstream[],
    body: string | Buffer,
    tx: NonNullable<ReturnType<typeof rawTransaction>>,
    timeoutMs: number,
    read: (status: number, body: Buffer) => T | undefined,
    reqId: string | undefined,
  ): Promise<{ value: T; upstream: number }> {
    const failed: FailedAttempt[] = [];
    let refusal: { value: T; upstream: number } | undefined;
    let nonceTooLow = false;
    let maybeSent = false;
    let pending = targets.length;
    let won = false;
    return new Promise((resolve, reject) => {
      const settle = async (): Promise<void> => {
        if (nonceTooLow) {
          // The same transaction mined already also makes a node say "nonce too low".
          const known = await this.request<unknown>('eth_getTransactionByHash', [tx.hash], { reqId }).catch(() => null);
          const value = known ? read(200, hashAnswer(tx.id, tx.hash)) : undefined;
          if (value !== undefined) return resolve({ value, upstream: (refusal ?? { upstream: 0 }).upstream });
        }
        if (refusal) return resolve(refusal);
        reject(new NoUpstreamError(this.network, failed, maybeSent));
      };
      for (const u of targets) {
        const startedAt = performance.now();
        void this.attempt(u, body, timeoutMs, (_status, buf) => (looksLikeJsonRpc(buf) ? buf : undefined)).then((outcome) => {
          observe(u.calls, (performance.now() - startedAt) / 1000);
          if (outcome.ok) {
            this.markOk(u, reqId);
            const answer = classifyTxAnswer(outcome.value);
            if (!won && (answer.kind === 'hash' || answer.kind === 'known')) {
              const value = read(200, answer.kind === 'hash' ? outcome.value : hashAnswer(tx.id, tx.hash));
              if (value !== undefined) {
                won = true;
                resolve({ value, upstream: u.index });
              }
            } else if (answer.kind === 'nonceTooLow' || answer.kind === 'refused') {
              nonceTooLow ||= answer.kind === 'nonceTooLow';
              const value = read(200, outcome.value);
              if (value !== undefined && refusal === undefined) refusal = { value, upstream: u.index };
            } else if (answer.kind === 'invalid') {
              failed.push({ upstream: u.index, reason: 'invalid body (HTTP 200)' });
              maybeSent = true;
            }
          } else {
            u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
            failed.push({ upstream: u.index, reason: outcome.reason });
            maybeSent ||= outcome.sent;
            this.log?.debug({ reqId, network: this.network, upstream: u.index, name: u.name, reason: outcome.reason, methods: ['eth_sendRawTransaction'] }, 'upstream attempt failed');
            if (!this.closed && !outcome.final) this.markFailed(u, outcome.reason, reqId);
          }
          if (--pending === 0 && !won) void settle();
        });
      }
    });
  }

  /**
   * The upstreams to try for one call, in order: {@link order}, with archive nodes first for reads
   * of old state, and the first place shared by weight among equally good upstreams.
   */
  private candidates(body: string | Buffer, methods: readonly string[]): Upstream[] {
    let list = this.order();
    if (list.length < 2) return list;
    if (this.mixedArchive && mayNeedArchive(methods) && needsArchive(body, methods, this.bestHead(Date.now()), this.pruneDepthBlocks)) {
      // Issue 15: archive nodes first, but a node known down stays behind every answering one.
      const rank = (u: Upstream): number => (u.state === 'down' ? 2 : u.archive ? 0 : 1);
      list = [...list].sort((a, b) => rank(a) - rank(b));
    }
    return this.weighted ? this.spread(list) : list;
  }

  /**
   * Smooth weighted round robin (as nginx's) among the leading upstreams that are equally good
   * (same group, same archive flag; the operator's weights outrank probe latency, whose jitter
   * would otherwise move nodes in and out of the share): the one picked goes first, the others
   * keep their order behind it as its failover.
   */
  private spread(list: Upstream[]): Upstream[] {
    const first = list[0] as Upstream;
    let end = 1;
    while (end < list.length && list[end]?.tier === first.tier && list[end]?.archive === first.archive) end++;
    if (end === 1) return list;
    let total = 0;
    let pick = first;
    for (let i = 0; i < end; i++) {
      const u = list[i] as Upstream;
      u.current += u.weight;
      total += u.weight;
      if (u.current > pick.current) pick = u;
    }
    pick.current -= total;
    return pick === first ? list : [pick, ...list.filter((u) => u !== pick)];
  }

  /**
   * One POST to one upstream, through undici's dispatch API with a handler of our own: the answer
   * is gathered as the chunks arrive, without the response stream, header object and promise
   * chain of `request()` + `arrayBuffer()` (bench/README.md: "Forwarding").
   */
  private attempt<T>(
    u: Upstream,
    body: string | Buffer,
    timeoutMs: number,
    read: (status: number, body: Buffer) => T | undefined,
    cancel?: Cancel,
  ): Promise<Attempt<T>> {
    const max = this.maxResponseBytes;
    return new Promise((resolve) => {
      let status = 0;
      let chunks: Buffer[] | null = [];
      let size = 0;
      /** Decided before the end (a 5xx or 429, an answer over the cap): what the attempt resolves with. */
      let verdict: Attempt<T> | null = null;
      let abort: ((err?: Error) => void) | null = null;
      const tooLarge = (): Attempt<T> => ({ ok: false, reason: `answer larger than ${max} bytes`, kind: 'too_large', sent: true, final: true });
      const cut = (why: Attempt<T>): false => {
        verdict = why;
        chunks = null;
        abort?.(new Error('answer cut'));
        return false;
      };
      const onCancel = () => abort?.(cancel?.reason);
      const handler = {
        onConnect: (a: (err?: Error) => void) => {
          abort = a;
          // A hedge decided before the request reached a socket: it never goes out.
          if (cancel?.aborted) a(cancel.reason);
          else cancel?.on('abort', onCancel);
        },
        onHeaders: (statusCode: number, rawHeaders: Buffer[] | string[] | null): boolean => {
          if (statusCode < 200) return true; // 1xx: the answer comes next
          status = statusCode;
          if (statusCode >= 500 || statusCode === 429) {
            // Read to the end and dropped: the connection stays usable.
            verdict = { ok: false, reason: `HTTP ${statusCode}`, kind: statusCode === 429 ? 'http_429' : 'http_5xx', sent: true };
            chunks = null;
            return true;
          }
          if (contentLength(rawHeaders) > max) return cut(tooLarge());
          return true;
        },
        onData: (chunk: Buffer): boolean => {
          if (chunks === null) return true;
          size += chunk.length;
          // Counted as it arrives, so an endless chunked answer is cut at the cap.
          if (size > max) return cut(tooLarge());
          chunks.push(chunk);
          return true;
        },
        onComplete: () => {
          cancel?.removeListener('abort', onCancel);
          if (verdict !== null || chunks === null) return resolve(verdict ?? tooLarge());
          const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
          const value = read(status, buf);
          resolve(value === undefined ? { ok: false, reason: `invalid body (HTTP ${status})`, kind: 'invalid_answer', sent: true } : { ok: true, value });
        },
        onError: (err: Error) => {
          cancel?.removeListener('abort', onCancel);
          resolve(verdict ?? this.failure(err, timeoutMs));
        },
      };
      // undici's own timers bound the attempt (no AbortController and timer per call): the
      // answer's headers within the timeout, and no gap longer than it between body chunks.
      // They tick about every 500 ms, so an attempt ends up to that much after its timeout.
      u.dispatcher.dispatch({ method: 'POST', path: u.path, headers: u.headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
    });
  }

  /** What a failed attempt says: only codes and our own words (undici and Node messages may quote the upstream's address). */
  private failure(err: unknown, timeoutMs: number): Attempt<never> {
    const code = errorCode(err);
    if (this.closed) return { ok: false, reason: 'pool closed', kind: 'connection', sent: true };
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return { ok: false, reason: `timeout after ${timeoutMs} ms`, kind: 'timeout', sent: true };
    }
    const notSent = code !== undefined && NOT_SENT_CODES.has(code);
    return { ok: false, reason: code ?? 'request failed', kind: notSent ? 'connect' : 'connection', sent: !notSent };
  }

  /**
   * The upstreams in the order to try (see the class comment). Kept until something changes it
   * (a failure, a recovery, a probe round) or an upstream's cool-down ends, at most a second, so
   * a call does not sort the list again.
   */
  private order(): Upstream[] {
    const now = Date.now();
    if (this.ordered && now < this.orderedUntil) return this.ordered;
    let until = now + 1_000;
    for (const u of this.upstreams) if (u.unhealthyUntil > now && u.unhealthyUntil < until) until = u.unhealthyUntil;
    this.best = undefined;
    this.ordered = this.sorted(now);
    this.orderedUntil = until;
    return this.ordered;
  }

  /** Something that decides the order changed (a failure, a recovery, a probe round). */
  private invalidate(): void {
    this.ordered = null;
    this.best = undefined;
  }

  private sorted(now: number): Upstream[] {
    const best = this.bestHead(now);
    const group = (u: Upstream): number => {
      if (u.state === 'down') return 3;
      if (u.state === 'unknown') return 2;
      // Lagging, or an outlier far ahead of what the others agree on (issue 15): used after the rest.
      return u.head !== null && best !== null && Math.abs(best - u.head) > this.maxLagBlocks ? 1 : 0;
    };
    for (const u of this.upstreams) u.tier = group(u);
    return this.upstreams
      .map((u) => ({ u, g: group(u) }))
      .sort(
        (a, b) =>
          a.g - b.g ||
          (a.g === 3 ? a.u.unhealthyUntil - b.u.unhealthyUntil : 0) ||
          latencyClass(a.u.latencyMs) - latencyClass(b.u.latencyMs) ||
          a.u.index - b.u.index,
      )
      .map(({ u }) => u);
  }

  /** The head the healthy upstreams agree on (among all when none is healthy); see {@link agreedHead}. */
  private bestHead(now: number): number | null {
    // Kept with the order: both change only on a failure, a recovery, a probe round or a cool-down's end.
    if (this.best !== undefined && this.ordered !== null && now < this.orderedUntil) return this.best;
    const healthy: number[] = [];
    const any: number[] = [];
    for (const u of this.upstreams) {
      if (u.head === null) continue;
      any.push(u.head);
      if (u.unhealthyUntil <= now) healthy.push(u.head);
    }
    const best = agreedHead(healthy.length > 0 ? healthy : any, this.maxLagBlocks);
    if (this.ordered !== null && now < this.orderedUntil) this.best = best;
    return best;
  }

  private markFailed(u: Upstream, reason: string, reqId?: string): void {
    this.invalidate();
    const now = Date.now();
    u.failures += 1;
    u.lastError = reason;
    const backoffMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (u.failures - 1));
    u.unhealthyUntil = now + backoffMs;
    if (u.state === 'down') return;
    const wentDown = this.setState(u, 'down');
    this.announce(u, reqId);
    // A call found the last answering upstream failing: probe at once rather than at the next
    // tick, so a passing hiccup does not keep the network down for a whole interval.
    if (wentDown && this.probing === 0 && this.isDown()) void this.checkHealth();
  }

  private markOk(u: Upstream, reqId?: string): void {
    if (u.state === 'up') return;
    this.invalidate();
    u.failures = 0;
    u.unhealthyUntil = 0;
    u.lastError = undefined;
    this.setState(u, 'up');
    this.announce(u, reqId);
  }

  /** Sets an upstream's state; true when the network went down with it. */
  private setState(u: Upstream, state: UpstreamState): boolean {
    const wasDown = this.downCount === this.upstreams.length;
    if (u.state === 'down') this.downCount--;
    if (state === 'down') this.downCount++;
    u.state = state;
    return !wasDown && this.downCount === this.upstreams.length;
  }

  /**
   * Logs "<network>: <n> of <m> upstreams answer" when the upstreams' states changed since the
   * last line: once a probe round is over, or at once when a call changed one (`changed`, with
   * the request it belongs to). Each failing upstream is named with its last error in words.
   */
  private announce(changed?: Upstream, reqId?: string): void {
    if (!this.log || this.closed || (changed && this.probing > 0)) return;
    let states = '';
    for (const u of this.upstreams) states += u.state[0];
    if (states === this.announced) return;
    this.announced = states;
    const answering = this.upstreams.filter((u) => u.state === 'up').length;
    const down = this.upstreams.filter((u) => u.state === 'down');
    const failing = Object.fromEntries(down.map((u) => [u.name, inWords(u.lastError ?? 'down')]));
    const line = {
      network: this.network,
      answering,
      total: this.upstreams.length,
      ...(down.length > 0 ? { failing } : {}),
      ...(changed ? { upstream: changed.name, now: changed.state } : {}),
      ...(reqId === undefined ? {} : { reqId }),
    };
    const msg = `${this.network}: ${answering} of ${this.upstreams.length} upstreams answer`;
    if (down.length > 0) this.log.warn(line, msg);
    else this.log.info(line, msg);
  }
}

/**
 * Issue 15: the highest head that at least two upstreams agree on within `window` blocks, so one
 * node far ahead (lying, or on another chain) is the outlier rather than every honest node
 * "lagging". A single head is taken as it is; when no two agree, nothing tells the liar from the
 * stalled, and the highest is taken (a stalled node is the commoner failure).
 */
export function agreedHead(heads: readonly number[], window: number): number | null {
  if (heads.length === 0) return null;
  const sorted = [...heads].sort((a, b) => b - a);
  for (let i = 0; i < sorted.length - 1; i++) {
    // Sorted high to low: the next one is the closest below.
    if ((sorted[i] as number) - (sorted[i + 1] as number) <= window) return sorted[i] as number;
  }
  return sorted[0] as number;
}

/** One attempt of a call under way (two at most while a read is hedged). */
interface Run<V> {
  u: Upstream;
  ctrl: Cancel | undefined;
  startedAt: number;
  done: Promise<Settled<V>>;
}

interface Settled<V> {
  run: Run<V>;
  outcome: Attempt<V>;
}

/** A node's answer read, and the provider-errors table's verdict on it. */
interface Judged<T> {
  value: T;
  verdict: ProviderVerdict | null;
}

/** What a call's failed attempts left: their reasons, and the best provider error as the answer of last resort. */
interface Tally<T> {
  failed: FailedAttempt[];
  fallback: { value: T; upstream: number; kind: ProviderVerdict['kind'] } | undefined;
}

/** `p`'s value, or null when `ms` pass first. */
function withinMs<V>(p: Promise<V>, ms: number): Promise<V | null> {
  if (ms <= 0) return Promise.resolve(null);
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms, null);
    void p.then((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

function observe(c: Upstream['calls'], seconds: number): void {
  let i = 0;
  while (i < UPSTREAM_BUCKETS.length && seconds > (UPSTREAM_BUCKETS[i] as number)) i++;
  c.buckets[i] = (c.buckets[i] ?? 0) + 1;
  c.sum += seconds;
  c.count += 1;
}

const CODE_WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the node',
  EPIPE: 'connection closed by the node',
  UND_ERR_SOCKET: 'connection closed by the node',
  UND_ERR_CLOSED: 'connection closed',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed for now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  CERT_HAS_EXPIRED: 'TLS certificate expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate is self-signed',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate cannot be verified',
};

/** A failure reason as an operator reads it: "connection refused (ECONNREFUSED)", "no answer within 5000 ms". */
export function inWords(reason: string): string {
  const words = CODE_WORDS[reason];
  if (words) return `${words} (${reason})`;
  let m = /^timeout after (\d+) ms$/.exec(reason);
  if (m) return `no answer within ${m[1]} ms`;
  m = /^HTTP (\d+)$/.exec(reason);
  if (m) return `the node answered HTTP ${m[1]}${m[1] === '429' ? ' (too many requests)' : ''}`;
  m = /^invalid body \(HTTP (\d+)\)( to eth_blockNumber)?$/.exec(reason);
  if (m) return m[2] ? `the answer to eth_blockNumber is not a block number (HTTP ${m[1]})` : `the answer is not JSON-RPC (HTTP ${m[1]})`;
  if (reason === 'request failed') return 'the request failed';
  return /^[A-Z][A-Z0-9_]+$/.test(reason) ? `request failed (${reason})` : reason;
}

/**
 * Latency classes double in width (under 40 ms, under 80 ms, under 160 ms, ...): a node must be
 * clearly faster to overtake one listed before it, and jitter does not reorder the list.
 */
function latencyClass(ms: number | null): number {
  if (ms === null) return Number.POSITIVE_INFINITY;
  return Math.floor(Math.log2(Math.max(ms, LATENCY_CLASS_MS) / LATENCY_CLASS_MS));
}


/** The Content-Length of undici's raw header list (name, value, name, value, ...), -1 when absent. */
function contentLength(raw: Buffer[] | string[] | null): number {
  if (raw === null) return -1;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as Buffer | string;
    if (name.length === 14 && name.toString().toLowerCase() === 'content-length') return Number(raw[i + 1]?.toString());
  }
  return -1;
}

function errorCode(err: unknown): string | undefined {
  // Node wraps a failed dual-stack connect in an AggregateError; undici may nest the cause.
  for (const e of [err, (err as { cause?: unknown })?.cause, (err as { errors?: unknown[] })?.errors?.[0]]) {
    const code = (e as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}
