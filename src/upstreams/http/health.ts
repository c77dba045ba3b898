// Health and heads of a pool's upstreams (C26): probes, cool-downs and the agreed head.
import { inWords } from '../../errors/upstream.ts';
import { parseHead } from './answers.ts';
import { attempt } from './attempt.ts';
import { leftOut } from './choice.ts';
import type { PoolState, Upstream } from './state.ts';
import type { UpstreamHealth, UpstreamState } from './types.ts';

/**
 * Health and heads of a pool's upstreams (C26): the `eth_blockNumber` probes, each upstream's
 * state after a call or probe (with its cool-down), the head the upstreams agree on, and the
 * log line and report of who answers.
 *
 * An upstream is healthy only once it answered. While the probes run and every upstream is known
 * to be down, calls fail at once (NetworkDownError); the first good probe lifts that.
 */

const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
const LATENCY_WEIGHT = 0.3; // weight of a new sample in the moving average
/** A round comes up to this share of the interval early (see nextProbeDelay). */
const PROBE_JITTER = 0.2;

/**
 * The wait before a pool's next probe round: the interval, less up to a fifth at random. The
 * pools of every network start together and would otherwise probe in the same turn of the event
 * loop for as long as the process runs: a round of all the upstreams held the gateway's thread
 * for several milliseconds every interval (the tail of RPC answers: docs/scaling.md), where pools that
 * drift apart spread it. Never later than the interval: each upstream is still probed at least
 * every `healthIntervalMs`.
 */
export function nextProbeDelay(intervalMs: number, random: () => number = Math.random): number {
  return Math.round(intervalMs * (1 - PROBE_JITTER * random()));
}

/** Starts the periodic health probes (one round at once); the timers do not keep the process alive. */
export function startProbes(p: PoolState): void {
  if (p.started || p.closed) return;
  p.started = true;
  const tick = async (): Promise<void> => {
    await checkHealth(p);
    p.onFirstRound?.();
    p.onFirstRound = undefined;
    if (p.closed) return;
    p.timer = setTimeout(tick, nextProbeDelay(p.healthIntervalMs));
    p.timer.unref();
  };
  void tick();
}

/**
 * Probes every upstream once with `eth_blockNumber` and records head, latency or failure.
 * Never rejects. {@link startProbes} runs it periodically; tests and readiness checks may call it.
 */
export async function checkHealth(p: PoolState): Promise<void> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  // A probe slower than the interval means the node is in trouble; at least 1 s for slow links.
  const timeoutMs = Math.min(p.requestTimeoutMs, Math.max(p.healthIntervalMs, 1_000));
  p.probing++;
  try {
    await Promise.all(
      p.upstreams.map(async (u) => {
        const startedAt = performance.now();
        const outcome = await attempt(p, u, body, timeoutMs, (_status, buf) => parseHead(buf), undefined, 'probe');
        if (p.closed) return;
        if (!outcome.ok) {
          // A 200 that is not a block number: the node answers, but not as a node should.
          markFailed(p, u, outcome.kind === 'invalid_answer' ? `${outcome.reason} to eth_blockNumber` : outcome.reason);
          return;
        }
        const sample = performance.now() - startedAt;
        u.latencyMs = u.latencyMs === null ? sample : u.latencyMs + LATENCY_WEIGHT * (sample - u.latencyMs);
        u.head = outcome.value;
        markOk(p, u);
      }),
    );
  } finally {
    p.probing--;
  }
  if (p.closed) return;
  // One line per round at most, and only when something changed (the first round always says).
  announce(p);
  p.invalidate(); // heads and latencies changed
  updateHead(p);
}

/** True while the probes run and every upstream is known to be down: calls fail at once. */
export function isDown(p: PoolState): boolean {
  return p.started && p.upstreams.length > 0 && p.downCount === p.upstreams.length;
}

const JUMP_FACTOR = 4; // a head may move this many times faster than the network's block time
const JUMP_SLACK_BLOCKS = 32; // and this many blocks more: probe timing, a burst of blocks

/**
 * Sets the network's head from its upstreams' heads (C26), marks the ones far above it
 * as outliers, and hands a new highest head to `onHead`. Runs when heads or states change (a
 * probe round, an upstream failing or answering again), never per call.
 *
 * - The heads of the answering upstreams count (all known heads when none answers).
 * - A head further above the highest head believed so far than the chain could have moved since
 *   (`blockTimeMs`, times 4, plus 32 blocks; the 32 are not given afresh at each reading, see
 *   {@link jumpCeiling}) is set aside while another answering upstream has a
 *   head within reach, or, when only one answers, while an upstream that fails now last reported
 *   one: one node's word does not move the network that far. When every answering upstream made
 *   the jump (several together, or the only one with nothing to compare it with) they count.
 * - Of what is left the head is {@link agreedHead}: the highest one at least half of them reach.
 */
export function updateHead(p: PoolState, now = p.now()): void {
  const answering: number[] = [];
  const known: number[] = [];
  for (const u of p.upstreams) {
    if (u.head === null) continue;
    known.push(u.head);
    if (u.state === 'up') answering.push(u.head);
  }
  let heads = answering.length > 0 ? answering : known;
  if (p.lastHead >= 0 && heads.length > 0) {
    const ceiling = jumpCeiling(p, now);
    const within = (list: number[]) => list.filter((h) => h <= ceiling);
    let believed = within(heads);
    // The only one answering jumped, but an upstream that fails now last said otherwise.
    if (believed.length === 0 && answering.length === 1) believed = within(known);
    if (believed.length > 0) heads = believed;
  }
  const head = agreedHead(heads, p.maxLagBlocks);
  if (head !== p.head) p.invalidate();
  p.head = head;
  for (const u of p.upstreams) {
    const ahead = u.head !== null && head !== null && u.head - head > p.maxLagBlocks;
    if (ahead === u.ahead) continue;
    u.ahead = ahead;
    p.invalidate();
    if (!p.log || p.closed) continue;
    const line = { network: p.network, upstream: u.name, head: u.head, agreed: head };
    // Once when it goes out of line (it stays so until it comes back), once when it comes back.
    if (ahead) p.log.warn(line, `${p.network}: upstream ${u.name} reports head ${u.head}, far above the head the others agree on (${head}); not trusted`);
    else p.log.info(line, `${p.network}: upstream ${u.name} is back in line with the others' head`);
  }
  if (head !== null && head > p.lastHead) {
    // The room above a head just believed is at most the slack, and never more than the time since
    // the last one earned: a node that climbs faster than the chain spends it and is then set aside,
    // however often it is read (a per-reading slack would let it creep 32 blocks a reading).
    const ceiling = jumpCeiling(p, now);
    p.ceiling = head > ceiling ? head + JUMP_SLACK_BLOCKS : Math.min(ceiling, head + JUMP_SLACK_BLOCKS);
    p.ceilingAt = now;
    p.lastHead = head;
    p.onHead?.(head);
  }
}

/** The highest head one reading may bring now: the ceiling left by the last head believed plus what the chain could have added since (4 times its pace). */
export function jumpCeiling(p: PoolState, now: number): number {
  if (p.lastHead < 0) return Number.POSITIVE_INFINITY;
  return p.ceiling + Math.ceil((Math.max(0, now - p.ceilingAt) * JUMP_FACTOR) / p.blockTimeMs);
}

/** The network's head as last set by {@link updateHead} (null before any probe answered). */
export function bestHead(p: PoolState): number | null {
  return p.head;
}

/**
 * C26: the highest head that at least half of the nodes reach (have a head at or above it
 * less `window` blocks), so one node far ahead is the outlier rather than every honest node
 * "lagging": with three nodes it takes two. A single head is taken as it is; with two that
 * disagree half is one, and the higher counts (a stalled node is the commoner failure; the jump
 * rule of {@link updateHead} guards the rest).
 */
export function agreedHead(heads: readonly number[], window: number): number | null {
  if (heads.length === 0) return null;
  const sorted = [...heads].sort((a, b) => b - a);
  const need = Math.ceil(sorted.length / 2);
  for (let i = 0; i < need - 1; i++) {
    const floor = (sorted[i] as number) - window;
    let reach = i + 1;
    while (reach < sorted.length && (sorted[reach] as number) >= floor) reach++;
    if (reach >= need) return sorted[i] as number;
  }
  // The need-th highest is reached by `need` nodes: itself and those above.
  return sorted[need - 1] as number;
}

/** A call or probe on `u` failed: it cools down (doubling per failure) and goes `down`. */
export function markFailed(p: PoolState, u: Upstream, reason: string, reqId?: string): void {
  p.invalidate();
  const now = Date.now();
  u.failures += 1;
  u.lastError = reason;
  const backoffMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (u.failures - 1));
  u.unhealthyUntil = now + backoffMs;
  if (u.state === 'down') return;
  const wentDown = setState(p, u, 'down');
  announce(p, u, reqId);
  if (p.probing === 0) updateHead(p); // a probe round sets it once at its end
  // A call found the last answering upstream failing: probe at once rather than at the next
  // tick, so a passing hiccup does not keep the network down for a whole interval.
  if (wentDown && p.probing === 0 && isDown(p)) void checkHealth(p);
}

/** A call or probe on `u` got an answer: it is `up`, its cool-down over. */
export function markOk(p: PoolState, u: Upstream, reqId?: string): void {
  if (u.state === 'up') return;
  p.invalidate();
  u.failures = 0;
  u.unhealthyUntil = 0;
  u.lastError = undefined;
  setState(p, u, 'up');
  announce(p, u, reqId);
  if (p.probing === 0) updateHead(p); // a probe round sets it once at its end
}

/** Sets an upstream's state; true when the network went down with it. */
function setState(p: PoolState, u: Upstream, state: UpstreamState): boolean {
  const wasDown = p.downCount === p.upstreams.length;
  if (u.state === 'down') p.downCount--;
  if (state === 'down') p.downCount++;
  u.state = state;
  return !wasDown && p.downCount === p.upstreams.length;
}

/**
 * Logs "<network>: <n> of <m> upstreams answer" when the upstreams' states changed since the
 * last line: once a probe round is over, or at once when a call changed one (`changed`, with
 * the request it belongs to). Each failing upstream is named with its last error in words.
 */
function announce(p: PoolState, changed?: Upstream, reqId?: string): void {
  if (!p.log || p.closed || (changed && p.probing > 0)) return;
  let states = '';
  for (const u of p.upstreams) states += u.state[0];
  if (states === p.announced) return;
  const answering = p.upstreams.filter((u) => u.state === 'up').length;
  const down = p.upstreams.filter((u) => u.state === 'down');
  const failing = Object.fromEntries(down.map((u) => [u.name, inWords(u.lastError ?? 'down')]));
  const line = {
    network: p.network,
    answering,
    total: p.upstreams.length,
    ...(down.length > 0 ? { failing } : {}),
    ...(changed ? { upstream: changed.name, now: changed.state } : {}),
    ...(reqId === undefined ? {} : { reqId }),
  };
  const msg = `${p.network}: ${answering} of ${p.upstreams.length} upstreams answer`;
  const first = p.announced === undefined;
  p.announced = states;
  if (first && p.quietFirst) p.log.debug(line, msg);
  else if (down.length > 0) p.log.warn(line, msg);
  else p.log.info(line, msg);
}

/** Each upstream's state, by config index (C3 reports it; names, never URLs). */
export function healthReport(p: PoolState): UpstreamHealth[] {
  const best = p.head;
  const now = Date.now();
  return p.upstreams.map((u) => ({
    index: u.index,
    name: u.name,
    state: u.state,
    healthy: u.state === 'up',
    head: u.head,
    lag: u.head === null || best === null ? null : Math.max(0, best - u.head),
    latencyMs: u.latencyMs === null ? null : Math.round(u.latencyMs),
    ...(u.lastError === undefined ? {} : { lastError: inWords(u.lastError) }),
    ...(u.ahead ? { outlier: true as const } : {}),
    ...(u.markedUntil > now || leftOut(u, now) ? { misbehaving: { disagreements: disagreements(u), outOfRotation: leftOut(u, now) } } : {}),
  }));
}

/** C49, C55: times the upstream's answers disagreed with the other nodes', every method. */
function disagreements(u: Upstream): number {
  let n = 0;
  for (const v of u.calls.misbehaving.values()) n += v;
  return n;
}

