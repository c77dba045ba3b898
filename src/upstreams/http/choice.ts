// Which upstream a call tries first, and which next (C26).
import { mayNeedArchive, needsArchive } from './archive.ts';
import type { PoolState, Upstream } from './state.ts';

/**
 * Which upstream a call tries first, and which next (C26): the order, archive routing and weights.
 *
 * Order: answering and in line with the network's head, then answering but lagging, then
 * answering with a head far above it (an outlier, C26: not trusted), then not heard from
 * yet, then marked misbehaving (its answers disagreed with the others', C49, C55), then failed
 * (last resort, soonest to recover first); within a group the faster latency class first, then
 * config order, so the operator's order holds unless a node is clearly faster. A node out of
 * rotation (C49's penalty, C55's repeated disagreement) is left out while another remains. Reads
 * of old state put archive nodes first; weights share the first place among equally good upstreams.
 */

const LATENCY_CLASS_MS = 20; // milliseconds; see latencyClass()

/**
 * The upstreams to try for one call, in order: {@link order}, with archive nodes first for reads
 * of old state (`block`: the oldest block the call reads state at, as the gateway judged it), and the first place shared by weight among equally good upstreams.
 */
export function candidatesFor(p: PoolState, methods: readonly string[], block: number | null | undefined): Upstream[] {
  let list = order(p);
  if (list.length < 2) return list;
  if (p.mixedArchive && mayNeedArchive(methods) && needsArchive(methods, block, p.head, p.pruneDepthBlocks)) {
    // C26: archive nodes first, but a node known down stays behind every answering one.
    const rank = (u: Upstream): number => (u.state === 'down' ? 2 : u.archive ? 0 : 1);
    list = [...list].sort((a, b) => rank(a) - rank(b));
  }
  return p.weighted ? spread(list) : list;
}

/** C49, C55: left out of the choice: in its consensus penalty, or out of rotation after repeated disagreement in sampled checks. */
export function leftOut(u: Upstream, now: number): boolean {
  return u.outOfRotation || u.misbehavingUntil > now;
}

/**
 * Smooth weighted round robin (as nginx's) among the leading upstreams that are equally good
 * (same group, same archive flag; the operator's weights outrank probe latency, whose jitter
 * would otherwise move nodes in and out of the share): the one picked goes first, the others
 * keep their order behind it as its failover.
 */
function spread(list: Upstream[]): Upstream[] {
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
 * The upstreams in the order to try (see the file comment). Kept until something changes it
 * (a failure, a recovery, a probe round, a mark) or an upstream's cool-down, penalty or mark
 * ends, at most a second, so a call does not sort the list again.
 */
export function order(p: PoolState): Upstream[] {
  const now = Date.now();
  if (p.ordered && now < p.orderedUntil) return p.ordered;
  let until = now + 1_000;
  for (const u of p.upstreams) {
    for (const t of [u.unhealthyUntil, u.misbehavingUntil, u.markedUntil]) if (t > now && t < until) until = t;
  }
  p.ordered = sorted(p, now);
  p.orderedUntil = until;
  return p.ordered;
}

const DOWN = 5;

function sorted(p: PoolState, now: number): Upstream[] {
  // The head and the outliers are set when heads or states change (health.ts updateHead).
  const best = p.head;
  const group = (u: Upstream): number => {
    if (u.state === 'down') return DOWN;
    // C49, C55: its answers disagreed with the others': read after every node not marked.
    if (u.markedUntil > now) return 4;
    if (u.state === 'unknown') return 3;
    // C26: a head far above the one the network agrees on is not trusted; a lagging node is
    // behind but honest, so it is read first.
    if (u.ahead) return 2;
    return u.head !== null && best !== null && best - u.head > p.maxLagBlocks ? 1 : 0;
  };
  for (const u of p.upstreams) u.tier = group(u);
  // When every node is out of rotation the list stays whole: a wrong node is better than no node.
  let list = p.upstreams.filter((u) => !leftOut(u, now));
  if (list.length === 0) list = p.upstreams;
  return list
    .map((u) => ({ u, g: u.tier }))
    .sort(
      (a, b) =>
        a.g - b.g ||
        (a.g === DOWN ? a.u.unhealthyUntil - b.u.unhealthyUntil : 0) ||
        latencyClass(a.u.latencyMs) - latencyClass(b.u.latencyMs) ||
        a.u.index - b.u.index,
    )
    .map(({ u }) => u);
}

/**
 * Latency classes double in width (under 40 ms, under 80 ms, under 160 ms, ...): a node must be
 * clearly faster to overtake one listed before it, and jitter does not reorder the list.
 */
function latencyClass(ms: number | null): number {
  if (ms === null) return Number.POSITIVE_INFINITY;
  return Math.floor(Math.log2(Math.max(ms, LATENCY_CLASS_MS) / LATENCY_CLASS_MS));
}
