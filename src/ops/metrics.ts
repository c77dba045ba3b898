// The /metrics plumbing: metrics defined by their owners and read at scrape time.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { envelope, HttpError } from '../errors/http.ts';
import type { Outbound } from '../http/outbound.ts';

/** Where a metric's values come from at scrape time: one sample or a list of labelled ones. */
export type MetricValues = number | Iterable<readonly [labels: Readonly<Record<string, string>>, value: number]>;

/** A metric read from its owner at each scrape (see {@link Metrics.define}). */
export interface MetricSource {
  /** `junction_<area>_<what>`; counters end in `_total`. */
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  labelNames?: readonly string[];
  /** Called at every scrape: the current values (a counter's running totals, a gauge's levels). */
  read(): MetricValues;
}

/** A histogram kept in plain numbers by its owner, as {@link plainHistogram} reads it. */
export interface PlainHistogram {
  labels: Readonly<Record<string, string>>;
  /** Observations per bucket of the histogram's bounds (not cumulative), plus one for +Inf. */
  buckets: ArrayLike<number>;
  sum: number;
  count: number;
}

/** Prometheus metrics of one app instance (its own registry, so tests can run several apps). */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'junction_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'junction_http_request_duration_seconds',
    help: 'HTTP request duration in seconds by route',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  /** Where `/metrics` is served when it has its own port (`METRICS_PORT`), once listening. */
  address: string | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'junction_' });
  }

  /**
   * Adds a metric whose values its owner keeps and hands over at each scrape: the way features
   * (block follower, webhooks, ...) publish their figures without prom-client on their own paths.
   *
   * @example
   * metrics.define({ name: 'junction_webhook_deliveries_total', help: 'Webhook deliveries by outcome',
   *   type: 'counter', labelNames: ['outcome'], read: () => [[{ outcome: 'ok' }, sent]] });
   */
  define(source: MetricSource): void {
    const { name, help } = source;
    const labelNames = [...(source.labelNames ?? [])];
    const fill = (set: (labels: Record<string, string>, value: number) => void) => {
      const values = source.read();
      if (typeof values === 'number') set({}, values);
      else for (const [labels, value] of values) set({ ...labels }, value);
    };
    if (source.type === 'counter') {
      new Counter({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect() {
          this.reset();
          fill((labels, value) => this.inc(labels, value));
        },
      });
    } else {
      new Gauge({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect() {
          this.reset();
          fill((labels, value) => this.set(labels, value));
        },
      });
    }
  }

  /** Adds a histogram kept in plain numbers by its owner (see {@link plainHistogram}). */
  defineHistogram(name: string, help: string, bounds: readonly number[], read: () => Iterable<PlainHistogram>): void {
    plainHistogram(this.registry, name, help, bounds, read);
  }
}

/**
 * A histogram whose owner counts observations in plain numbers (prom-client hashes the labels of
 * every observation, even on a bound child, which costs more than the rest of the bookkeeping on
 * the RPC path); turned into Prometheus samples at scrape time only.
 */
export function plainHistogram(registry: Registry, name: string, help: string, bounds: readonly number[], read: () => Iterable<PlainHistogram>): void {
  registry.registerMetric({
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: async () => {
      const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
      for (const h of read()) {
        let cumulative = 0;
        bounds.forEach((le, i) => {
          cumulative += h.buckets[i] ?? 0;
          values.push({ metricName: `${name}_bucket`, labels: { le, ...h.labels }, value: cumulative });
        });
        values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', ...h.labels }, value: h.count });
        values.push({ metricName: `${name}_sum`, labels: h.labels, value: h.sum });
        values.push({ metricName: `${name}_count`, labels: h.labels, value: h.count });
      }
      return { name, help, type: 'histogram', aggregator: 'sum', values };
    },
  } as unknown as Parameters<Registry['registerMetric']>[0]);
}

export interface MetricsAccess {
  /** `METRICS_TOKEN`: `/metrics` asks for `Authorization: Bearer <token>`; null: open. */
  token: string | null;
  /** `METRICS_PORT`: `/metrics` is served on this port only (0: any free port); null: on the main port. */
  port: number | null;
  /** The address the separate metrics port listens on. */
  host: string;
}

/**
 * Counts every request by its route pattern (never the raw URL: it may hold a key) and serves
 * `/metrics`: on the main port, or on a port of its own; behind a bearer token when one is set.
 * Scrapes are not logged at info (Prometheus asks every few seconds).
 */
export function instrument(app: FastifyInstance, metrics: Metrics, access: MetricsAccess = { token: null, port: null, host: '127.0.0.1' }, outbound?: Outbound): void {
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
  });
  const allowed = tokenCheck(access.token);
  if (access.port === null) {
    app.get('/metrics', { schema: { hide: true }, logLevel: 'warn' }, async (req, reply) => {
      if (!allowed(req.headers.authorization)) {
        const err = metricsRefusal();
        return reply.status(err.statusCode).headers(err.headers).send(envelope(err));
      }
      reply.type(metrics.registry.contentType);
      return metrics.registry.metrics();
    });
    return;
  }
  let server: Server | undefined;
  app.addHook('onReady', async () => {
    server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?', 1)[0];
      // C60: as on the main port, an answer makes room before it is written (from 64 KiB) and a
      // socket left holding it is watched by the write timeout.
      const send = (status: number, type: string, body: string, headers: Record<string, string> = {}) => {
        const bytes = Buffer.byteLength(body);
        if (outbound) {
          outbound.makeRoom(bytes, req.socket);
          // Once ended into its socket (a pipelined answer's once its turn came), as on the main port.
          res.once('prefinish', () => outbound.wrote(req.socket));
        }
        res.writeHead(status, { 'content-type': type, 'content-length': String(bytes), ...headers }).end(body);
      };
      if (req.method !== 'GET' || path !== '/metrics') {
        send(404, 'application/json; charset=utf-8', JSON.stringify(envelope(new HttpError('NOT_FOUND', 'Only GET /metrics is served here'))));
        return;
      }
      if (!allowed(req.headers.authorization)) {
        const err = metricsRefusal();
        send(err.statusCode, 'application/json; charset=utf-8', JSON.stringify(envelope(err)), err.headers);
        return;
      }
      metrics.registry.metrics().then(
        (text) => send(200, metrics.registry.contentType, text),
        (err: unknown) => {
          app.log.error({ err }, 'metrics scrape failed');
          send(500, 'application/json; charset=utf-8', JSON.stringify(envelope(new HttpError('INTERNAL_ERROR', 'Internal server error'))));
        },
      );
    });
    const s = server;
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(access.port ?? 0, access.host, () => {
        s.off('error', reject);
        resolve();
      });
    });
    const addr = s.address() as AddressInfo;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    metrics.address = `http://${host}:${addr.port}/metrics`;
    app.log.info({ address: metrics.address, token: access.token !== null }, `metrics served on ${metrics.address}`);
  });
  app.addHook('onClose', async () => {
    if (!server?.listening) return;
    const s = server;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  });
}

function metricsRefusal(): HttpError {
  return new HttpError('UNAUTHORIZED', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>', { headers: { 'www-authenticate': 'Bearer' } });
}

/** Whether an Authorization header carries the metrics token (any request when there is none). */
function tokenCheck(token: string | null): (header: string | undefined) => boolean {
  if (token === null) return () => true;
  const expected = Buffer.from(token);
  return (header) => {
    if (!header?.startsWith('Bearer ')) return false;
    const given = Buffer.from(header.slice('Bearer '.length).trim());
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
}

const RPC_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RouteStats {
  byStatus: Map<number, number>;
  /** Per bucket of RPC_BUCKETS (not cumulative), plus one for +Inf. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * Counts of the RPC fast path, kept in plain numbers: prom-client hashes the labels of every
 * observation, even on a bound child, which costs more than the rest of the bookkeeping.
 * Exposed at scrape time as `junction_rpc_http_requests_total{route,status}` and the histogram
 * `junction_rpc_http_request_duration_seconds{route}`.
 */
export class RpcHttpMetrics {
  readonly #routes = new Map<string, RouteStats>();

  constructor(registry: Registry) {
    const routes = this.#routes;
    new Counter({
      name: 'junction_rpc_http_requests_total',
      help: 'JSON-RPC requests over HTTP by address and status',
      labelNames: ['route', 'status'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [route, r] of routes) for (const [status, n] of r.byStatus) this.inc({ route, status: String(status) }, n);
      },
    });
    plainHistogram(registry, 'junction_rpc_http_request_duration_seconds', 'JSON-RPC request duration over HTTP in seconds by address', RPC_BUCKETS, function* () {
      for (const [route, r] of routes) yield { labels: { route }, buckets: r.buckets, sum: r.sum, count: r.count };
    });
  }

  record(route: string, status: number, seconds: number): void {
    let r = this.#routes.get(route);
    if (!r) this.#routes.set(route, (r = { byStatus: new Map(), buckets: new Float64Array(RPC_BUCKETS.length + 1), sum: 0, count: 0 }));
    r.byStatus.set(status, (r.byStatus.get(status) ?? 0) + 1);
    let i = 0;
    while (i < RPC_BUCKETS.length && seconds > (RPC_BUCKETS[i] as number)) i++;
    r.buckets[i] = (r.buckets[i] ?? 0) + 1;
    r.sum += seconds;
    r.count += 1;
  }
}

/**
 * What became of one JSON-RPC call: answered (`ok`), answered with the node's own error
 * (`node_error`), malformed (`invalid`), refused by the gateway and why, or no node answered
 * (`upstream_error`).
 */
export const RPC_OUTCOMES = [
  'ok',
  'node_error',
  'invalid',
  'refused_key',
  'refused_network',
  'refused_method',
  'refused_access',
  'refused_rate',
  'refused_quota',
  'upstream_error',
  'internal_error',
] as const;
export type RpcOutcome = (typeof RPC_OUTCOMES)[number];
const OUTCOME_INDEX = new Map<RpcOutcome, number>(RPC_OUTCOMES.map((o, i) => [o, i]));

/** Calls of one network and method: successes, and failures by code and outcome. */
interface MethodCounts {
  ok: number;
  /** By JSON-RPC error code (`OTHER_CODE` for one outside the known ranges): counts per outcome. */
  errors: Map<number, Float64Array>;
}

const OTHER_CODE = 0x7fffffff;
/** The method label of calls outside the configured methods, and of messages refused whole. */
export const OTHER_METHOD = 'other';
/** The network label of calls to an unknown network. */
export const UNKNOWN_NETWORK = 'unknown';

/** Error codes kept as labels: JSON-RPC's own, the server range, EIP-1193/1474 and small node codes (3: revert). */
function boundedCode(code: number): number {
  if (!Number.isInteger(code)) return OTHER_CODE;
  if (code >= -32099 && code <= -32000) return code;
  if (code === -32700 || (code >= -32603 && code <= -32600)) return code;
  if (code >= 1 && code <= 99) return code;
  if (code === 4001 || code === 4100 || code === 4200 || code === 4900 || code === 4901) return code;
  return OTHER_CODE;
}

/**
 * JSON-RPC calls by network, method, outcome and error code, over HTTP and WebSocket alike
 * (`junction_rpc_requests_total`). Methods are a bounded set: the configured ones (standard,
 * plan extras, `nat_*`, subscriptions); any other name counts as `other`. Kept in plain numbers
 * per (network, method): a call costs two map lookups and an increment, no allocation.
 */
export class RpcCallMetrics {
  readonly #methods: ReadonlySet<string>;
  readonly #byNetwork = new Map<string, Map<string, MethodCounts>>();

  constructor(registry: Registry, methods: Iterable<string>) {
    this.#methods = new Set(methods);
    const byNetwork = this.#byNetwork;
    new Counter({
      name: 'junction_rpc_requests_total',
      help: 'JSON-RPC calls (batch items one by one) by network, method, outcome and JSON-RPC error code',
      labelNames: ['network', 'method', 'outcome', 'code'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [network, methods] of byNetwork) {
          for (const [method, c] of methods) {
            if (c.ok > 0) this.inc({ network, method, outcome: 'ok', code: '' }, c.ok);
            for (const [code, perOutcome] of c.errors) {
              const codeLabel = code === OTHER_CODE ? 'other' : String(code);
              perOutcome.forEach((n, i) => {
                if (n > 0) this.inc({ network, method, outcome: RPC_OUTCOMES[i], code: codeLabel }, n);
              });
            }
          }
        }
      },
    });
  }

  /** One call answered with a result. */
  ok(network: string, method: string): void {
    this.#counts(network, method).ok++;
  }

  /** One call that failed: `outcome` says how, `code` is the JSON-RPC error code answered. */
  failed(network: string, method: string, outcome: RpcOutcome, code: number): void {
    const c = this.#counts(network, method);
    const key = boundedCode(code);
    let perOutcome = c.errors.get(key);
    if (!perOutcome) c.errors.set(key, (perOutcome = new Float64Array(RPC_OUTCOMES.length)));
    const i = OUTCOME_INDEX.get(outcome) as number;
    perOutcome[i] = (perOutcome[i] ?? 0) + 1;
  }

  #counts(network: string, method: string): MethodCounts {
    let methods = this.#byNetwork.get(network);
    if (!methods) this.#byNetwork.set(network, (methods = new Map<string, MethodCounts>()));
    let c = methods.get(method);
    if (!c) {
      // Only configured names get an entry of their own: the label set stays bounded.
      const label = this.#methods.has(method) ? method : OTHER_METHOD;
      c = methods.get(label);
      if (!c) methods.set(label, (c = { ok: 0, errors: new Map() }));
    }
    return c;
  }
}
