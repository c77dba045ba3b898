// Every network's upstream nodes: the HTTP pools and WebSocket hubs, heads and health reports (C3, C26).
import type { Logger } from 'pino';
import type { NetworkConfig, RpcConfig, WsConfig } from '../config/schema.ts';
import type { Notification, SubscriptionHub } from './ws/subscription-hub.ts';
import { SubscriptionHubs } from './ws/network-hubs.ts';
import { type ConsensusStats, type SamplingStats, type UpstreamCallStats, type UpstreamHealth, UpstreamPool } from './http/pool.ts';
import type { AnswerRoom, AttemptTracer } from './http/types.ts';

/** A new block seen on a network: its number, and its hash when a node pushed the header. */
export interface Head {
  network: string;
  number: number;
  hash: string | null;
}

type HeadListener = (head: Head) => void;

/**
 * One network's upstreams as `/health/ready` reports them (C3). `status`: `idle` before the
 * network's first use (its probes have not started), `unknown` while no upstream answered yet and
 * some were not heard from, `up` when all answer, `degraded` when some do, `down` when every one
 * failed its latest call or probe (calls then fail at once).
 */
export interface NetworkHealth {
  status: 'idle' | 'unknown' | 'up' | 'degraded' | 'down';
  /** In words: "1 of 2 upstreams answer". */
  summary: string;
  answering: number;
  total: number;
  /** The best head among the answering upstreams. */
  head: number | null;
  upstreams: UpstreamHealth[];
}

interface HeadFeed {
  listeners: Set<HeadListener>;
  last: number;
  /** Stops the WebSocket subscription that feeds it, if any. */
  stop: (() => void) | undefined;
}

/** The settings node access reads: timeouts and limits of `rpc`, the upstream side of `ws`, and the networks' nodes. */
export interface UpstreamsSettings {
  rpc: RpcConfig;
  ws: WsConfig;
  networks: readonly NetworkConfig[];
}

/**
 * Everything that talks to nodes (C26, C32): per network an HTTP pool (health, heads, failover)
 * and a WebSocket subscription hub, plus `heads(network)` for background features. The RPC
 * pipeline, the faucet and the block follower are each handed this object; none builds its own.
 */
export class Upstreams {
  readonly #pools = new Map<string, UpstreamPool>();
  readonly #started = new Set<string>();
  /** The first probe rounds of the pools started by startAll. */
  readonly #firstRounds: Promise<void>[] = [];
  readonly #hubs: SubscriptionHubs;
  readonly #networks: readonly NetworkConfig[];
  readonly #heads = new Map<string, HeadFeed>();
  readonly #log: Logger;

  /**
   * `tracer`: C58, spans for the attempts of traced requests (absent while tracing is off).
   * `room`: C60, the instance's room for answers in memory, shared with the transports (unbounded when not given).
   */
  constructor(settings: UpstreamsSettings, logger: Logger, tracer?: AttemptTracer, room?: AnswerRoom) {
    const r = settings.rpc;
    const ws = settings.ws;
    this.#log = logger;
    this.#networks = settings.networks;
    for (const n of settings.networks) {
      this.#pools.set(
        n.slug,
        new UpstreamPool({
          network: n.slug,
          upstreams: n.upstreams,
          requestTimeoutMs: r.requestTimeoutMs,
          methodTimeoutsMs: r.methodTimeoutsMs,
          totalTimeoutMs: r.totalTimeoutMs,
          maxLagBlocks: r.maxLagBlocks,
          healthIntervalMs: r.healthIntervalMs,
          connections: r.connectionsPerUpstream,
          maxResponseBytes: r.maxResponseBytes,
          ...(room ? { room } : {}),
          // C26: provider errors, hedged reads (a network may fix its own delay), broadcast, archive routing.
          providerErrors: r.providerErrors,
          hedge: n.hedgeDelayMs === undefined ? r.hedge : { ...r.hedge, delayMs: n.hedgeDelayMs },
          broadcastTransactions: r.broadcastTransactions,
          ...(n.pruneDepthBlocks === undefined ? {} : { pruneDepthBlocks: n.pruneDepthBlocks }),
          ...(n.blockTimeMs === undefined ? {} : { blockTimeMs: n.blockTimeMs }), // C26: bounds a head's jump
          ...(n.consensus === undefined ? {} : { consensus: n.consensus }), // C49
          // C55: the network's rate and methods over the gateway's; off on a network of one upstream (the pool says).
          sampling: { ...r.sampling, ...(n.sampling?.rate === undefined ? {} : { rate: n.sampling.rate }), ...(n.sampling?.methods === undefined ? {} : { methods: n.sampling.methods }) },
          logger,
          tracer,
          onHead: (head) => this.#emitHead(n.slug, head, null),
        }),
      );
    }
    this.#hubs = new SubscriptionHubs({
      logger,
      timeoutMs: ws.upstreamTimeoutMs,
      reconnectMinMs: ws.reconnectMinMs,
      reconnectMaxMs: ws.reconnectMaxMs,
      pingIntervalMs: ws.pingIntervalMs,
      idleTimeoutMs: ws.idleTimeoutMs,
      gapFillMaxBlocks: ws.gapFillMaxBlocks, // C26: catch up after a reconnect
    });
  }

  /** The HTTP pool of a network; its health probes start on first use unless `startAll` ran. */
  pool(slug: string): UpstreamPool {
    const pool = this.#pools.get(slug);
    if (!pool) throw new Error(`no upstream pool for ${slug}`); // a broken invariant: callers pass a configured network
    if (!this.#started.has(slug)) {
      this.#started.add(slug);
      pool.start();
    }
    return pool;
  }

  /** The WebSocket subscription hub of a network (made on first use from its `ws` upstreams). */
  hub(slug: string): SubscriptionHub {
    const network = this.#networks.find((n) => n.slug === slug);
    if (!network) throw new Error(`no upstreams for ${slug}`); // a broken invariant: callers pass a configured network
    return this.#hubs.get(network);
  }

  /** The hub of a network if one was made (tests and metrics). */
  peekHub(slug: string): SubscriptionHub | undefined {
    return this.#hubs.peek(slug);
  }

  hubStats(): ReturnType<SubscriptionHubs['stats']> {
    return this.#hubs.stats();
  }

  /**
   * New blocks of a network, in increasing number, for background features (whale alerts,
   * webhooks, intents). Fed by a shared `newHeads` subscription where the network has WebSocket
   * upstreams, and always by the pool's head probes, so a dead WebSocket never silences it.
   * Numbers can skip (several blocks between two probes): a consumer that needs every block reads
   * the range itself. Returns the function that stops listening.
   */
  onHead(slug: string, listener: HeadListener): () => void {
    let feed = this.#heads.get(slug);
    if (!feed) {
      feed = { listeners: new Set(), last: -1, stop: undefined };
      this.#heads.set(slug, feed);
      feed.stop = this.#followNewHeads(slug);
    }
    feed.listeners.add(listener);
    this.pool(slug);
    const f = feed;
    return () => {
      f.listeners.delete(listener);
      if (f.listeners.size === 0) {
        f.stop?.();
        this.#heads.delete(slug);
      }
    };
  }

  /** `onHead` as an async iterable; ends when `signal` aborts. Heads arriving faster than read keep only the newest. */
  async *heads(slug: string, signal?: AbortSignal): AsyncGenerator<Head> {
    let latest: Head | null = null;
    let wake: (() => void) | null = null;
    const off = this.onHead(slug, (h) => {
      latest = h;
      wake?.();
    });
    const aborted = () => wake?.();
    signal?.addEventListener('abort', aborted);
    try {
      while (!signal?.aborted) {
        if (latest === null) await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        const h: Head | null = latest;
        latest = null;
        if (h !== null && !signal?.aborted) yield h;
      }
    } finally {
      off();
      signal?.removeEventListener('abort', aborted);
    }
  }

  #followNewHeads(slug: string): (() => void) | undefined {
    const network = this.#networks.find((n) => n.slug === slug);
    if (!network?.upstreams.some((u) => u.ws)) return undefined;
    const hub = this.#hubs.get(network);
    const subscriber = {
      deliver: ({ resultText }: Notification) => {
        const m = /"number"\s*:\s*"(0x[0-9a-fA-F]+)"/.exec(resultText);
        const h = /"hash"\s*:\s*"(0x[0-9a-fA-F]{64})"/.exec(resultText);
        if (!m?.[1]) return;
        const n = Number.parseInt(m[1], 16);
        // C26: one node's word that the chain jumped far ahead would silence every later head; the probes decide.
        if (this.pool(slug).believes(n)) this.#emitHead(slug, n, h?.[1] ?? null);
      },
    };
    hub.subscribe({ key: 'newHeads', params: ['newHeads'] }, subscriber).catch((err: unknown) => {
      this.#log.debug({ network: slug, error: (err as Error).message }, 'newHeads subscription failed; heads come from probes');
    });
    return () => hub.unsubscribe('newHeads', subscriber);
  }

  #emitHead(slug: string, number: number, hash: string | null): void {
    const feed = this.#heads.get(slug);
    if (!feed || number <= feed.last) return;
    feed.last = number;
    const head: Head = { network: slug, number, hash };
    for (const l of feed.listeners) {
      try {
        l(head);
      } catch (err) {
        this.#log.error({ err, network: slug }, 'head listener failed');
      }
    }
  }

  /**
   * Start probing every network now (the server does; tests leave pools idle until used). The
   * first round's per-network lines go at debug: {@link firstRound} sums them up for the start.
   */
  startAll(): void {
    // C32: every shipped network has a WebSocket upstream; UPSTREAM_<SLUG> replaces a network's
    // upstreams, its WebSocket one too, and eth_subscribe there would fail with no word at start.
    const without = this.#networks.filter((n) => !n.upstreams.some((u) => u.ws)).map((n) => n.slug);
    if (without.length > 0) {
      this.#log.warn(
        { networks: without },
        `no WebSocket upstream for ${without.join(', ')}: eth_subscribe there answers -32000 and new heads come from probes alone; UPSTREAM_<SLUG> replaces a network's upstreams, WebSocket ones included: give them with UPSTREAM_WS_<SLUG> (or ws in the config file)`,
      );
    }
    for (const [slug, pool] of this.#pools) {
      if (this.#started.has(slug)) continue;
      this.#started.add(slug);
      pool.start({ quietFirst: true });
      this.#firstRounds.push(pool.firstRound());
    }
  }

  /**
   * Once the first probe round of every network started by {@link startAll} is over: which networks
   * answer (at least one upstream up) and which do not.
   */
  async firstRound(): Promise<{ answering: string[]; down: string[] }> {
    await Promise.all(this.#firstRounds);
    const answering: string[] = [];
    const down: string[] = [];
    for (const [slug, n] of Object.entries(this.report())) (n.answering > 0 ? answering : down).push(slug);
    return { answering, down };
  }

  /** Per network: how many upstreams answer, each one's state, head, lag and last error (C3). */
  report(): Record<string, NetworkHealth> {
    const out: Record<string, NetworkHealth> = {};
    for (const [slug, pool] of this.#pools) {
      const upstreams = pool.health();
      const answering = upstreams.filter((u) => u.healthy).length;
      const total = upstreams.length;
      const down = upstreams.filter((u) => u.state === 'down').length;
      const status: NetworkHealth['status'] = !this.#started.has(slug)
        ? 'idle'
        : total > 0 && down === total
          ? 'down'
          : answering === total && total > 0
            ? 'up'
            : answering > 0
              ? 'degraded'
              : 'unknown';
      out[slug] = { status, summary: `${answering} of ${total} upstreams answer`, answering, total, head: answering > 0 ? pool.head() : null, upstreams };
    }
    return out;
  }

  /** Per network whose probes run: its upstreams' health, the calls sent to each, the sampled checks of answers and the consensus reads (for /metrics). */
  stats(): Array<{ network: string; health: UpstreamHealth[]; calls: UpstreamCallStats[]; samples: SamplingStats; consensus: ConsensusStats }> {
    const out: Array<{ network: string; health: UpstreamHealth[]; calls: UpstreamCallStats[]; samples: SamplingStats; consensus: ConsensusStats }> = [];
    for (const [slug, pool] of this.#pools) {
      if (this.#started.has(slug)) out.push({ network: slug, health: pool.health(), calls: pool.callStats(), samples: pool.samplingStats(), consensus: pool.consensusStats() });
    }
    return out;
  }

  async close(): Promise<void> {
    for (const feed of this.#heads.values()) feed.stop?.();
    this.#heads.clear();
    await Promise.all([this.#hubs.close(), ...[...this.#pools.values()].map((p) => p.close())]);
  }
}
