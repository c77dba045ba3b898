import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

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

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'junction_' });
  }
}

/** Counts every request by its route pattern (never the raw URL: it may hold a key). */
export function instrument(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
  });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
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
    const name = 'junction_rpc_http_request_duration_seconds';
    registry.registerMetric({
      name,
      help: 'JSON-RPC request duration over HTTP in seconds by address',
      type: 'histogram',
      aggregator: 'sum',
      get: async () => {
        const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
        for (const [route, r] of routes) {
          let cumulative = 0;
          RPC_BUCKETS.forEach((le, i) => {
            cumulative += r.buckets[i] ?? 0;
            values.push({ metricName: `${name}_bucket`, labels: { le, route }, value: cumulative });
          });
          values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', route }, value: r.count });
          values.push({ metricName: `${name}_sum`, labels: { route }, value: r.sum });
          values.push({ metricName: `${name}_count`, labels: { route }, value: r.count });
        }
        return { name, help: 'JSON-RPC request duration over HTTP in seconds by address', type: 'histogram', aggregator: 'sum', values };
      },
    } as unknown as Parameters<Registry['registerMetric']>[0]);
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
