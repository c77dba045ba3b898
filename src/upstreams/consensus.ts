import { NoConsensusError } from '../errors/rpc.ts';
import { type FailedAttempt, NetworkDownError, NoUpstreamError } from '../errors/upstream.ts';
import { answerMembersPlain, memberSpan, skipValue } from '../json/lossless.ts';
import { looksLikeJsonRpc } from './answers.ts';
import { attempt } from './attempt.ts';
import { candidatesFor } from './choice.ts';
import { isDown, markFailed, markOk } from './health.ts';
import { type ConsensusSettings, observe, type PoolState, type Upstream } from './state.ts';
import type { CallOptions, FailureKind, ForwardResult } from './types.ts';

/**
 * Consensus reads (C49), per network and off by default: a configured method, in a single call,
 * is sent to `consensus.nodes` distinct upstreams at once, and an answer is passed on only when
 * their `result` (or `error`) members agree, compared as text without the blanks outside strings.
 * On disagreement one more upstream is asked and the majority answered (one agreeing node's
 * bytes, which carry the client's id since the client's text was forwarded); a node outside the
 * majority is left out of choice (choice.ts) for `consensus.penaltySeconds`, named once at warn
 * and counted (`junction_upstream_misbehaving_total`). No majority: -32000, `data.reason`
 * "no_consensus".
 *
 * Limits, on purpose: batches are forwarded as usual (their items are not compared); a node that
 * fails (no answer, or a provider error of the table: throttled, missing state) is replaced by the
 * next candidate and is not a vote; when fewer upstreams answer than `nodes`, what they agree on is
 * answered (logged at debug), so a network with one working node still answers.
 */

/** Whether this call is a consensus read: consensus on, one configured method, a single call (not a batch). */
export function isConsensusCall(p: PoolState, body: string | Buffer, methods: readonly string[]): boolean {
  const c = p.consensus;
  if (c === undefined || methods.length !== 1 || !c.methods.has(methods[0] as string)) return false;
  for (let i = 0; i < body.length; i++) {
    const ch = typeof body === 'string' ? body.charCodeAt(i) : (body[i] as number);
    if (ch === 0x20 || ch === 0x0a || ch === 0x0d || ch === 0x09) continue;
    return ch === 0x7b; // '{': a single call; '[': a batch
  }
  return false;
}

/** One node's answer to a consensus read. */
interface Vote {
  u: Upstream;
  status: number;
  body: Buffer;
  /** What is compared: `result` or `error`, without blanks outside strings. */
  key: string;
}

/**
 * Sends a consensus read (see the file comment) and returns the answer the nodes agree on.
 *
 * @throws NetworkDownError at once while every upstream is known down.
 * @throws NoUpstreamError when no upstream answered.
 * @throws NoConsensusError when the answers have no majority.
 */
export async function consensusForward(p: PoolState, c: ConsensusSettings, body: string | Buffer, method: string, opts: CallOptions): Promise<ForwardResult> {
  const reqId = opts.reqId;
  if (isDown(p)) throw new NetworkDownError(p.network, p.upstreams.map((u) => ({ upstream: u.index, reason: u.lastError ?? 'down' })));
  const deadline = Date.now() + p.totalTimeoutMs;
  const attemptMs = p.methodTimeoutsMs[method] ?? p.requestTimeoutMs;
  const candidates = p.closed ? [] : candidatesFor(p, [method], opts.block);
  const failed: FailedAttempt[] = [];
  /** A provider error answered by some node: passed on when no node gave a vote. */
  let fallback: Vote | undefined;
  let next = 0;
  const fail = (u: Upstream, kind: FailureKind, reason: string): void => {
    u.calls.errors.set(kind, (u.calls.errors.get(kind) ?? 0) + 1);
    failed.push({ upstream: u.index, reason });
    p.log?.debug({ reqId, network: p.network, upstream: u.index, name: u.name, reason, methods: [method] }, 'upstream attempt failed');
  };
  // One vote from the next candidate not asked yet; a node that fails is replaced by the next.
  const ask = async (): Promise<Vote | undefined> => {
    while (next < candidates.length && !p.closed) {
      const u = candidates[next++] as Upstream;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return undefined;
      const startedAt = performance.now();
      const outcome = await attempt(p, u, body, Math.min(attemptMs, remaining), (status, buf) => (looksLikeJsonRpc(buf) ? { status, body: buf } : undefined));
      const ms = performance.now() - startedAt;
      observe(u.calls, ms / 1000);
      if (!outcome.ok) {
        fail(u, outcome.kind, outcome.reason);
        if (!p.closed && !outcome.final) markFailed(p, u, outcome.reason, reqId);
        continue;
      }
      u.window.add(ms);
      const text = outcome.value.body.toString('utf8');
      if (!answerMembersPlain(text)) {
        // C54: repeated or disguised members read differently to different parsers: no vote, and it counts against the node.
        fail(u, 'invalid_answer', 'answer with repeated or escaped members');
        markFailed(p, u, 'answer with repeated or escaped members', reqId);
        continue;
      }
      const vote: Vote = { u, status: outcome.value.status, body: outcome.value.body, key: keyOf(text) };
      const verdict = p.providerErrors.active ? p.providerErrors.judge(vote.body) : null;
      if (verdict !== null) {
        // Throttled or missing state: says nothing about the chain, so it is no vote (issue 15).
        fail(u, verdict.kind === 'busy' ? 'node_busy' : 'node_missing', verdict.reason);
        if (verdict.kind === 'busy') markFailed(p, u, verdict.reason, reqId);
        else markOk(p, u, reqId);
        fallback ??= vote;
        continue;
      }
      markOk(p, u, reqId);
      return vote;
    }
    return undefined;
  };

  const votes = (await Promise.all(Array.from({ length: c.nodes }, ask))).filter((v): v is Vote => v !== undefined);
  if (votes.length === 0) {
    if (fallback) return answer(fallback);
    throw new NoUpstreamError(p.network, failed);
  }
  const first = votes[0] as Vote;
  if (votes.every((v) => v.key === first.key)) {
    if (votes.length < c.nodes) {
      p.log?.debug({ reqId, network: p.network, method, asked: c.nodes, answered: votes.length }, 'consensus read answered by fewer nodes than configured');
    }
    return answer(first);
  }
  // Disagreement: one more node decides.
  const extra = await ask();
  if (extra) votes.push(extra);
  const counts = new Map<string, number>();
  for (const v of votes) counts.set(v.key, (counts.get(v.key) ?? 0) + 1);
  let best = first.key;
  for (const [key, n] of counts) if (n > (counts.get(best) ?? 0)) best = key;
  if ((counts.get(best) ?? 0) * 2 <= votes.length) {
    p.log?.warn({ reqId, network: p.network, method, upstreams: votes.map((v) => v.u.name) }, 'consensus read: the upstreams do not agree');
    throw new NoConsensusError(p.network, method);
  }
  const now = Date.now();
  for (const v of votes) {
    if (v.key === best) continue;
    v.u.misbehavingUntil = now + c.penaltyMs;
    v.u.calls.misbehaving += 1;
    p.log?.warn(
      { reqId, network: p.network, upstream: v.u.index, name: v.u.name, method, penaltySeconds: c.penaltyMs / 1000 },
      'upstream disagreed with the consensus majority: left out for the penalty',
    );
  }
  return answer(votes.find((v) => v.key === best) as Vote);
}

function answer(v: Vote): ForwardResult {
  return { status: v.status, body: v.body, upstream: v.u.index };
}

/** What two answers must share to agree: their `result` (or `error`) member, without blanks outside strings. */
export function keyOf(text: string): string {
  const result = memberSpan(text, 'result');
  if (result) return `r${compact(text.slice(result[0], result[1]))}`;
  const error = memberSpan(text, 'error');
  if (error) return `e${compact(text.slice(error[0], error[1]))}`;
  return `x${compact(text)}`;
}

/** JSON text without the blanks outside strings (strings kept as written). */
export function compact(t: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < t.length; i++) {
    const ch = t.charCodeAt(i);
    if (ch === 0x22) {
      i = skipValue(t, i) - 1;
    } else if (ch === 0x20 || ch === 0x0a || ch === 0x0d || ch === 0x09) {
      out += t.slice(from, i);
      from = i + 1;
    }
  }
  return out + t.slice(from);
}
