// Consensus reads (C49): a method answered once enough upstreams agree.
import { NoConsensusError, TooFewNodesError } from '../../errors/rpc.ts';
import { type FailedAttempt, NetworkDownError, NoUpstreamError } from '../../errors/upstream.ts';
import { answerMembersPlain, memberSpan, skipValue } from '../../json/lossless.ts';
import { looksLikeJsonRpc } from './answers.ts';
import { type Attempt, type AttemptRole, attempt } from './attempt.ts';
import { candidatesFor } from './choice.ts';
import { isDown, markFailed, markOk } from './health.ts';
import { Cancel, hedgeDelay } from './hedge.ts';
import { type ConsensusSettings, countDisagreement, observe, type PoolState, type Upstream } from './state.ts';
import type { CallOptions, ConsensusOutcome, ConsensusStats, FailureKind, ForwardResult } from './types.ts';

/**
 * Consensus reads (C49), per network and off by default: a configured method, in a single call,
 * is sent to `consensus.nodes` distinct upstreams at once, and answered as soon as that many agree
 * on their `result` (or `error`) member, compared as text without the blanks outside strings.
 * On disagreement one more upstream is asked and the majority answered (one agreeing node's bytes,
 * which carry the client's id since the client's text was forwarded); a node outside the majority
 * is left out of choice (choice.ts) for `consensus.penaltySeconds`, named once at warn and counted
 * (`junction_upstream_misbehaving_total`). No majority: -32000, `data.reason` "no_consensus".
 *
 * What is answered (C49: "answers only what they agree on", they being the `consensus.nodes`
 * asked): never fewer agreeing votes than the contract's rule needs, whatever failed. While no two
 * votes differ, `nodes` votes must agree. Once two differ, the contract asks `nodes + 1` votes and
 * answers their majority: more than half of `nodes + 1` votes alike, so the votes that did not come
 * could not have changed it (2 of 3 with the default, 3 of 4 with `nodes: 3`, 3 of 5 with
 * `nodes: 4`: always at least 2). So one node never answers alone. Fewer agreeing votes without a
 * contradiction (the other nodes failed, gave a provider error, were late, or none was left to
 * ask): -32000, HTTP 502, `data.reason` "too_few_nodes" with `needed` and `answered`; votes that
 * contradict each other without such a majority stay "no_consensus" (nobody is marked). Every read
 * is counted by outcome (`junction_consensus_reads_total{network,method,outcome}`), and reads
 * refused for too few nodes are said in a warn line at most once a minute per network (with how
 * many were refused since the last line; each at debug).
 *
 * A read never waits on a node it does not need: a node that has not answered within the hedge
 * delay (hedge.ts: the network's `hedgeDelayMs`, or the p90 of that node's recent calls; used here
 * even when hedging of ordinary reads is off) is replaced by the next candidate, and its vote still
 * counts if it comes before the decision. Once the votes needed are in, the attempts still running
 * are aborted. When no candidate is left to replace a late node, the votes in hand decide, as for
 * nodes that failed: at once when they are enough, else once the late node had a second hedge
 * delay to complete them or settle their disagreement. A hung node costs one hedge delay (two when
 * the votes in hand are too few or disagree), not an attempt's timeout.
 *
 * A batch reaches this module call by call: the dispatcher takes a batch's consensus reads out of
 * the batch sent to a node and sends each as a single call (pool.isConsensusRead).
 *
 * A node that fails (no answer, an invalid body, or a provider error of the table: throttled,
 * missing state) is not a vote and is replaced by the next candidate. Limits, on purpose: with no
 * vote at all the read fails as any read whose nodes all fail (NoUpstreamError), or passes on a
 * node's provider error; a network with fewer usable upstreams than `nodes` refuses its consensus
 * reads (the config refuses fewer configured upstreams than `nodes` at start, config/load.ts).
 */

/** Whether this call is a consensus read: consensus on, one configured method, a single call (not a batch). */
export function isConsensusCall(p: PoolState, body: string | Buffer, methods: readonly string[]): boolean {
  const c = p.consensus;
  if (c === undefined || methods.length !== 1 || !c.methods.has(methods[0] as string)) return false;
  return isSingleCall(body);
}

/** Whether a request text is one call (an object), not a batch (an array). */
export function isSingleCall(body: string | Buffer): boolean {
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

/** One attempt of a consensus read under way. */
interface Run {
  u: Upstream;
  ctrl: Cancel;
  startedAt: number;
  /** Not answered within the hedge delay: another node was asked in its place. */
  late: boolean;
  /** Not answered within two hedge delays: no longer waited for to settle a disagreement. */
  givenUp: boolean;
  timer: NodeJS.Timeout | undefined;
}

const readAnswer = (status: number, buf: Buffer): { status: number; body: Buffer } | undefined => (looksLikeJsonRpc(buf) ? { status, body: buf } : undefined);

/**
 * Sends a consensus read (see the file comment) and returns the answer the nodes agree on.
 *
 * @throws NetworkDownError at once while every upstream is known down.
 * @throws NoUpstreamError when no upstream answered.
 * @throws NoConsensusError when the answers have no majority.
 * @throws TooFewNodesError when fewer nodes than the rule needs agreed, none contradicting them.
 */
export async function consensusForward(p: PoolState, c: ConsensusSettings, body: string | Buffer, method: string, opts: CallOptions): Promise<ForwardResult> {
  if (isDown(p)) throw new NetworkDownError(p.network, p.upstreams.map((u) => ({ upstream: u.index, reason: u.lastError ?? 'down' })));
  return new ConsensusRead(p, c, body, method, opts.reqId, candidatesFor(p, [method], opts.block)).run();
}

/** One consensus read: the attempts under way, the votes so far, and the decision once enough are in. */
class ConsensusRead {
  readonly #p: PoolState;
  readonly #c: ConsensusSettings;
  readonly #body: string | Buffer;
  readonly #method: string;
  readonly #reqId: string | undefined;
  readonly #candidates: Upstream[];
  readonly #deadline: number;
  readonly #attemptMs: number;
  #next = 0;
  readonly #running = new Set<Run>();
  readonly #votes: Vote[] = [];
  readonly #failed: FailedAttempt[] = [];
  /** A provider error answered by some node: passed on when no node gave a vote. */
  #fallback: Vote | undefined;
  /** Votes that decide: `nodes`, one more once two of them differ. */
  #target: number;
  #done = false;
  #timer: NodeJS.Timeout | undefined;
  #resolve: (r: ForwardResult) => void = () => undefined;
  #reject: (e: unknown) => void = () => undefined;

  constructor(p: PoolState, c: ConsensusSettings, body: string | Buffer, method: string, reqId: string | undefined, candidates: Upstream[]) {
    this.#p = p;
    this.#c = c;
    this.#body = body;
    this.#method = method;
    this.#reqId = reqId;
    this.#candidates = p.closed ? [] : candidates;
    this.#deadline = Date.now() + p.totalTimeoutMs;
    this.#attemptMs = p.methodTimeoutsMs[method] ?? p.requestTimeoutMs;
    this.#target = c.nodes;
  }

  run(): Promise<ForwardResult> {
    return new Promise<ForwardResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
      // The call's deadline: what the votes in hand say then is the answer.
      this.#timer = setTimeout(() => this.#conclude(), Math.max(0, this.#deadline - Date.now()));
      this.#fill();
      this.#decide();
    });
  }

  /**
   * Asks the next candidates until the votes in hand and the attempts not late could reach the
   * target; `role`: `hedge` when they are asked in place of a late node (its trace span says so, C58).
   */
  #fill(role: AttemptRole = 'call'): void {
    let waiting = 0;
    for (const r of this.#running) if (!r.late) waiting++;
    while (this.#votes.length + waiting < this.#target && this.#launch(role)) waiting++;
  }

  /** Asks the next candidate not asked yet; false when none is left or the time is up. */
  #launch(role: AttemptRole): boolean {
    const p = this.#p;
    if (p.closed || this.#next >= this.#candidates.length) return false;
    const remaining = this.#deadline - Date.now();
    if (remaining <= 0) return false;
    const u = this.#candidates[this.#next++] as Upstream;
    const run: Run = { u, ctrl: new Cancel(), startedAt: performance.now(), late: false, givenUp: false, timer: undefined };
    this.#running.add(run);
    const delay = hedgeDelay(p.replaceDelay, u.window);
    run.timer = setTimeout(() => this.#late(run, delay), delay);
    void attempt(p, u, this.#body, Math.min(this.#attemptMs, remaining), readAnswer, run.ctrl, role).then((outcome) => this.#settle(run, outcome));
    return true;
  }

  /** Not answered within the hedge delay: the next candidate is asked in its place. */
  #late(run: Run, delay: number): void {
    if (this.#done || !this.#running.has(run)) return;
    run.late = true;
    run.timer = setTimeout(() => {
      run.givenUp = true;
      this.#decide();
    }, delay);
    const p = this.#p;
    p.log?.debug({ reqId: this.#reqId, network: p.network, upstream: run.u.index, name: run.u.name, methods: [this.#method] }, 'consensus read: a node is late, the next one is asked as well');
    this.#fill('hedge');
    this.#decide();
  }

  #settle(run: Run, outcome: Attempt<{ status: number; body: Buffer }>): void {
    // Aborted once the read was decided: nothing to count against the node.
    if (this.#done) return;
    clearTimeout(run.timer);
    this.#running.delete(run);
    const ms = performance.now() - run.startedAt;
    observe(run.u.calls, ms / 1000);
    const vote = this.#vote(run.u, outcome, ms);
    if (vote !== undefined) {
      const first = this.#votes[0];
      // Two answers differ: one more vote decides (C49).
      if (first !== undefined && first.key !== vote.key) this.#target = this.#c.nodes + 1;
      this.#votes.push(vote);
    }
    this.#fill();
    this.#decide();
  }

  /** What an attempt gives: a vote, or undefined after a failure or a provider error (counted, the node marked). */
  #vote(u: Upstream, outcome: Attempt<{ status: number; body: Buffer }>, ms: number): Vote | undefined {
    const p = this.#p;
    const reqId = this.#reqId;
    if (!outcome.ok) {
      this.#fail(u, outcome.kind, outcome.reason);
      if (!p.closed && !outcome.final) markFailed(p, u, outcome.reason, reqId);
      return undefined;
    }
    u.window.add(ms);
    const text = outcome.value.body.toString('utf8');
    if (!answerMembersPlain(text)) {
      // C54: repeated or disguised members read differently to different parsers: no vote, and it counts against the node.
      this.#fail(u, 'invalid_answer', 'answer with repeated or escaped members');
      markFailed(p, u, 'answer with repeated or escaped members', reqId);
      return undefined;
    }
    const vote: Vote = { u, status: outcome.value.status, body: outcome.value.body, key: keyOf(text) };
    const verdict = p.providerErrors.active ? p.providerErrors.judge(vote.body) : null;
    if (verdict !== null) {
      // Throttled or missing state: says nothing about the chain, so it is no vote (C26).
      this.#fail(u, verdict.kind === 'busy' ? 'node_busy' : 'node_missing', verdict.reason);
      if (verdict.kind === 'busy') markFailed(p, u, verdict.reason, reqId);
      else markOk(p, u, reqId);
      this.#fallback ??= vote;
      return undefined;
    }
    markOk(p, u, reqId);
    return vote;
  }

  #fail(u: Upstream, kind: FailureKind, reason: string): void {
    const p = this.#p;
    u.calls.errors.set(kind, (u.calls.errors.get(kind) ?? 0) + 1);
    this.#failed.push({ upstream: u.index, reason });
    p.log?.debug({ reqId: this.#reqId, network: p.network, upstream: u.index, name: u.name, reason, methods: [this.#method] }, 'upstream attempt failed');
  }

  /**
   * Decides once the votes needed are in, or when nothing more can come in time: no attempt on
   * time is under way and no candidate is left. Then late attempts are waited for while no vote is
   * in (nothing else could answer), or, while the votes in hand do not decide (too few, or
   * disagreeing without a sure majority), until they are given up (a second hedge delay).
   */
  #decide(): void {
    if (this.#done) return;
    const votes = this.#votes;
    if (votes.length >= this.#target) return this.#conclude();
    let settling = false;
    for (const r of this.#running) {
      if (!r.late) return;
      if (!r.givenUp) settling = true;
    }
    if (this.#running.size > 0 && votes.length === 0) return;
    if (settling && tally(votes, this.#c.nodes).kind !== 'answer') return;
    this.#conclude();
  }

  /** The answer from the votes in hand (see the file comment); the attempts still running are aborted. */
  #conclude(): void {
    if (this.#done) return;
    this.#done = true;
    clearTimeout(this.#timer);
    // The attempts still running are aborted. Their time so far is not added to their node's
    // latencies: it says only that the node was late, and a node that hangs while it answers its
    // probes keeps the delay its answers earned instead of one creeping up to rpc.hedge.maxDelayMs.
    for (const r of this.#running) {
      clearTimeout(r.timer);
      r.ctrl.abort();
    }
    this.#running.clear();
    try {
      this.#resolve(this.#decision());
    } catch (err) {
      this.#reject(err);
    }
  }

  #decision(): ForwardResult {
    const p = this.#p;
    const c = this.#c;
    const method = this.#method;
    const votes = this.#votes;
    const t = tally(votes, c.nodes);
    if (t.kind === 'none') {
      count(p.consensusReads.reads, method, 'no_answer');
      if (this.#fallback) return answer(this.#fallback);
      throw new NoUpstreamError(p.network, this.#failed);
    }
    if (t.kind === 'too_few') {
      // C49: fewer agreeing votes than `nodes`, none contradicting them: never answered unchecked.
      count(p.consensusReads.reads, method, 'too_few_nodes');
      this.#sayTooFew(votes.length);
      throw new TooFewNodesError(p.network, method, c.nodes, votes.length);
    }
    if (t.kind === 'split') {
      count(p.consensusReads.reads, method, 'no_consensus');
      p.log?.warn({ reqId: this.#reqId, network: p.network, method, upstreams: votes.map((v) => v.u.name) }, 'consensus read: the upstreams do not agree');
      throw new NoConsensusError(p.network, method);
    }
    const best = t.key;
    count(p.consensusReads.reads, method, votes.every((v) => v.key === best) ? 'agreed' : 'majority');
    const now = Date.now();
    for (const v of votes) {
      if (v.key === best) continue;
      v.u.misbehavingUntil = now + c.penaltyMs;
      v.u.markedUntil = Math.max(v.u.markedUntil, v.u.misbehavingUntil);
      countDisagreement(v.u, method);
      p.invalidate();
      p.log?.warn(
        { reqId: this.#reqId, network: p.network, upstream: v.u.index, name: v.u.name, method, penaltySeconds: c.penaltyMs / 1000 },
        'upstream disagreed with the consensus majority: left out for the penalty',
      );
    }
    return answer(votes.find((v) => v.key === best) as Vote);
  }

  /**
   * C49: a read refused for too few nodes, said at warn at most once a minute per network (the
   * reads refused meanwhile are counted, and said in the next line); every one at debug.
   */
  #sayTooFew(answered: number): void {
    const p = this.#p;
    const st = p.consensusReads;
    const fields = { reqId: this.#reqId, network: p.network, method: this.#method, needed: this.#c.nodes, answered, failed: this.#failed.length };
    const now = Date.now();
    if (now - st.warnedAt < TOO_FEW_WARN_MS) {
      st.unsaid++;
      p.log?.debug(fields, 'consensus read refused: too few nodes answered');
      return;
    }
    const since = st.unsaid;
    st.warnedAt = now;
    st.unsaid = 0;
    p.log?.warn({ ...fields, refusedSinceLastLine: since }, 'consensus reads refused: fewer nodes than consensus.nodes answered (failed, late, or none left to ask)');
  }
}

/** C49: at most one warn line per network in this time about consensus reads refused for too few nodes. */
const TOO_FEW_WARN_MS = 60_000;

type Tally = { kind: 'answer'; key: string } | { kind: 'too_few' } | { kind: 'split' } | { kind: 'none' };

/**
 * C49: what the votes in hand decide. `answer`: `key` has `nodes` votes and none differs, or more
 * than half of the `nodes + 1` votes a disagreement asks for (the votes not in could not change
 * it). `too_few`: they agree but are fewer than `nodes`. `split`: they differ without such a
 * majority. `none`: no vote.
 */
function tally(votes: readonly Vote[], nodes: number): Tally {
  const first = votes[0];
  if (first === undefined) return { kind: 'none' };
  if (votes.every((v) => v.key === first.key)) return votes.length >= nodes ? { kind: 'answer', key: first.key } : { kind: 'too_few' };
  const counts = new Map<string, number>();
  for (const v of votes) counts.set(v.key, (counts.get(v.key) ?? 0) + 1);
  let best = first.key;
  for (const [key, n] of counts) if (n > (counts.get(best) ?? 0)) best = key;
  return (counts.get(best) ?? 0) * 2 > nodes + 1 ? { kind: 'answer', key: best } : { kind: 'split' };
}

/** Counts one consensus read of `method` by outcome. */
function count(reads: Map<string, Map<ConsensusOutcome, number>>, method: string, outcome: ConsensusOutcome): void {
  let m = reads.get(method);
  if (m === undefined) reads.set(method, (m = new Map<ConsensusOutcome, number>()));
  m.set(outcome, (m.get(outcome) ?? 0) + 1);
}

/** C49: the consensus reads of a pool by method and outcome (all empty while consensus is off). */
export function consensusStats(p: PoolState): ConsensusStats {
  return p.consensusReads.reads;
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
