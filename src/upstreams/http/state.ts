// What an upstream pool knows, shared by its parts (health.ts, choice.ts, failover.ts).
import { createSecureContext, type SecureContext } from 'node:tls';
import { Pool } from 'undici';
import { type Clock, systemClock } from '../../time/clock.ts';
import { DEFAULT_HEDGE, LatencyWindow, type HedgeOptions } from './hedge.ts';
import { DEFAULT_PROVIDER_ERRORS, ProviderErrors } from './provider-errors.ts';
import { type AnswerRoom, type AttemptTracer, type ConsensusOutcome, type FailureKind, type PoolLogger, type PoolOptions, type SamplingOptions, UPSTREAM_BUCKETS, type UpstreamState } from './types.ts';

/**
 * What an upstream pool knows, shared by its parts: the settings, one record per upstream, and
 * what the health, choice and sending functions (health.ts, choice.ts, failover.ts) keep between
 * calls. Only the pool (pool.ts) makes one and hands it to them; nothing outside src/upstreams
 * sees it.
 */

/** C49: the consensus settings of a pool, read once. */
export interface ConsensusSettings {
  readonly methods: ReadonlySet<string>;
  readonly nodes: number;
  readonly penaltyMs: number;
}

/** C49: what the consensus reads of a pool came to, and the warn line about reads refused for too few nodes. */
export interface ConsensusState {
  /** By method, then by outcome (`junction_consensus_reads_total`). */
  readonly reads: Map<string, Map<ConsensusOutcome, number>>;
  /** When the latest warn line about reads refused for too few nodes went out (epoch ms; 0: never). */
  warnedAt: number;
  /** Reads refused for too few nodes since that line (said in the next one). */
  unsaid: number;
}

/** C55: the sampling settings of a pool, read once. */
export interface SamplingSettings {
  /** The share of the answers checked, for the methods sampled by default. */
  readonly rate: number;
  /** Methods with a share of their own (0: never). */
  readonly rates: ReadonlyMap<string, number>;
  readonly maxInFlight: number;
  readonly outAfter: number;
  readonly windowMs: number;
  /** Each method's share once worked out (sampling.ts `rateOf`), so a call costs one map lookup. */
  readonly known: Map<string, number>;
}

/** C55: the checks of a pool under way, and their outcomes so far. */
export interface SamplingState {
  inFlight: number;
  /** The checks under way (tests wait for them). */
  readonly running: Set<Promise<void>>;
  agreed: number;
  disagreed: number;
  inconclusive: number;
  skipped: number;
  /** Upstreams out of rotation now: while there are some, a check runs at least every health interval to find them agreeing again. */
  outCount: number;
  /** When the latest check started (epoch ms). */
  lastProbeAt: number;
}

function samplingSettings(o: SamplingOptions): SamplingSettings | undefined {
  const rates = new Map(Object.entries(o.methods ?? {}));
  if (o.rate <= 0 && ![...rates.values()].some((r) => r > 0)) return undefined;
  return {
    rate: o.rate,
    rates,
    maxInFlight: o.maxInFlight ?? 4,
    outAfter: o.outAfter ?? 3,
    windowMs: (o.windowSeconds ?? 600) * 1000,
    known: new Map(),
  };
}

/** One upstream node: its connection pool and what is known about it. */
export interface Upstream {
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
  readonly calls: { buckets: Float64Array; sum: number; count: number; errors: Map<FailureKind, number>; misbehaving: Map<string, number> };
  /** C49: until when (epoch ms) it is left out of choice for disagreeing with a consensus majority; 0: not. */
  misbehavingUntil: number;
  /** C49, C55: until when (epoch ms) it is marked misbehaving (reported, and read last by choice.ts); 0: never marked. */
  markedUntil: number;
  /** C55: when its sampled answers disagreed within the window (epoch ms, oldest first): enough of them take it out of rotation. */
  strikes: number[];
  /** C55: out of rotation (left out by choice.ts) until a sampled check finds it agreeing again. */
  outOfRotation: boolean;
  readonly archive: boolean;
  readonly weight: number;
  /** Smooth weighted round robin: the running score. */
  current: number;
  /** Group from the last sort (in line, lagging, ahead, unknown, marked, down): weights share the calls within one. */
  tier: number;
  /** Its head is far above the head the network agrees on (C26): not trusted, read after the others. */
  ahead: boolean;
  /** Durations of its recent calls (the hedge delay is their p90). */
  readonly window: LatencyWindow;
}

let tlsContext: SecureContext | undefined;
/** The TLS context shared by the upstream pools' connections (made on first use). */
function sharedTlsContext(): SecureContext {
  return (tlsContext ??= createSecureContext());
}

/** The settings and shared knowledge of one pool (see the file comment). */
export class PoolState {
  readonly network: string;
  readonly upstreams: Upstream[];
  readonly requestTimeoutMs: number;
  readonly methodTimeoutsMs: Readonly<Record<string, number>>;
  readonly totalTimeoutMs: number;
  readonly maxLagBlocks: number;
  readonly healthIntervalMs: number;
  /** Milliseconds between the network's blocks, or the fastest shipped chain's when not configured: bounds a head's jump. */
  readonly blockTimeMs: number;
  /** Now, for the jump bound on heads (health.ts `updateHead`, `jumpCeiling`). */
  readonly now: Clock;
  readonly maxResponseBytes: number;
  /** C60: the instance's room for answers in memory (attempt.ts takes it for large answers). */
  readonly room: AnswerRoom | undefined;
  readonly log: PoolLogger | undefined;
  /** C58: spans for the attempts of traced requests; undefined while tracing is off. */
  readonly tracer: AttemptTracer | undefined;
  readonly onHead: ((head: number) => void) | undefined;
  readonly providerErrors: ProviderErrors;
  readonly hedge: HedgeOptions | undefined;
  readonly broadcastTransactions: boolean;
  readonly pruneDepthBlocks: number;
  /** C49: consensus reads of this network, undefined when off. */
  readonly consensus: ConsensusSettings | undefined;
  /**
   * C49: the delay after which a consensus read also asks the next node in place of one that has
   * not answered: the hedge settings, used even when hedging of ordinary reads is off.
   */
  readonly replaceDelay: HedgeOptions;
  /** C49: what the consensus reads came to (all empty while consensus is off). */
  readonly consensusReads: ConsensusState = { reads: new Map(), warnedAt: 0, unsaid: 0 };
  /** C55: answer sampling, undefined when off (no rate, or one upstream). */
  readonly sampling: SamplingSettings | undefined;
  /** C55: the checks under way and what they came to. */
  readonly samples: SamplingState = { inFlight: 0, running: new Set(), agreed: 0, disagreed: 0, inconclusive: 0, skipped: 0, outCount: 0, lastProbeAt: 0 };
  /** Some upstreams are archive nodes and some are not: old-state reads are worth routing. */
  readonly mixedArchive: boolean;
  /** Some upstream has a weight: equally good upstreams share the calls. */
  readonly weighted: boolean;
  /** The network's head (health.ts `updateHead`), null before any probe answered; read per call, set only when heads or states change. */
  head: number | null = null;
  /** The highest head believed so far (-1: none yet): a reading cannot jump far past it. */
  lastHead = -1;
  /**
   * The highest head a reading may bring (health.ts `jumpCeiling`) as it stood at `ceilingAt`: it
   * grows with time at 4 times the network's pace and is never more than 32 blocks above a head
   * just believed, so a node climbing faster than the chain is caught however often it is read.
   */
  ceiling = Number.POSITIVE_INFINITY;
  ceilingAt = 0;
  ordered: Upstream[] | null = null;
  orderedUntil = 0;
  timer: NodeJS.Timeout | undefined;
  started = false;
  closed = false;
  nextId = 1;
  /** Upstreams whose state is `down`: all of them means the network is down. */
  downCount = 0;
  /** Probe rounds under way (a round reports once at its end, not per upstream). */
  probing = 0;
  /** The states last reported in the log ("x of n upstreams answer"), to report changes only. */
  announced: string | undefined;
  /** The first report goes at debug: the start says every network's in one summary line instead. */
  quietFirst = false;
  /** Called once the first probe round is over. */
  onFirstRound: (() => void) | undefined;

  constructor(opts: PoolOptions) {
    this.network = opts.network;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.methodTimeoutsMs = opts.methodTimeoutsMs ?? {};
    this.totalTimeoutMs = opts.totalTimeoutMs ?? 15_000;
    this.maxLagBlocks = opts.maxLagBlocks ?? 5;
    this.healthIntervalMs = opts.healthIntervalMs ?? 5_000;
    this.blockTimeMs = opts.blockTimeMs ?? 250;
    this.now = opts.now ?? systemClock;
    this.maxResponseBytes = opts.maxResponseBytes ?? 64 * 1024 * 1024;
    this.room = opts.room;
    this.log = opts.logger;
    this.tracer = opts.tracer;
    this.onHead = opts.onHead;
    this.providerErrors = new ProviderErrors(opts.providerErrors ?? DEFAULT_PROVIDER_ERRORS);
    this.hedge = opts.hedge?.enabled ? opts.hedge : undefined;
    this.broadcastTransactions = opts.broadcastTransactions ?? false;
    this.pruneDepthBlocks = opts.pruneDepthBlocks ?? 128;
    this.consensus =
      opts.consensus === undefined
        ? undefined
        : { methods: new Set(opts.consensus.methods), nodes: opts.consensus.nodes ?? 2, penaltyMs: (opts.consensus.penaltySeconds ?? 300) * 1000 };
    this.replaceDelay = opts.hedge ?? DEFAULT_HEDGE;
    this.sampling = opts.upstreams.length < 2 || opts.sampling === undefined ? undefined : samplingSettings(opts.sampling);
    this.mixedArchive = opts.upstreams.some((u) => u.archive === true) && opts.upstreams.some((u) => u.archive !== true);
    this.weighted = opts.upstreams.some((u) => u.weight !== undefined);
    const connections = opts.connections ?? 32;
    this.upstreams = opts.upstreams.map((cfg, index) => {
      let url: URL;
      try {
        url = new URL(cfg.http);
      } catch {
        // A broken invariant: the config schema admits only http(s) URLs.
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
        calls: { buckets: new Float64Array(UPSTREAM_BUCKETS.length + 1), sum: 0, count: 0, errors: new Map<FailureKind, number>(), misbehaving: new Map<string, number>() },
        misbehavingUntil: 0,
        markedUntil: 0,
        strikes: [],
        outOfRotation: false,
        archive: cfg.archive === true,
        weight: cfg.weight ?? 1,
        current: 0,
        tier: 0,
        ahead: false,
        window: new LatencyWindow(),
      } satisfies Upstream;
    });
  }


  /** Something that decides the order changed (a failure, a recovery, a probe round). */
  invalidate(): void {
    this.ordered = null;
  }
}

/** Counts one attempt's duration in an upstream's call histogram. */
export function observe(c: Upstream['calls'], seconds: number): void {
  let i = 0;
  while (i < UPSTREAM_BUCKETS.length && seconds > (UPSTREAM_BUCKETS[i] as number)) i++;
  c.buckets[i] = (c.buckets[i] ?? 0) + 1;
  c.sum += seconds;
  c.count += 1;
}

/** C49, C55: counts one disagreement of `u` with the other nodes on `method` (junction_upstream_misbehaving_total). */
export function countDisagreement(u: Upstream, method: string): void {
  u.calls.misbehaving.set(method, (u.calls.misbehaving.get(method) ?? 0) + 1);
}
