// What the RPC side shows on /metrics besides its calls: the upstream pools (calls, failures,
// health) and the response cache, read at scrape time; and the labels of RPC methods.
import { type Metrics, RpcCallMetrics } from './metrics.ts';
import { WEBSOCKET_METHODS } from '../methods/catalogue.ts';

interface UpstreamHealthView {
  name: string;
  state: string;
  head: number | null;
  lag: number | null;
  latencyMs: number | null;
  outlier?: true;
  misbehaving?: { outOfRotation: boolean };
}

/** What the upstream metrics read (the `Upstreams` of the app). */
interface UpstreamsView {
  stats(): Array<{
    network: string;
    health: readonly UpstreamHealthView[];
    calls: ReadonlyArray<{ name: string; buckets: ArrayLike<number>; sum: number; count: number; errors: ReadonlyMap<string, number>; misbehaving: ReadonlyMap<string, number> }>;
    samples: { agreed: number; disagreed: number; inconclusive: number; skipped: number };
    /** C49: consensus reads by method, then by outcome. */
    consensus: ReadonlyMap<string, ReadonlyMap<string, number>>;
  }>;
}

/**
 * Upstream figures by network and upstream name (never a URL): call durations and failures, and
 * the health probes' view (answering, head, lag, probe latency). Networks not used yet (no probes
 * running) are left out.
 */
export function observeUpstreams(metrics: Metrics, upstreams: UpstreamsView, bounds: readonly number[]): void {
  metrics.defineHistogram('junction_upstream_request_duration_seconds', 'Calls to upstream nodes (health probes left out): seconds per attempt, by network and upstream', bounds, function* () {
    for (const n of upstreams.stats()) for (const c of n.calls) yield { labels: { network: n.network, upstream: c.name }, buckets: c.buckets, sum: c.sum, count: c.count };
  });
  metrics.define({
    name: 'junction_upstream_errors_total',
    help: 'Failed attempts on upstream nodes by network, upstream and kind (timeout, connect, connection, http_5xx, http_429, invalid_answer, too_large, gateway_busy, node_busy, node_missing)',
    type: 'counter',
    labelNames: ['network', 'upstream', 'kind'],
    *read() {
      for (const n of upstreams.stats()) for (const c of n.calls) for (const [kind, v] of c.errors) yield [{ network: n.network, upstream: c.name, kind }, v] as const;
    },
  });
  // C49, C55: a node outside the majority of a consensus read or of a sampled check.
  metrics.define({
    name: 'junction_upstream_misbehaving_total',
    help: 'Answers of the upstream that disagreed with the majority of the other nodes, by method: in consensus reads (then left out for consensus.penaltySeconds) and in sampled checks (then marked, read last; out of rotation after rpc.sampling.outAfter)',
    type: 'counter',
    labelNames: ['network', 'upstream', 'method'],
    *read() {
      for (const n of upstreams.stats()) for (const c of n.calls) for (const [method, v] of c.misbehaving) yield [{ network: n.network, upstream: c.name, method }, v] as const;
    },
  });
  // C49: what consensus reads came to; too_few_nodes and no_consensus are refused (-32000, HTTP 502).
  metrics.define({
    name: 'junction_consensus_reads_total',
    help: 'Consensus reads by network, method and outcome: agreed (consensus.nodes agreed), majority (a disagreement settled by the majority), no_consensus (the nodes disagreed without a majority; refused), too_few_nodes (fewer than consensus.nodes agreed because nodes failed, were late or none was left to ask; refused), no_answer (no node answered)',
    type: 'counter',
    labelNames: ['network', 'method', 'outcome'],
    *read() {
      for (const n of upstreams.stats()) for (const [method, outcomes] of n.consensus) for (const [outcome, v] of outcomes) yield [{ network: n.network, method, outcome }, v] as const;
    },
  });
  // C55: sampled checks of answers against another node at the same block.
  metrics.define({
    name: 'junction_upstream_samples_total',
    help: 'Answers checked in the background against other nodes at the same block, by outcome: agreed, disagreed (a node marked), inconclusive (no two answers to compare, or no majority), skipped (too many checks under way)',
    type: 'counter',
    labelNames: ['network', 'outcome'],
    *read() {
      for (const n of upstreams.stats()) for (const [outcome, v] of Object.entries(n.samples)) yield [{ network: n.network, outcome }, v] as const;
    },
  });
  const perUpstream = (name: string, help: string, value: (h: UpstreamHealthView) => number | null) =>
    metrics.define({
      name,
      help,
      type: 'gauge',
      labelNames: ['network', 'upstream'],
      *read() {
        for (const n of upstreams.stats()) {
          for (const h of n.health) {
            const v = value(h);
            if (v !== null) yield [{ network: n.network, upstream: h.name }, v] as const;
          }
        }
      },
    });
  perUpstream('junction_upstream_up', '1 while the upstream answers (its latest call or probe succeeded), else 0', (h) => (h.state === 'up' ? 1 : 0));
  perUpstream('junction_upstream_head', 'Latest block number the upstream reported to the health probe', (h) => h.head);
  perUpstream('junction_upstream_lag_blocks', 'Blocks the upstream is behind the head its network agrees on', (h) => h.lag);
  // C26: a node claiming a head far above the others' is not trusted.
  perUpstream('junction_upstream_outlier', '1 while the upstream reports a head far above the one its network agrees on (not trusted, read after the others), else 0', (h) => (h.outlier ? 1 : 0));
  // C49, C55: answers that disagreed with the other nodes'.
  perUpstream('junction_upstream_marked', '1 while the upstream is marked misbehaving (its answers disagreed with the other nodes\', read last), 2 while it is out of rotation, else 0', (h) =>
    h.misbehaving === undefined ? 0 : h.misbehaving.outOfRotation ? 2 : 1,
  );
  perUpstream('junction_upstream_probe_latency_seconds', 'Smoothed round trip of the eth_blockNumber health probe', (h) => (h.latencyMs === null ? null : h.latencyMs / 1000));
  metrics.define({
    name: 'junction_network_upstreams_answering',
    help: 'Upstreams of the network that answer now (0: calls fail at once with -32000)',
    type: 'gauge',
    labelNames: ['network'],
    *read() {
      for (const n of upstreams.stats()) yield [{ network: n.network }, n.health.filter((h) => h.state === 'up').length] as const;
    },
  });
  metrics.define({
    name: 'junction_network_upstreams',
    help: 'Upstreams configured for the network',
    type: 'gauge',
    labelNames: ['network'],
    *read() {
      for (const n of upstreams.stats()) yield [{ network: n.network }, n.health.length] as const;
    },
  });
}

/** What the cache metrics read (the response cache, C44). */
interface CacheView {
  stats(): Record<string, { hits: number; misses: number; coalesced: number; stored: number; evicted: number; bytes: number; entries: number }>;
}

/** The response cache's counters by network (C44). */
export function observeCache(metrics: Metrics, cache: CacheView): void {
  const each = (pick: (s: ReturnType<CacheView['stats']>[string]) => number) =>
    function* () {
      for (const [network, s] of Object.entries(cache.stats())) yield [{ network }, pick(s)] as const;
    };
  const counter = (name: string, help: string, pick: (s: ReturnType<CacheView['stats']>[string]) => number) =>
    metrics.define({ name, help, type: 'counter', labelNames: ['network'], read: each(pick) });
  counter('junction_rpc_cache_hits_total', 'Cacheable calls answered from memory', (s) => s.hits);
  counter('junction_rpc_cache_misses_total', 'Cacheable calls that went to a node (or joined a call in flight)', (s) => s.misses);
  counter('junction_rpc_cache_coalesced_total', 'Calls that joined an identical call in flight instead of calling a node', (s) => s.coalesced);
  counter('junction_rpc_cache_evictions_total', 'Entries pushed out by the size bound', (s) => s.evicted);
  metrics.define({ name: 'junction_rpc_cache_bytes', help: 'Characters (keys and answers) held by the cache', type: 'gauge', labelNames: ['network'], read: each((s) => s.bytes) });
}

/** The method labels of `junction_rpc_requests_total`: every configured name; anything else is `other`. */
export function rpcMethodLabels(methods: {
  standard: readonly string[];
  native: Readonly<Record<string, string>>;
  planExtras: Readonly<Record<string, readonly string[]>>;
}): string[] {
  return [...methods.standard, ...Object.keys(methods.native), ...Object.values(methods.planExtras).flat(), ...WEBSOCKET_METHODS];
}

/**
 * The RPC figures of an app: calls by network, method, outcome and code (handed to the
 * pipeline), upstream health and calls, and the response cache's counters when it is on.
 */
export function observeRpc(
  metrics: Metrics,
  deps: { methods: Parameters<typeof rpcMethodLabels>[0]; upstreams: UpstreamsView; upstreamBuckets: readonly number[]; cache?: CacheView | undefined },
): RpcCallMetrics {
  observeUpstreams(metrics, deps.upstreams, deps.upstreamBuckets);
  if (deps.cache) observeCache(metrics, deps.cache);
  return new RpcCallMetrics(metrics.registry, rpcMethodLabels(deps.methods));
}
