// Sending one call through a pool (C26): failover, hedged reads and the `maybeSent` rule.
import { AnswerRoomError, AnswerTooLargeError, NetworkDownError, NoUpstreamError, type FailedAttempt, UpstreamRpcError } from '../../errors/upstream.ts';
import { parseResponse } from './answers.ts';
import { type Attempt, attempt } from './attempt.ts';
import { broadcast, rawTransaction } from './broadcast.ts';
import { candidatesFor } from './choice.ts';
import { isDown, markFailed, markOk } from './health.ts';
import { Cancel, hedgeDelay } from './hedge.ts';
import type { ProviderVerdict } from './provider-errors.ts';
import { observe, type PoolState, type Upstream } from './state.ts';
import type { CallOptions, FailureKind } from './types.ts';
import { methodFacts } from '../../methods/catalogue.ts';

/**
 * Sending one call through a pool (C26): the upstreams in the order of choice.ts, one attempt
 * after the other within the call's deadline; a hedged read also goes to the next node when the
 * first is slow; a provider error moves a read on; and a state-changing call that may have reached
 * a node is never sent to another (the `maybeSent` rule). Transactions broadcast when configured
 * (broadcast.ts).
 */

/**
 * Sends a serialised call to the pool's upstreams and returns the first acceptable answer, as
 * `read` takes it from the node's status and bytes (undefined: not acceptable, try the next).
 *
 * @throws NetworkDownError at once while every upstream is known down.
 * @throws NoUpstreamError when no upstream answered (`maybeSent` when a transaction may have gone out).
 */
export async function send<T>(
  p: PoolState,
  body: string | Buffer,
  methods: readonly string[],
  read: (status: number, body: Buffer) => T | undefined,
  opts: CallOptions,
): Promise<{ value: T; upstream: number }> {
  const reqId = opts.reqId;
  if (isDown(p)) {
    // Known down: no node is asked (the probes keep asking), the caller learns it at once.
    throw new NetworkDownError(
      p.network,
      p.upstreams.map((u) => ({ upstream: u.index, reason: u.lastError ?? 'down' })),
    );
  }
  const deadline = Date.now() + p.totalTimeoutMs;
  // One pass over the methods (no closures per call): the attempt's timeout, whether the call
  // changes state, whether it may be hedged.
  let stateChanging = false;
  let neverHedged = false;
  let attemptMs = methods.length === 0 ? p.requestTimeoutMs : 0;
  for (const m of methods) {
    attemptMs = Math.max(attemptMs, p.methodTimeoutsMs[m] ?? p.requestTimeoutMs);
    // The catalogue's facts (C26): a method it does not know is a read that may be hedged.
    const facts = methodFacts(m);
    if (facts?.stateChanging) stateChanging = true;
    if (facts?.hedge === false) neverHedged = true;
  }
  const candidates = p.closed ? [] : candidatesFor(p, methods, opts.block);
  if (stateChanging && p.broadcastTransactions && opts.transaction && methods.length === 1 && methods[0] === 'eth_sendRawTransaction') {
    const targets = candidates.filter((u) => u.state !== 'down');
    const tx = targets.length > 1 ? rawTransaction(opts.transaction.raw, opts.transaction.id) : null;
    if (tx) return broadcast(p, targets, body, tx, Math.min(attemptMs, p.totalTimeoutMs), read, reqId, request);
  }
  const hedge = p.hedge !== undefined && !stateChanging && candidates.length > 1 && !neverHedged ? p.hedge : undefined;
  // C26: a read answered with a provider error moves on; a transaction's answer is final (C26).
  const judge = !stateChanging && p.providerErrors.active;
  const judged = (status: number, buf: Buffer): Judged<T> | undefined => {
    const value = read(status, buf);
    return value === undefined ? undefined : { value, verdict: judge ? p.providerErrors.judge(buf) : null };
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
      const outcome = await attempt(p, u, body, Math.min(attemptMs, remaining), judged);
      const step = settle(p, u, outcome, performance.now() - startedAt, tally, call);
      if (step === 'stop') break;
      if (step !== 'next') return step;
    }
  } else {
    const running: Array<Run<Judged<T>>> = [];
    const firstTier = (candidates[0] as Upstream).tier;
    let next = 0;
    // `hedge`: sent because the nodes asked were slow, not because one failed (C58: marked on its span).
    const launch = (hedge = false): boolean => {
      const remaining = deadline - Date.now();
      const u = candidates[next];
      if (u === undefined || remaining <= 0) return false;
      next++;
      const ctrl = new Cancel();
      const run: Run<Judged<T>> = { u, ctrl, startedAt: performance.now(), done: undefined as never };
      run.done = attempt(p, u, body, Math.min(attemptMs, remaining), judged, ctrl, hedge ? 'hedge' : 'call').then((outcome) => ({ run, outcome }));
      running.push(run);
      return true;
    };
    launch();
    try {
      while (running.length > 0) {
        let settled: Settled<Judged<T>> | null;
        const latest = running[running.length - 1] as Run<Judged<T>>;
        const race = running.length === 1 ? latest.done : Promise.race(running.map((r) => r.done));
        if (next < candidates.length && deadline > Date.now() && (candidates[next] as Upstream).tier <= firstTier) {
          // C26: not answered within the hedge delay, the read also goes to the next node.
          // C48: and to the one after while none of those asked answers (two stalled nodes
          // first in line cost two hedge delays, not an attempt's whole timeout). C26: only to a
          // node as good as the first (choice.ts's groups): a lagging, untrusted or failed node is a
          // failover's last resort, never a race a stale answer could win because it is quick.
          settled = await withinMs(race, hedgeDelay(hedge, latest.u.window) - (performance.now() - latest.startedAt));
          if (settled === null) {
            p.log?.debug({ reqId, network: p.network, upstream: latest.u.index, name: latest.u.name, methods }, 'read hedged to the next upstream');
            if (launch(true)) continue;
            settled = await race;
          }
        } else {
          settled = await race;
        }
        const { run, outcome } = settled;
        running.splice(running.indexOf(run), 1);
        const u = run.u;
        const step = settle(p, u, outcome, performance.now() - run.startedAt, tally, call);
        if (step === 'stop') break;
        if (step !== 'next') return step;
        if (running.length === 0 && !p.closed) launch();
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
  throw new NoUpstreamError(p.network, failed);
}

/**
 * What one attempt of {@link send} means for the call: the answer; or 'next' after a provider
 * error (kept as the fallback answer) or a failure (counted, the node marked); 'stop' when the
 * pool closed. Throws when no other node may be asked.
 */
function settle<T>(
  p: PoolState,
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
    markOk(p, u, reqId);
    return { value: outcome.value.value, upstream: u.index };
  }
  if (outcome.ok) {
    const verdict = outcome.value.verdict as ProviderVerdict;
    const kind: FailureKind = verdict.kind === 'busy' ? 'node_busy' : 'node_missing';
    u.calls.errors.set(kind, (u.calls.errors.get(kind) ?? 0) + 1);
    tally.failed.push({ upstream: u.index, reason: verdict.reason });
    p.log?.debug({ reqId, network: p.network, upstream: u.index, name: u.name, reason: verdict.reason, methods }, 'upstream attempt failed');
    // A throttling node cools down like after a 429; one missing old state still serves the rest.
    if (verdict.kind === 'busy') markFailed(p, u, verdict.reason, reqId);
    else markOk(p, u, reqId);
    // The user sees a node's own error only when every node gave one: a missing-data answer
    // speaks about the request, a throttling one only about that node.
    const fallback = tally.fallback;
    if (!fallback || verdict.kind === 'missing' || fallback.kind === 'busy') tally.fallback = { value: outcome.value.value, upstream: u.index, kind: verdict.kind };
    return 'next';
  }
  u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
  tally.failed.push({ upstream: u.index, reason: outcome.reason });
  if (p.closed) return 'stop';
  p.log?.debug({ reqId, network: p.network, upstream: u.index, name: u.name, reason: outcome.reason, methods }, 'upstream attempt failed');
  if (outcome.final) throw finalError(p, outcome.kind, tally.failed);
  markFailed(p, u, outcome.reason, reqId);
  // C26: a transaction that may have reached a node is not sent again elsewhere.
  if (call.stateChanging && outcome.sent) throw new NoUpstreamError(p.network, tally.failed, true);
  return 'next';
}

/** The error of a call that ends with an attempt failed with `kind`: its answer too large (C60), no room for it (C60), or no upstream answered. */
export function finalError(p: PoolState, kind: FailureKind, failed: FailedAttempt[]): NoUpstreamError {
  if (kind === 'too_large') return new AnswerTooLargeError(p.network, failed, p.maxResponseBytes);
  if (kind === 'gateway_busy') return new AnswerRoomError(p.network, failed);
  return new NoUpstreamError(p.network, failed);
}

/**
 * One call for internal callers (faucet, health, devnet): the parsed `result`.
 *
 * @throws UpstreamRpcError carrying the node's JSON-RPC error object.
 * @throws NoUpstreamError when no upstream answered.
 */
export async function request<T = unknown>(p: PoolState, method: string, params: readonly unknown[], reqId: string | undefined): Promise<T> {
  const id = p.nextId++;
  const body = JSON.stringify({ jsonrpc: '2.0', id, method, params });
  // A transaction sent by the gateway itself (the faucet's, the solver's) is broadcast like a caller's.
  const transaction = method === 'eth_sendRawTransaction' && typeof params[0] === 'string' ? { raw: params[0], id: String(id) } : undefined;
  const { value, upstream } = await send(p, body, [method], (_status, buf) => parseResponse(buf), { reqId, transaction });
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

/** One attempt of a call under way (several while a read is hedged and none answered yet). */
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
