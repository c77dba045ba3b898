import { createSecureContext, type SecureContext } from 'node:tls';
import { Pool } from 'undici';
import { LatencyWindow, type HedgeOptions } from './hedge.ts';
import { DEFAULT_PROVIDER_ERRORS, ProviderErrors } from './provider-errors.ts';
import { type AnswerRoom, type FailureKind, type PoolLogger, type PoolOptions, UPSTREAM_BUCKETS, type UpstreamState } from './types.ts';

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
  readonly calls: { buckets: Float64Array; sum: number; count: number; errors: Map<FailureKind, number>; misbehaving: number };
  /** C49: until when (epoch ms) it is left out of choice for disagreeing with a consensus majority; 0: not. */
  misbehavingUntil: number;
  readonly archive: boolean;
  readonly weight: number;
  /** Smooth weighted round robin: the running score. */
  current: number;
  /** Group from the last sort (in line, lagging, ahead, unknown, down): weights share the calls within one. */
  tier: number;
  /** Its head is far above the head the network agrees on (issue 27): not trusted, read after the others. */
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
  readonly maxResponseBytes: number;
  /** C60: the instance's room for answers in memory (attempt.ts takes it for large answers). */
  readonly room: AnswerRoom | undefined;
  readonly log: PoolLogger | undefined;
  readonly onHead: ((head: number) => void) | undefined;
  readonly providerErrors: ProviderErrors;
  readonly hedge: HedgeOptions | undefined;
  readonly broadcastTransactions: boolean;
  readonly pruneDepthBlocks: number;
  /** C49: consensus reads of this network, undefined when off. */
  readonly consensus: ConsensusSettings | undefined;
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
    this.maxResponseBytes = opts.maxResponseBytes ?? 64 * 1024 * 1024;
    this.room = opts.room;
    this.log = opts.logger;
    this.onHead = opts.onHead;
    this.providerErrors = new ProviderErrors(opts.providerErrors ?? DEFAULT_PROVIDER_ERRORS);
    this.hedge = opts.hedge?.enabled ? opts.hedge : undefined;
    this.broadcastTransactions = opts.broadcastTransactions ?? false;
    this.pruneDepthBlocks = opts.pruneDepthBlocks ?? 128;
    this.consensus =
      opts.consensus === undefined
        ? undefined
        : { methods: new Set(opts.consensus.methods), nodes: opts.consensus.nodes ?? 2, penaltyMs: (opts.consensus.penaltySeconds ?? 300) * 1000 };
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
        calls: { buckets: new Float64Array(UPSTREAM_BUCKETS.length + 1), sum: 0, count: 0, errors: new Map<FailureKind, number>(), misbehaving: 0 },
        misbehavingUntil: 0,
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
