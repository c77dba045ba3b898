import { Pool } from 'undici';
import { type FailedAttempt, NoUpstreamError, UpstreamRpcError } from '../errors/upstream.ts';

export { type FailedAttempt, NoUpstreamError, UpstreamRpcError };

/** One upstream node of a network, as in the config file (C26, C32). */
export interface UpstreamConfig {
  readonly http: string;
  readonly ws?: string;
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
  /** Kept-alive connections per upstream; 32 by default. */
  connections?: number;
  /** Bytes an answer may have; a larger one is not read further and fails the call (-32000). 64 MiB by default. */
  maxResponseBytes?: number;
  logger?: PoolLogger;
  /** Called when the best known head rises (the `heads(network)` stream of the upstreams module). */
  onHead?: (head: number) => void;
}

/** A node's answer, byte for byte. */
export interface ForwardResult {
  /** The node's HTTP status (200 except for JSON-RPC bodies some providers send with a 4xx). */
  status: number;
  body: Buffer;
  /** Index of the upstream in the config; never its URL, which may hold a provider key. */
  upstream: number;
}

export interface UpstreamHealth {
  index: number;
  /** False while the upstream is cooling down after a failure. */
  healthy: boolean;
  head: number | null;
  /** Blocks behind the best head among healthy upstreams. */
  lag: number | null;
  /** Smoothed `eth_blockNumber` round trip. */
  latencyMs: number | null;
  /** Why the last call or probe failed, while it is the most recent outcome (`HTTP 500`, `ECONNREFUSED`, ...). */
  lastError?: string;
}

/**
 * Methods that change chain state. They are never repeated on a second node once the request
 * may have reached the first (C26), only after a connection error that proves nothing was sent.
 */
export const STATE_CHANGING_METHODS: ReadonlySet<string> = new Set([
  'eth_sendRawTransaction',
  'eth_sendRawTransactionSync',
  'eth_sendRawTransactionConditional',
  'eth_sendTransaction',
]);

interface Upstream {
  readonly index: number;
  readonly dispatcher: Pool;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  head: number | null;
  latencyMs: number | null;
  failures: number;
  unhealthyUntil: number;
  lastError: string | undefined;
}

/** `final`: no other node would do better (e.g. an answer over the size cap): stop failing over. */
type Attempt<T> = { ok: true; value: T } | { ok: false; reason: string; sent: boolean; final?: boolean };

const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;
const LATENCY_WEIGHT = 0.3; // weight of a new sample in the moving average
const LATENCY_CLASS_MS = 20; // milliseconds; see latencyClass()

// Errors raised before the request could be written: safe to move on even for a transaction.
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * The upstream nodes of one network: health and head tracking, selection and failover (C26).
 *
 * Selection order: healthy and not lagging, then healthy but lagging, then cooling down (last
 * resort, soonest to recover first); within a group the faster latency class first, then
 * config order, so the operator's order holds unless a node is clearly faster.
 */
export class UpstreamPool {
  readonly network: string;
  private readonly upstreams: Upstream[];
  private readonly requestTimeoutMs: number;
  private readonly methodTimeoutsMs: Readonly<Record<string, number>>;
  private readonly totalTimeoutMs: number;
  private readonly maxLagBlocks: number;
  private readonly healthIntervalMs: number;
  private readonly maxResponseBytes: number;
  private readonly log: PoolLogger | undefined;
  private readonly onHead: ((head: number) => void) | undefined;
  private lastHead = -1;
  private ordered: Upstream[] | null = null;
  private orderedUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private nextId = 1;

  constructor(opts: PoolOptions) {
    this.network = opts.network;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.methodTimeoutsMs = opts.methodTimeoutsMs ?? {};
    this.totalTimeoutMs = opts.totalTimeoutMs ?? 15_000;
    this.maxLagBlocks = opts.maxLagBlocks ?? 5;
    this.healthIntervalMs = opts.healthIntervalMs ?? 5_000;
    this.maxResponseBytes = opts.maxResponseBytes ?? 64 * 1024 * 1024;
    this.log = opts.logger;
    this.onHead = opts.onHead;
    const connections = opts.connections ?? 32;
    this.upstreams = opts.upstreams.map((cfg, index) => {
      let url: URL;
      try {
        url = new URL(cfg.http);
      } catch {
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
      const dispatcher = new Pool(url.origin, { connections, pipelining: 1 });
      return {
        index,
        dispatcher,
        path: `${url.pathname}${url.search}`,
        headers,
        head: null,
        latencyMs: null,
        failures: 0,
        unhealthyUntil: 0,
        lastError: undefined,
      };
    });
  }

  /** Starts the periodic health probes (one round at once); the timers do not keep the process alive. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    const tick = async (): Promise<void> => {
      await this.checkHealth();
      if (this.closed) return;
      this.timer = setTimeout(tick, this.healthIntervalMs);
      this.timer.unref();
    };
    void tick();
  }

  /** Stops the probes, aborts calls still running and closes the connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    // destroy() fails the calls still running at once (they end as "pool closed").
    await Promise.all(this.upstreams.map((u) => u.dispatcher.destroy().catch(() => undefined)));
  }

  /**
   * Probes every upstream once with `eth_blockNumber` and records head, latency or failure.
   * Never rejects. {@link start} runs it periodically; tests and readiness checks may call it.
   */
  async checkHealth(): Promise<void> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
    // A probe slower than the interval means the node is in trouble; at least 1 s for slow links.
    const timeoutMs = Math.min(this.requestTimeoutMs, Math.max(this.healthIntervalMs, 1_000));
    await Promise.all(
      this.upstreams.map(async (u) => {
        const startedAt = performance.now();
        const outcome = await this.attempt(u, body, timeoutMs, (_status, buf) => parseHead(buf));
        if (this.closed) return;
        if (!outcome.ok) {
          this.markFailed(u, outcome.reason);
          return;
        }
        const sample = performance.now() - startedAt;
        u.latencyMs = u.latencyMs === null ? sample : u.latencyMs + LATENCY_WEIGHT * (sample - u.latencyMs);
        u.head = outcome.value;
        this.markOk(u);
      }),
    );
    this.ordered = null; // heads and latencies changed
    const best = this.bestHead(Date.now());
    if (best !== null && best > this.lastHead) {
      this.lastHead = best;
      this.onHead?.(best);
    }
  }

  /** The best known head (highest among healthy upstreams), or null before any probe answered. */
  head(): number | null {
    return this.bestHead(Date.now());
  }

  /**
   * Sends a serialised JSON-RPC request or batch and returns the first acceptable answer unchanged.
   * `methods` lists the method(s) in it: they pick the timeout and whether failover is allowed.
   * A JSON-RPC error answered by a node is an answer, not a failure.
   *
   * @throws NoUpstreamError when no upstream answered within `totalTimeoutMs`.
   */
  async forward(body: string | Buffer, methods: readonly string[], opts: { expectAnswer?: boolean } = {}): Promise<ForwardResult> {
    // Notifications only: nodes answer 2xx with an empty body, which is a success here.
    const quiet = opts.expectAnswer === false;
    const { value, upstream } = await this.send(body, methods, (status, buf) =>
      looksLikeJsonRpc(buf) || (quiet && status >= 200 && status < 300) ? { status, body: buf } : undefined,
    );
    return { ...value, upstream };
  }

  /**
   * One call for internal callers (faucet, health, devnet): the parsed `result`.
   *
   * @throws UpstreamRpcError carrying the node's JSON-RPC error object.
   * @throws NoUpstreamError when no upstream answered.
   */
  async request<T = unknown>(method: string, params: readonly unknown[]): Promise<T> {
    const body = JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params });
    const { value, upstream } = await this.send(body, [method], (_status, buf) => parseResponse(buf));
    if (value.error !== undefined) {
      const { code, message, data } = value.error;
      throw new UpstreamRpcError(
        typeof code === 'number' ? code : -32603,
        typeof message === 'string' ? message : 'upstream error',
        data,
        upstream,
      );
    }
    return value.result as T;
  }

  /** Each upstream's state, by config index (C3 reports it; no URLs). */
  health(): UpstreamHealth[] {
    const now = Date.now();
    const best = this.bestHead(now);
    return this.upstreams.map((u) => ({
      index: u.index,
      healthy: u.unhealthyUntil <= now,
      head: u.head,
      lag: u.head === null || best === null ? null : Math.max(0, best - u.head),
      latencyMs: u.latencyMs === null ? null : Math.round(u.latencyMs),
      ...(u.lastError === undefined ? {} : { lastError: u.lastError }),
    }));
  }

  private async send<T>(
    body: string | Buffer,
    methods: readonly string[],
    read: (status: number, body: Buffer) => T | undefined,
  ): Promise<{ value: T; upstream: number }> {
    const deadline = Date.now() + this.totalTimeoutMs;
    const stateChanging = methods.some((m) => STATE_CHANGING_METHODS.has(m));
    let attemptMs = methods.length === 0 ? this.requestTimeoutMs : 0;
    for (const m of methods) attemptMs = Math.max(attemptMs, this.methodTimeoutsMs[m] ?? this.requestTimeoutMs);
    const failed: FailedAttempt[] = [];
    for (const u of this.closed ? [] : this.order()) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      const outcome = await this.attempt(u, body, Math.min(attemptMs, remaining), read);
      if (outcome.ok) {
        this.markOk(u);
        return { value: outcome.value, upstream: u.index };
      }
      failed.push({ upstream: u.index, reason: outcome.reason });
      if (this.closed || outcome.final) break;
      this.markFailed(u, outcome.reason);
      this.log?.debug({ network: this.network, upstream: u.index, reason: outcome.reason, methods }, 'upstream attempt failed');
      // C26: a transaction that may have reached a node is not sent again elsewhere.
      if (stateChanging && outcome.sent) throw new NoUpstreamError(this.network, failed, true);
    }
    throw new NoUpstreamError(this.network, failed);
  }

  private async attempt<T>(
    u: Upstream,
    body: string | Buffer,
    timeoutMs: number,
    read: (status: number, body: Buffer) => T | undefined,
  ): Promise<Attempt<T>> {
    try {
      // undici's own timers bound the attempt (no AbortController and timer per call): the
      // answer's headers within the timeout, and no gap longer than it between body chunks.
      // They tick about every 500 ms, so an attempt ends up to that much after its timeout.
      const res = await u.dispatcher.request({
        method: 'POST',
        path: u.path,
        headers: u.headers,
        body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      if (res.statusCode >= 500 || res.statusCode === 429) {
        await res.body.dump().catch(() => undefined);
        return { ok: false, reason: `HTTP ${res.statusCode}`, sent: true };
      }
      const length = res.headers['content-length'];
      const declared = length === undefined ? -1 : Number(length);
      if (declared > this.maxResponseBytes) {
        res.body.destroy();
        return { ok: false, reason: `answer larger than ${this.maxResponseBytes} bytes`, sent: true, final: true };
      }
      if (declared >= 0) {
        // The usual case: a declared length within the cap, read in one go.
        const buf = Buffer.from(await res.body.arrayBuffer());
        const value = read(res.statusCode, buf);
        if (value === undefined) return { ok: false, reason: `invalid body (HTTP ${res.statusCode})`, sent: true };
        return { ok: true, value };
      }
      // Chunked: counted as it arrives, so an endless answer is cut at the cap.
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.maxResponseBytes) {
          res.body.destroy();
          return { ok: false, reason: `answer larger than ${this.maxResponseBytes} bytes`, sent: true, final: true };
        }
        chunks.push(chunk);
      }
      const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
      const value = read(res.statusCode, buf);
      if (value === undefined) return { ok: false, reason: `invalid body (HTTP ${res.statusCode})`, sent: true };
      return { ok: true, value };
    } catch (err) {
      // Only codes and our own words: undici and Node messages may quote the upstream's address.
      const code = errorCode(err);
      if (this.closed) return { ok: false, reason: 'pool closed', sent: true };
      if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
        return { ok: false, reason: `timeout after ${timeoutMs} ms`, sent: true };
      }
      return { ok: false, reason: code ?? 'request failed', sent: code === undefined || !NOT_SENT_CODES.has(code) };
    }
  }

  /**
   * The upstreams in the order to try (see the class comment). Kept until something changes it
   * (a failure, a recovery, a probe round) or an upstream's cool-down ends, at most a second, so
   * a call does not sort the list again.
   */
  private order(): Upstream[] {
    const now = Date.now();
    if (this.ordered && now < this.orderedUntil) return this.ordered;
    let until = now + 1_000;
    for (const u of this.upstreams) if (u.unhealthyUntil > now && u.unhealthyUntil < until) until = u.unhealthyUntil;
    this.ordered = this.sorted(now);
    this.orderedUntil = until;
    return this.ordered;
  }

  private sorted(now: number): Upstream[] {
    const best = this.bestHead(now);
    const group = (u: Upstream): number => {
      if (u.unhealthyUntil > now) return 2;
      return u.head !== null && best !== null && best - u.head > this.maxLagBlocks ? 1 : 0;
    };
    return this.upstreams
      .map((u) => ({ u, g: group(u) }))
      .sort(
        (a, b) =>
          a.g - b.g ||
          (a.g === 2 ? a.u.unhealthyUntil - b.u.unhealthyUntil : 0) ||
          latencyClass(a.u.latencyMs) - latencyClass(b.u.latencyMs) ||
          a.u.index - b.u.index,
      )
      .map(({ u }) => u);
  }

  /** The highest head among healthy upstreams, or among all when none is healthy. */
  private bestHead(now: number): number | null {
    let healthy: number | null = null;
    let any: number | null = null;
    for (const u of this.upstreams) {
      if (u.head === null) continue;
      any = Math.max(any ?? u.head, u.head);
      if (u.unhealthyUntil <= now) healthy = Math.max(healthy ?? u.head, u.head);
    }
    return healthy ?? any;
  }

  private markFailed(u: Upstream, reason: string): void {
    this.ordered = null;
    const now = Date.now();
    const wasHealthy = u.unhealthyUntil <= now;
    u.failures += 1;
    u.lastError = reason;
    const backoffMs = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (u.failures - 1));
    u.unhealthyUntil = now + backoffMs;
    if (wasHealthy) {
      this.log?.warn({ network: this.network, upstream: u.index, reason, retryInMs: backoffMs }, 'upstream unhealthy');
    }
  }

  private markOk(u: Upstream): void {
    if (u.failures === 0) return;
    this.ordered = null;
    this.log?.info({ network: this.network, upstream: u.index }, 'upstream recovered');
    u.failures = 0;
    u.unhealthyUntil = 0;
    u.lastError = undefined;
  }
}

/**
 * Latency classes double in width (under 40 ms, under 80 ms, under 160 ms, ...): a node must be
 * clearly faster to overtake one listed before it, and jitter does not reorder the list.
 */
function latencyClass(ms: number | null): number {
  if (ms === null) return Number.POSITIVE_INFINITY;
  return Math.floor(Math.log2(Math.max(ms, LATENCY_CLASS_MS) / LATENCY_CLASS_MS));
}

const isSpace = (b: number | undefined): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** Cheap garbage check without parsing: a JSON object or array by its first and last bytes. */
export function looksLikeJsonRpc(buf: Buffer): boolean {
  let start = 0;
  let end = buf.length - 1;
  while (start <= end && isSpace(buf[start])) start++;
  while (end >= start && isSpace(buf[end])) end--;
  if (start >= end) return false;
  const first = buf[start];
  const last = buf[end];
  return (first === 0x7b && last === 0x7d) || (first === 0x5b && last === 0x5d); // {...} or [...]
}

interface RpcResponse {
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

function parseResponse(buf: Buffer): RpcResponse | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const res = parsed as RpcResponse;
  if (res.error !== undefined) return typeof res.error === 'object' && res.error !== null ? res : undefined;
  return 'result' in res ? res : undefined;
}

function parseHead(buf: Buffer): number | undefined {
  const res = parseResponse(buf);
  if (typeof res?.result !== 'string' || !/^0x[0-9a-fA-F]+$/.test(res.result)) return undefined;
  return Number.parseInt(res.result, 16);
}

function errorCode(err: unknown): string | undefined {
  // Node wraps a failed dual-stack connect in an AggregateError; undici may nest the cause.
  for (const e of [err, (err as { cause?: unknown })?.cause, (err as { errors?: unknown[] })?.errors?.[0]]) {
    const code = (e as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}
