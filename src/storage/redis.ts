// The Redis connection: a single Redis or a Cluster, with the options the gateway uses.
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { StorageError } from '../errors/storage.ts';

/** A single Redis or a Redis Cluster (`redis.clusterNodes`): the commands the gateway uses are the same. */
export type RedisClient = Redis | Cluster;

export interface RedisOptions {
  /** C48: a command without an answer after this many ms fails (`redis.commandTimeoutMs`). */
  commandTimeoutMs?: number;
}

/** Whether a client is a Redis Cluster's: its keys of one script must share a hash slot. */
export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

/**
 * The Redis connection for shared state (limits, key-change events) when REDIS_URL is set.
 * Commands fail fast while Redis is away instead of queueing without bound, and never wait for an
 * answer longer than `commandTimeoutMs` (C48: a hung Redis is an absent one).
 */
export async function openRedis(url: string, opts: RedisOptions = {}): Promise<Redis> {
  // Loaded only when configured: an embedded start does not pay for the client.
  const { Redis, Command } = await import('ioredis');
  readIoBeforeTimingOut(Command.prototype as unknown as TimedCommand);
  const redis = new Redis(url, { lazyConnect: true, ...clientOptions(opts) });
  await connectFirst(redis);
  return redis;
}

/**
 * A Redis Cluster (`redis.clusterNodes`, REDIS_CLUSTER_NODES): the nodes given are where the
 * client learns the cluster's layout; the first one's user, password and TLS hold for every node.
 * The same C48 rules as a single Redis: no offline queue, a bounded wait per command.
 */
export async function openRedisCluster(nodes: readonly string[], opts: RedisOptions = {}): Promise<Cluster> {
  const { Cluster, Command } = await import('ioredis');
  readIoBeforeTimingOut(Command.prototype as unknown as TimedCommand);
  const first = new URL(nodes[0] ?? 'redis://127.0.0.1:6379');
  const cluster = new Cluster(
    nodes.map((n) => {
      const u = new URL(n);
      return { host: u.hostname, port: Number(u.port || 6379) };
    }),
    {
      lazyConnect: true,
      enableOfflineQueue: false,
      // Slots move when a primary fails over: the client asks again within a second.
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      slotsRefreshTimeout: 2_000,
      clusterRetryStrategy: (times: number) => Math.min(times * 100, 1_000),
      redisOptions: {
        ...clientOptions(opts),
        ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    },
  );
  await connectFirst(cluster);
  return cluster;
}

/** The fields of an ioredis command its timeout uses (ioredis' `Command`, v5). */
interface TimedCommand {
  isResolved: boolean;
  _commandTimeoutTimer?: NodeJS.Timeout;
  reject(err: Error): void;
  setTimeout(ms: number): void;
}

/**
 * C48: `commandTimeoutMs` judges Redis, not this process. ioredis' own timer fails a command when
 * it fires, and after the event loop was busy for longer than the timeout (a burst of first calls
 * on a slow machine, a long GC) it fires in the loop's timer phase before the poll phase has read
 * the answer already waiting in the socket: a Redis that answered in a millisecond is taken for a
 * hung one, and every instance falls back to limits in its own memory. Here the timer, when it
 * fires, lets the loop read what has arrived (one `setImmediate`: the check phase comes after the
 * poll phase) and fails the command only if it is still unanswered. The same fields as ioredis'
 * timer, so its own clean-up on an answer clears this one too.
 */
export function readIoBeforeTimingOut(command: TimedCommand): void {
  if ((command.setTimeout as { readsIoFirst?: boolean }).readsIoFirst) return;
  const setTimeoutReadingIoFirst = function (this: TimedCommand, ms: number): void {
    if (this._commandTimeoutTimer) return;
    this._commandTimeoutTimer = setTimeout(() => {
      setImmediate(() => {
        if (!this.isResolved) this.reject(new Error('Command timed out'));
      });
    }, ms);
  };
  command.setTimeout = Object.assign(setTimeoutReadingIoFirst, { readsIoFirst: true });
}

function clientOptions(opts: RedisOptions) {
  return {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 5_000,
    ...(opts.commandTimeoutMs ? { commandTimeout: opts.commandTimeoutMs } : {}),
    // C48: back within a second of Redis, not the client's default of up to 2 s between attempts.
    retryStrategy: (times: number) => Math.min(times * 100, 1_000),
  };
}

/** Why the first connection of a client failed, when the start went on without Redis (C48). */
const unreachableAtStart = new WeakMap<RedisClient, unknown>();

/**
 * Connection failures that Redis coming up or back cures (refused, reset, timed out, unreachable,
 * a name lookup that failed for now, a Redis still loading its data, a Cluster none of whose nodes
 * answered yet). A name that does not resolve (ENOTFOUND) or a refused password is a mistake in
 * REDIS_URL: the start stops, as for DATABASE_URL (storage/wait.ts).
 */
const PASSING_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'EPIPE']);
function passes(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return PASSING_CODES.has(code);
  const message = err instanceof Error ? err.message : '';
  return /^(Connection is closed|None of startup nodes is available|LOADING)|timed out/i.test(message);
}

/**
 * The first connection. C48: a Redis that cannot be reached yet does not stop the start: the
 * client goes on trying (ioredis reconnects after a failed first `connect`), and the gateway's
 * RedisLink starts degraded (every limit in memory, said in /health/ready and the metrics) until
 * a probe finds Redis; `unreachableAtStart` says why. A pod restarted during a Redis outage thus
 * serves instead of crash-looping. Any other failure (ENOTFOUND, WRONGPASS) throws.
 */
async function connectFirst(redis: RedisClient): Promise<void> {
  let firstError: unknown;
  // Also keeps an 'error' event from being unhandled while the client reconnects by itself.
  redis.on('error', (err) => {
    firstError ??= err;
  });
  try {
    await redis.connect();
  } catch (err) {
    // The first connection failed: its cause (ECONNREFUSED, ENOTFOUND) rather than "Connection is
    // closed"; a Cluster's "Failed to refresh slots cache" carries the last node's own.
    const cause = nodeCause(firstError ?? err);
    if (passes(cause)) {
      unreachableAtStart.set(redis, cause);
      return;
    }
    redis.disconnect();
    throw cause;
  }
}

/**
 * A Redis Cluster client that reached no startup node says so with `ClusterAllFailedError`, whose
 * `lastNodeError` is why the last node failed (refused, timed out): the error to judge and report.
 */
function nodeCause(err: unknown): unknown {
  const last = (err as { lastNodeError?: unknown } | undefined)?.lastNodeError;
  return last instanceof Error ? last : err;
}

/** Why a client's first connection failed when `openRedis`/`openRedisCluster` went on without Redis; undefined when it connected. */
export function firstConnectError(redis: RedisClient): unknown {
  return unreachableAtStart.get(redis);
}

/** What `/health/ready` and the metrics say of Redis. */
export interface RedisLinkReport {
  state: 'up' | 'degraded';
  /** Epoch ms of the latest change of state. */
  since: number;
  /** Why the latest command or probe failed, while degraded. */
  error?: string;
}

/**
 * Whether Redis answers, as its users find out (C48). A user whose command failed or timed out
 * says so (`failed`); from then on the link is degraded: users keep their state in memory, and a
 * PING every `probeMs` looks for Redis. When it answers, the recovery steps run (the limiter
 * writes back what it counted meanwhile) and only then is the link up again. Each change is
 * logged once: warn on the way down, info on the way back.
 */
export class RedisLink {
  readonly redis: RedisClient;
  readonly #log: Logger;
  readonly #probeMs: number;
  readonly #recoveries: Array<() => Promise<void>> = [];
  readonly #listeners: Array<(up: boolean) => void> = [];
  #up = true;
  #since = Date.now();
  #error: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #probing = false;
  #closed = false;
  /** Times the link went down (metrics). */
  outages = 0;

  constructor(redis: RedisClient, opts: { log: Logger; probeMs?: number }) {
    this.redis = redis;
    this.#log = opts.log;
    this.#probeMs = opts.probeMs ?? 1_000;
    // C48: a start while Redis could not be reached (connectFirst) is degraded from the first call on.
    const atStart = unreachableAtStart.get(redis);
    if (atStart !== undefined && redis.status !== 'ready') this.failed(atStart);
  }

  /** True while Redis answers; a plain field read, for the hot path. */
  get up(): boolean {
    return this.#up;
  }

  /** A step run when Redis answers again, before the link is up; a step that throws keeps it degraded until the next probe. */
  onRecover(step: () => Promise<void>): void {
    this.#recoveries.push(step);
  }

  /** Called on each change of state, after it is made. */
  onChange(listener: (up: boolean) => void): void {
    this.#listeners.push(listener);
  }

  /** A command failed or timed out: degraded from now until a probe succeeds. */
  failed(err: unknown): void {
    this.#error = errorText(err);
    if (!this.#up || this.#closed) return;
    this.#up = false;
    this.#since = Date.now();
    this.outages++;
    this.#log.warn({ error: this.#error }, 'Redis does not answer: limits are enforced by each instance in memory until it does (C48)');
    this.#emit(false);
    this.#timer = setInterval(() => void this.probe(), this.#probeMs);
    this.#timer.unref();
  }

  /** One PING, and when it answers, the recovery steps; true when the link is up afterwards. */
  async probe(): Promise<boolean> {
    if (this.#up) return true;
    if (this.#probing || this.#closed) return false;
    this.#probing = true;
    try {
      await this.ping();
      for (const step of this.#recoveries) await step();
    } catch (err) {
      this.#error = errorText(err);
      return false;
    } finally {
      this.#probing = false;
    }
    if (this.#closed) return false;
    const downMs = Date.now() - this.#since;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#up = true;
    this.#since = Date.now();
    this.#error = undefined;
    this.#log.info({ downMs }, `Redis answers again: shared limits resume after ${(downMs / 1000).toFixed(1)} s in memory (C48)`);
    this.#emit(true);
    return true;
  }

  /**
   * PING. On a Redis Cluster every primary is asked: with one primary away the keys of its slots
   * cannot be shared, and the link stays degraded (every limit in memory, C48) until all answer.
   */
  async ping(): Promise<void> {
    if (!isCluster(this.redis)) {
      await this.redis.ping();
      return;
    }
    const primaries = this.redis.nodes('master');
    if (primaries.length === 0) throw new StorageError('no Redis Cluster primary is known');
    await Promise.all(primaries.map((n) => n.ping()));
  }

  report(): RedisLinkReport {
    return { state: this.#up ? 'up' : 'degraded', since: this.#since, ...(this.#error && !this.#up ? { error: this.#error } : {}) };
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #emit(up: boolean): void {
    for (const l of this.#listeners) {
      try {
        l(up);
      } catch (err) {
        this.#log.error({ err }, 'a Redis state listener failed');
      }
    }
  }
}

function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 200);
}
