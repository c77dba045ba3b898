import { parseHead } from './answers.ts';
import { attempt } from './attempt.ts';
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

/** Starts the periodic health probes (one round at once); the timers do not keep the process alive. */
export function startProbes(p: PoolState): void {
  if (p.started || p.closed) return;
  p.started = true;
  const tick = async (): Promise<void> => {
    await checkHealth(p);
    p.onFirstRound?.();
    p.onFirstRound = undefined;
    if (p.closed) return;
    p.timer = setTimeout(tick, p.healthIntervalMs);
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
        const outcome = await attempt(p, u, body, timeoutMs, (_status, buf) => parseHead(buf));
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
  const best = bestHead(p, Date.now());
  if (best !== null && best > p.lastHead) {
    p.lastHead = best;
    p.onHead?.(best);
  }
}

/** True while the probes run and every upstream is known to be down: calls fail at once. */
export function isDown(p: PoolState): boolean {
  return p.started && p.upstreams.length > 0 && p.downCount === p.upstreams.length;
}

/** The head the healthy upstreams agree on (among all when none is healthy); see {@link agreedHead}. */
export function bestHead(p: PoolState, now: number): number | null {
  // Kept with the order: both change only on a failure, a recovery, a probe round or a cool-down's end.
  if (p.best !== undefined && p.ordered !== null && now < p.orderedUntil) return p.best;
  const healthy: number[] = [];
  const any: number[] = [];
  for (const u of p.upstreams) {
    if (u.head === null) continue;
    any.push(u.head);
    if (u.unhealthyUntil <= now) healthy.push(u.head);
  }
  const best = agreedHead(healthy.length > 0 ? healthy : any, p.maxLagBlocks);
  if (p.ordered !== null && now < p.orderedUntil) p.best = best;
  return best;
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
  const best = bestHead(p, Date.now());
  return p.upstreams.map((u) => ({
    index: u.index,
    name: u.name,
    state: u.state,
    healthy: u.state === 'up',
    head: u.head,
    lag: u.head === null || best === null ? null : Math.max(0, best - u.head),
    latencyMs: u.latencyMs === null ? null : Math.round(u.latencyMs),
    ...(u.lastError === undefined ? {} : { lastError: inWords(u.lastError) }),
    ...(u.head !== null && best !== null && u.head - best > p.maxLagBlocks ? { outlier: true as const } : {}),
  }));
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
