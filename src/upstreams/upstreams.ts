import type { Logger } from 'pino';
import type { Config } from '../config/schema.ts';
import { UpstreamPool } from './pool.ts';

/** One upstream pool per network, made from config (C26, C32). */
export class UpstreamPools {
  readonly #pools = new Map<string, UpstreamPool>();
  readonly #started = new Set<string>();

  constructor(config: Config, logger: Logger) {
    const r = config.rpc;
    for (const n of config.networks) {
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
          logger,
        }),
      );
    }
  }

  /** The pool of a network; its health probes start on first use unless `startAll` ran. */
  get(slug: string): UpstreamPool {
    const pool = this.#pools.get(slug);
    if (!pool) throw new Error(`no upstream pool for ${slug}`);
    if (!this.#started.has(slug)) {
      this.#started.add(slug);
      pool.start();
    }
    return pool;
  }

  /** Start probing every network now (the server does; tests leave pools idle until used). */
  startAll(): void {
    for (const slug of this.#pools.keys()) this.get(slug);
  }

  /** Per network: each upstream's health, head and lag, or "idle" before first use (C3). */
  report(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [slug, pool] of this.#pools) {
      if (!this.#started.has(slug)) {
        out[slug] = { status: 'idle' };
        continue;
      }
      const upstreams = pool.health();
      out[slug] = { status: upstreams.some((u) => u.healthy) ? 'up' : 'down', upstreams };
    }
    return out;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
  }
}
