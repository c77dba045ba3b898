/**
 * The upstream pool's public types: an upstream and a pool as configured, a call's options and
 * answer, and what the pool reports (health, call statistics).
 */
import type { Clock } from '../../time/clock.ts';
import type { HedgeOptions } from './hedge.ts';
import type { ProviderErrorRule } from './provider-errors.ts';

/** One upstream node of a network, as in the config file (C26, C32). */
export interface UpstreamConfig {
  /** For logs and metrics; `<network>-<index>` when not set. Never the URL (it may hold a provider key). */
  readonly name?: string;
  readonly http: string;
  readonly ws?: string;
  /** Keeps the state of every block: calls on state older than `pruneDepthBlocks` go here first. */
  readonly archive?: boolean;
  /**
   * Share of the calls among equally good upstreams (smooth weighted round robin); 1 when unset.
   * When no upstream of the network sets one, the first listed takes every call and the others
   * are its backups.
   */
  readonly weight?: number;
}

/** The pino methods the pool uses; a pino logger fits as it is. */
export interface PoolLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface PoolOptions {
  /** Network slug, only for logs and errors. */
  network: string;
  upstreams: readonly UpstreamConfig[];
  /** Milliseconds one attempt on one upstream may take; 10_000 by default. */
  requestTimeoutMs?: number;
  /** Per-method attempt timeout in milliseconds (e.g. `{ eth_getLogs: 30_000 }`); a batch takes its largest. */
  methodTimeoutsMs?: Readonly<Record<string, number>>;
  /** Milliseconds a whole call may take, failover included; 15_000 by default. */
  totalTimeoutMs?: number;
  /** Blocks behind the best known head beyond which an upstream is skipped; 5 by default. */
  maxLagBlocks?: number;
  /** Milliseconds between `eth_blockNumber` probes; 5_000 by default. */
  healthIntervalMs?: number;
  /**
   * Milliseconds between the network's blocks; 250 (the fastest shipped chain) by default. Bounds
   * how far the network's head may move between two readings (C26).
   */
  blockTimeMs?: number;
  /** The clock the jump bound on heads (C26) reads; `Date.now` by default (tests hand in their own). */
  now?: Clock;
  /** Kept-alive connections per upstream; 32 by default. */
  connections?: number;
  /** Bytes an answer may have; a larger one is not read further and fails the call (-32000). 64 MiB by default. */
  maxResponseBytes?: number;
  /** C60: the instance's room for answers in memory, shared by every pool; unbounded when not given. */
  room?: AnswerRoom;
  logger?: PoolLogger;
  /** Called when the best known head rises (the `heads(network)` stream of the upstreams module). */
  onHead?: (head: number) => void;
  /** Node answers that move a read to the next node; {@link DEFAULT_PROVIDER_ERRORS} by default. */
  providerErrors?: readonly ProviderErrorRule[];
  /** Hedged reads; off when not given (the gateway's config turns them on). */
  hedge?: HedgeOptions;
  /** `eth_sendRawTransaction` to every healthy upstream at once; false when not given (the gateway's config turns it on). */
  broadcastTransactions?: boolean;
  /** Blocks of state a full node keeps; older state reads go to `archive` upstreams first. 128 by default. */
  pruneDepthBlocks?: number;
  /**
   * C49: these methods (single calls) are asked of `nodes` upstreams (2 by default) and answered
   * only when they agree; on disagreement one more is asked and the majority answered, a node
   * that disagreed left out for `penaltySeconds` (300 by default). Off when not given.
   */
  consensus?: { readonly methods: readonly string[]; readonly nodes?: number; readonly penaltySeconds?: number };
  /** C58: spans for the attempts of traced requests; absent while tracing is off. */
  tracer?: AttemptTracer | undefined;
  /**
   * C55: a share of the answers to single reads is checked in the background against other nodes
   * at the same block (sampling.ts). Off when not given, and on a pool of one upstream.
   */
  sampling?: SamplingOptions;
}

/**
 * C58: what the pool tells the tracing about its attempts (src/ops/tracing.ts implements it);
 * absent while tracing is off, so an attempt then costs one check of an undefined field.
 */
export interface AttemptTracer {
  /**
   * The span of one attempt, a child of the traced request under way; undefined outside one (a
   * health probe, background work). `headers`: the upstream's own, which the span's copy adds
   * `traceparent` to.
   */
  start(network: string, upstream: { readonly index: number; readonly name: string; readonly headers: Readonly<Record<string, string>> }, hedge: boolean): AttemptSpan | undefined;
}

/** One attempt's span: the headers to send (with `traceparent`), ended with the attempt's outcome. */
export interface AttemptSpan {
  readonly headers: Readonly<Record<string, string>>;
  /** `ok`: the node answered; `cancelled`: a hedge's loser; else the failure's kind, with its reason in our words. */
  end(outcome: 'ok' | 'cancelled' | FailureKind, reason?: string): void;
}

/** C55: answer sampling of one pool. */
export interface SamplingOptions {
  /** Share (0 to 1) of the answers to the methods sampled by default (state reads at a block, by the method catalogue) that is checked. */
  readonly rate: number;
  /** Per method: its own share (0: never); a method listed here is sampled even when it is not one of the default ones. */
  readonly methods?: Readonly<Record<string, number>>;
  /** Checks under way at once per pool; an answer picked while that many run is not checked. 4 by default. */
  readonly maxInFlight?: number;
  /** Disagreements within `windowSeconds` that take a node out of rotation. 3 by default. */
  readonly outAfter?: number;
  /** Seconds a disagreement counts (and a node stays marked, read last, after its latest one). 600 by default. */
  readonly windowSeconds?: number;
}

/**
 * C60: the room the instance has for answers in memory, shared by every pool and by the answers
 * waiting to be sent to clients (src/http/outbound.ts). An attempt takes room for a node's answer
 * once it is {@link ROOM_FROM_BYTES} or more, before holding its bytes, and gives it back once the
 * answer is handed on or dropped. Smaller answers never ask.
 */
export interface AnswerRoom {
  /**
   * Room for `bytes` more of a node's answer that holds `held` already: false when there is none
   * (the call is refused: 503, retry shortly). An answer read while no other is always has room,
   * up to `rpc.maxResponseBytes`, so none is refused forever.
   */
  take(bytes: number, held: number): boolean;
  /** Gives back room taken. */
  give(bytes: number): void;
}

/** C60: answers smaller than this take no room (a length check at most on the common path). */
export const ROOM_FROM_BYTES = 64 * 1024;

/** Options of one call through the pool. */
export interface CallOptions {
  /** The request this call belongs to: carried by the pool's log lines about it. */
  reqId?: string | undefined;
  /** C26, C53: the oldest block the request reads state at, as the gateway judged it (archive routing); absent: recent. */
  block?: number | null | undefined;
  /** A single eth_sendRawTransaction as judged: its signed transaction and the caller's id text (broadcast). */
  transaction?: { raw: string; id: string } | undefined;
}

/** A node's answer, byte for byte. */
export interface ForwardResult {
  /** The node's HTTP status (200 except for JSON-RPC bodies some providers send with a 4xx). */
  status: number;
  body: Buffer;
  /** Index of the upstream in the config; never its URL, which may hold a provider key. */
  upstream: number;
}

/**
 * `unknown`: neither answered nor failed yet (a pool starts so: an upstream is healthy only once
 * it answered); `up`: its latest call or probe got an answer; `down`: its latest one failed.
 */
export type UpstreamState = 'unknown' | 'up' | 'down';

export interface UpstreamHealth {
  index: number;
  /** The name from the config, or `<network>-<index>`; never the URL. */
  name: string;
  state: UpstreamState;
  /** True while its latest call or probe got an answer (`state` is `up`). */
  healthy: boolean;
  head: number | null;
  /** Blocks behind the head the network agrees on (0 for one ahead of it). */
  lag: number | null;
  /** Smoothed `eth_blockNumber` round trip. */
  latencyMs: number | null;
  /** Why the last call or probe failed, in words, while it is the most recent outcome ("connection refused (ECONNREFUSED)"). */
  lastError?: string;
  /** Present when its head is far above the head the network agrees on (C26): not trusted, read after every answering upstream in line or lagging. */
  outlier?: true;
  /**
   * C49, C55: present while it is marked misbehaving (its answers disagreed with the other nodes'):
   * `disagreements` within the sampling window, and whether it is out of rotation now.
   */
  misbehaving?: { disagreements: number; outOfRotation: boolean };
}

/** Calls sent to one upstream (health probes left out), for /metrics. */
export interface UpstreamCallStats {
  index: number;
  name: string;
  /** Attempts per duration bucket of `UPSTREAM_BUCKETS` (not cumulative), plus one for +Inf. */
  buckets: Float64Array;
  /** Seconds, all attempts. */
  sum: number;
  count: number;
  /** Failed attempts by kind (`timeout`, `connect`, `http_5xx`, ...). */
  errors: ReadonlyMap<FailureKind, number>;
  /** C49, C55: by method, times it disagreed with the majority of a consensus read or of a sampled check. */
  misbehaving: ReadonlyMap<string, number>;
}

/** C55: what the sampled checks of a pool came to, for /metrics. */
export interface SamplingStats {
  /** The nodes asked gave the same answer. */
  agreed: number;
  /** A node disagreed with the majority and was marked. */
  disagreed: number;
  /** No verdict: a node gave no answer to compare, or the answers had no majority. */
  inconclusive: number;
  /** Picked but not checked: `maxInFlight` checks were under way already. */
  skipped: number;
}

/**
 * C49: what a consensus read came to (`junction_consensus_reads_total{outcome}`): `agreed`
 * (`consensus.nodes` agreed), `majority` (a disagreement settled by the majority), `no_consensus`
 * (the nodes contradicted each other with no majority; refused), `too_few_nodes` (fewer than
 * `consensus.nodes` agreed because nodes failed, were late or none was left; refused), `no_answer`
 * (no node gave a vote: the call failed as any read whose nodes all fail).
 */
export type ConsensusOutcome = 'agreed' | 'majority' | 'no_consensus' | 'too_few_nodes' | 'no_answer';

/** C49: consensus reads of a pool by method, then by outcome, for /metrics. */
export type ConsensusStats = ReadonlyMap<string, ReadonlyMap<ConsensusOutcome, number>>;

/** What went wrong with one attempt, as a bounded label. */
export type FailureKind =
  | 'timeout'
  | 'connect'
  | 'connection'
  | 'http_5xx'
  | 'http_429'
  | 'invalid_answer'
  | 'too_large'
  /** C60: the gateway had no room for the answer (not the node's doing: it is never marked for it). */
  | 'gateway_busy'
  /** A JSON-RPC error of the provider-errors table: throttled or out of capacity. */
  | 'node_busy'
  /** A JSON-RPC error of the provider-errors table: the node lacks the data (pruned, behind). */
  | 'node_missing';

/** Upper bounds (seconds) of the upstream call duration histogram. */
export const UPSTREAM_BUCKETS: readonly number[] = [0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
