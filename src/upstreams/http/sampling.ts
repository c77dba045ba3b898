// Answer sampling (C55): a share of answers checked against another node in the background.
import { answerMembersPlain, memberSpan, skipValue, skipWs } from '../../json/lossless.ts';
import { checkableAtBlock, methodFacts, sampledByDefault } from '../../methods/catalogue.ts';
import { readBlock } from '../../methods/values.ts';
import { looksLikeJsonRpc } from './answers.ts';
import { attempt } from './attempt.ts';
import { leftOut, order } from './choice.ts';
import { isSingleCall, keyOf } from './consensus.ts';
import { countDisagreement, observe, type PoolState, type SamplingSettings, type Upstream } from './state.ts';
import type { SamplingStats } from './types.ts';

/**
 * Answer sampling (C55): catching a node that answers wrong when consensus reads are off. A share
 * of the answers to single reads (`rpc.sampling.rate`, 1% by default; per network and method in
 * `networks[].sampling`) is checked in the background, after the answer went to the caller,
 * against another node at the same block. The check never delays an answer: it starts on a later
 * turn of the event loop, at most `maxInFlight` run at once per network (an answer picked beyond
 * that is not checked), and it is off on a network with one upstream.
 *
 * The same block: a call naming its block by number or hash (or `earliest`) is sent as it was to
 * the other node, and its answer compared with the one the caller got. A call at `latest`, `safe`,
 * `finalized` or without a block would be read a moment later at a newer block on a moving chain:
 * both nodes are asked again with the block pinned to a number both have (the lowest of their
 * heads and the network's, as the probes last saw them), and those two answers are compared; the
 * caller's answer itself is not. `pending` is never checked (each node's pending block is its own).
 *
 * The verdict: the `result` members are compared as consensus reads compare them (consensus.ts
 * `keyOf`); an error, a provider error or no answer is no vote, and a check without two votes has
 * no verdict. When they differ and no majority decides (two votes), a third node (when there is
 * one) is asked at the same block; the majority, more than half of the votes, decides; without
 * one nobody is blamed. A node outside the majority:
 * - is marked misbehaving for `windowSeconds` (600) after its latest disagreement: logged at warn,
 *   counted by `junction_upstream_misbehaving_total{network,upstream,method}`, shown in
 *   `/health/ready`, and read after every node not marked (choice.ts);
 * - after `outAfter` (3) disagreements within `windowSeconds`, is out of rotation: left out of the
 *   choice while another node remains, until a check finds it agreeing with the others again.
 * While a node is marked or out it is asked in every check as well (and while one is out, a check
 * runs at least once per health interval whatever the rate), so it is judged again.
 */

/** The share of `method`'s answers checked on this pool: its own rate, else the pool's for the methods sampled by default, else 0. */
export function rateOf(s: SamplingSettings, method: string): number {
  const known = s.known.get(method);
  if (known !== undefined) return known;
  const own = s.rates.get(method);
  const rate = own !== undefined ? (checkableAtBlock(method) ? own : 0) : sampledByDefault(method) ? s.rate : 0;
  // Only names the catalogue or the config knows are kept: the map cannot grow with what callers send.
  if (own !== undefined || methodFacts(method) !== undefined) s.known.set(method, rate);
  return rate;
}

/**
 * Picks the answer `answered` by upstream `upstream` for a check at the sampling rate (see the file
 * comment) and starts it on a later turn of the event loop. Returns at once.
 */
export function maybeSample(p: PoolState, s: SamplingSettings, body: string | Buffer, method: string, upstream: number, answer: Buffer): void {
  const rate = rateOf(s, method);
  if (rate <= 0) return;
  const st = p.samples;
  // While a node is out of rotation, a check runs at least once per health interval to find it agreeing again.
  const probe = st.outCount > 0 && Date.now() - st.lastProbeAt >= p.healthIntervalMs;
  if (!probe && Math.random() >= rate) return;
  if (p.closed || !isSingleCall(body)) return;
  if (st.inFlight >= s.maxInFlight) {
    st.skipped++;
    return;
  }
  const subject = p.upstreams[upstream];
  if (subject === undefined) return;
  st.inFlight++;
  st.lastProbeAt = Date.now();
  const run: Promise<void> = new Promise<void>((resolve) => setImmediate(resolve))
    .then(() => check(p, s, typeof body === 'string' ? body : body.toString('utf8'), method, subject, answer))
    .catch((err: unknown) => {
      st.inconclusive++;
      p.log?.error({ err, network: p.network, method }, 'sampled answer check failed');
    })
    .finally(() => {
      st.inFlight--;
      st.running.delete(run);
    });
  st.running.add(run);
}

/** What the sampled checks of a pool came to. */
export function samplingStats(p: PoolState): SamplingStats {
  const { agreed, disagreed, inconclusive, skipped } = p.samples;
  return { agreed, disagreed, inconclusive, skipped };
}

/** Where a call reads: at a fixed block (number, hash, `earliest`), or at a moving one, with the call's text pinned to block `n`. */
type Where = { fixed: true } | { fixed: false; pin: (n: number) => string };

/** One node's vote in a check: the compared text of its `result`, or undefined when it gave none. */
type Ballot = { u: Upstream; key: string | undefined };

const readAnswer = (_status: number, buf: Buffer): Buffer | undefined => (looksLikeJsonRpc(buf) ? buf : undefined);

async function check(p: PoolState, s: SamplingSettings, body: string, method: string, subject: Upstream, answer: Buffer): Promise<void> {
  const st = p.samples;
  const block = methodFacts(method)?.blocks[0];
  const where = block === undefined ? null : whereOf(body, block.at, block.hash);
  if (where === null || p.closed) {
    st.inconclusive++;
    return;
  }
  const now = Date.now();
  const marked = (u: Upstream): boolean => u.outOfRotation || u.markedUntil > now;
  // The witness and the arbiter: the best nodes in the order of choice that are not marked.
  const honest = order(p).filter((u) => u !== subject && u.state !== 'down' && !marked(u) && !leftOut(u, now));
  // Marked and out nodes are judged again in every check.
  const suspects = p.upstreams.filter((u) => u !== subject && u.state !== 'down' && marked(u));
  const asked = [...honest.slice(0, 1), ...suspects];
  const arbiter = honest[1];
  if (asked.length === 0) {
    st.inconclusive++;
    return;
  }
  let text = body;
  let subjectKey: string | undefined;
  if (where.fixed) {
    subjectKey = voteOf(p, answer);
  } else {
    // Pinned to a block every node asked has: the lowest head the probes saw.
    let n = p.head ?? Number.POSITIVE_INFINITY;
    for (const u of [subject, ...asked, ...(arbiter ? [arbiter] : [])]) if (u.head !== null) n = Math.min(n, u.head);
    if (!Number.isFinite(n)) {
      st.inconclusive++;
      return;
    }
    text = where.pin(n);
  }
  const ballots = await Promise.all([
    ...(where.fixed ? [Promise.resolve<Ballot>({ u: subject, key: subjectKey })] : [ask(p, subject, text)]),
    ...asked.map((u) => ask(p, u, text)),
  ]);
  let votes = ballots.filter((b): b is { u: Upstream; key: string } => b.key !== undefined);
  if (votes[0]?.u !== subject || votes.length < 2) {
    st.inconclusive++;
    return;
  }
  if (votes.every((v) => v.key === votes[0]?.key)) {
    st.agreed++;
    for (const v of votes) agrees(p, v.u);
    return;
  }
  let best = majority(votes);
  if (best === undefined && arbiter !== undefined) {
    const b = await ask(p, arbiter, text);
    if (b.key !== undefined) votes = [...votes, { u: arbiter, key: b.key }];
    best = majority(votes);
  }
  if (best === undefined) {
    st.inconclusive++;
    p.log?.warn({ network: p.network, method, upstreams: votes.map((v) => v.u.name) }, 'sampled answer check: the upstreams disagree and no majority decides');
    return;
  }
  st.disagreed++;
  for (const v of votes) {
    if (v.key === best) agrees(p, v.u);
    else disagrees(p, s, v.u, method);
  }
}

/** The key more than half of the votes share, or undefined. */
function majority(votes: ReadonlyArray<{ key: string }>): string | undefined {
  const counts = new Map<string, number>();
  for (const v of votes) counts.set(v.key, (counts.get(v.key) ?? 0) + 1);
  for (const [key, n] of counts) if (n * 2 > votes.length) return key;
  return undefined;
}

/** One node's vote at the block of the check (observed in its call statistics; its health is left to calls and probes). */
async function ask(p: PoolState, u: Upstream, text: string): Promise<Ballot> {
  const startedAt = performance.now();
  // Background work, as a probe is: not part of the caller's trace (C58), which may be over already.
  const outcome = await attempt(p, u, text, p.requestTimeoutMs, readAnswer, undefined, 'probe');
  observe(u.calls, (performance.now() - startedAt) / 1000);
  return { u, key: outcome.ok ? voteOf(p, outcome.value) : undefined };
}

/** The compared text of an answer's `result`; undefined for an error, a provider error, or an answer read differently by different parsers (C54). */
function voteOf(p: PoolState, answer: Buffer): string | undefined {
  const text = answer.toString('utf8');
  if (!answerMembersPlain(text) || memberSpan(text, 'result') === null) return undefined;
  if (p.providerErrors.active && p.providerErrors.judge(answer) !== null) return undefined;
  return keyOf(text);
}

/** A disagreement: marked for the window, out of rotation after `outAfter` of them within it. */
function disagrees(p: PoolState, s: SamplingSettings, u: Upstream, method: string): void {
  const now = Date.now();
  countDisagreement(u, method);
  u.strikes = u.strikes.filter((t) => now - t < s.windowMs);
  u.strikes.push(now);
  const wasMarked = u.markedUntil > now;
  u.markedUntil = Math.max(u.markedUntil, now + s.windowMs);
  p.invalidate();
  const line = { network: p.network, upstream: u.index, name: u.name, method, disagreements: u.strikes.length, windowSeconds: s.windowMs / 1000 };
  if (!u.outOfRotation && u.strikes.length >= s.outAfter) {
    u.outOfRotation = true;
    p.samples.outCount++;
    p.log?.warn(line, 'upstream answers disagreed with the other nodes again: out of rotation until a sampled check finds it agreeing');
  } else if (!wasMarked) {
    p.log?.warn(line, 'upstream answer disagreed with the other nodes at the same block: marked misbehaving, read last');
  }
}

/** An agreement: a node out of rotation is back in it (still marked, read last, until its window passes). */
function agrees(p: PoolState, u: Upstream): void {
  if (!u.outOfRotation) return;
  u.outOfRotation = false;
  u.strikes = [];
  p.samples.outCount--;
  p.invalidate();
  p.log?.info({ network: p.network, upstream: u.index, name: u.name }, 'upstream agrees with the other nodes again: back in rotation');
}

/**
 * Where the call in `body` reads (see the file comment), from its block parameter at position `at`
 * as nodes read it (values.ts); null when it cannot be checked (`pending`, a block not readable,
 * params not a list). The call's text is the gateway's re-encoding of what it judged (C54), so the
 * parameter is replaced in place, the rest of the text kept as it is.
 */
export function whereOf(body: string, at: number, hashAllowed: boolean): Where | null {
  const span = memberSpan(body, 'params');
  if (span === null) return null;
  let i = skipWs(body, span[0]);
  if (body.charCodeAt(i) !== 0x5b) return null;
  i = skipWs(body, i + 1);
  let index = 0;
  let found: [number, number] | null = null;
  while (i < span[1] && body.charCodeAt(i) !== 0x5d) {
    const end = skipValue(body, i);
    if (index === at) found = [i, end];
    index++;
    i = skipWs(body, end);
    if (body.charCodeAt(i) !== 0x2c) break;
    i = skipWs(body, i + 1);
  }
  if (found === null) {
    // The block left out (the node reads `latest`): appended, when it is the next parameter.
    if (index !== at || body.charCodeAt(i) !== 0x5d) return null;
    const close = i;
    return { fixed: false, pin: (n) => `${body.slice(0, close)}${index === 0 ? '' : ','}"0x${n.toString(16)}"${body.slice(close)}` };
  }
  const [start, end] = found;
  let value: unknown;
  try {
    value = JSON.parse(body.slice(start, end));
  } catch {
    return null;
  }
  const ref = readBlock(value, hashAllowed);
  switch (ref.kind) {
    case 'number':
    case 'hash':
      return { fixed: true };
    case 'tag':
      if (ref.tag === 'earliest') return { fixed: true };
      if (ref.tag === 'pending') return null;
      break;
    case 'absent':
      break;
    default:
      return null;
  }
  return { fixed: false, pin: (n) => `${body.slice(0, start)}"0x${n.toString(16)}"${body.slice(end)}` };
}
