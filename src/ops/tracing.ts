/**
 * C58: OpenTelemetry tracing, off unless an OTLP endpoint is configured. This module is what the
 * rest of the gateway sees: the shapes of spans and `startTracing`, which loads the SDK
 * (tracing-sdk.ts) only when tracing is on. Off, nothing of OpenTelemetry is loaded and each
 * traced place costs one check of a field that is undefined: no span objects, no context, no
 * header read.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { TracingConfig } from '../config/schema.ts';
import type { AttemptTracer } from '../upstreams/http/types.ts';

export type SpanValue = string | number | boolean;

/** One span as the gateway's code sees it (no OpenTelemetry type leaks out of tracing-sdk.ts). */
export interface TraceSpan {
  set(key: string, value: SpanValue): void;
  /** Ends it (once: a later call does nothing); `outcome` other than `ok` (a refusal, a failure in words) marks it an error. */
  end(outcome?: string): void;
}

/** The span of one request (an RPC message, a REST request): the parent of its stages and upstream attempts. */
export interface RequestSpan extends TraceSpan {
  readonly traceId: string;
  readonly spanId: string;
}

/** Where a request's trace comes from: the `traceparent` (and `tracestate`) headers it carried. */
export type TraceCarrier = IncomingHttpHeaders | Readonly<Record<string, string>>;

/** The tracing of one app, when it is on. */
export interface Tracing {
  /**
   * A server span for one request, continuing the W3C `traceparent` of `carrier` when it holds a
   * valid one (else a new trace). `startedAt`: `performance.now()` when the request arrived.
   * `link`: a trace the request belongs with without being part of it (a WebSocket message and
   * the traceparent of its connection's upgrade).
   */
  request(name: string, carrier: TraceCarrier | undefined, attributes: Record<string, SpanValue>, startedAt?: number, link?: TraceCarrier): RequestSpan;
  /** Runs `fn` with `span` as the active request: its stages, upstream attempts and log lines belong to it. */
  within<T>(span: RequestSpan, fn: () => T): T;
  /** A child span of the active request, or undefined outside one. */
  stage(name: string): TraceSpan | undefined;
  /** Sets an attribute on the active request's span. */
  annotate(key: string, value: SpanValue): void;
  /** What the upstream pools call for each attempt (a CLIENT span, and the `traceparent` sent to the node). */
  readonly attempts: AttemptTracer;
  /** Exports the spans still waiting (at most `waitMs`), then stops. */
  shutdown(waitMs?: number): Promise<void>;
}

/** Whether the config turns tracing on: an OTLP endpoint is set. */
export function tracingEnabled(config: { tracing: Pick<TracingConfig, 'endpoint' | 'tracesEndpoint'> }): boolean {
  return config.tracing.endpoint !== null || config.tracing.tracesEndpoint !== null;
}

let logFields: (() => Record<string, string>) | undefined;

/**
 * The pino mixin of a logger while tracing is on: `trace_id` and `span_id` of the request whose
 * work writes the line, none outside a request. A new object each time (pino adds to it).
 */
export function traceLogFields(): Record<string, string> {
  return logFields === undefined ? {} : logFields();
}

/** The app's tracing, or undefined when the config leaves it off (then the SDK is never loaded). */
export async function startTracing(config: { tracing: TracingConfig }, logger: Logger): Promise<Tracing | undefined> {
  if (!tracingEnabled(config)) return undefined;
  const sdk = await import('./tracing-sdk.ts');
  logFields = sdk.activeLogFields;
  const tracing: Tracing = new sdk.SdkTracing(config.tracing, logger);
  return tracing;
}

/**
 * A server span per REST request under `prefix` (the route's template as its name, its status
 * code), continuing an incoming `traceparent`. The request's hooks and handler run with it active,
 * so their log lines and the upstream calls they make belong to it.
 */
export function traceRest(app: FastifyInstance, tracing: Tracing, prefix: string): void {
  const spans = new WeakMap<FastifyRequest, RequestSpan>();
  app.addHook('onRequest', (req, _reply, done) => {
    if (!req.url.startsWith(prefix)) return done();
    const route = req.routeOptions.url;
    const attributes: Record<string, SpanValue> = { 'http.request.method': req.method, 'junction.request_id': req.id };
    if (route) attributes['http.route'] = route;
    const span = tracing.request(route ? `${req.method} ${route}` : req.method, req.headers, attributes);
    spans.set(req, span);
    tracing.within(span, done);
  });
  // The body is read between the two (stream events lose the active span): the handler gets it again.
  app.addHook('preHandler', (req, _reply, done) => {
    const span = spans.get(req);
    if (span) tracing.within(span, done);
    else done();
  });
  // Ended once the hooks after this one have run (the `request completed` line is under it too).
  app.addHook('onResponse', (req, reply, done) => {
    const span = spans.get(req);
    if (!span) return done();
    span.set('http.response.status_code', reply.statusCode);
    tracing.within(span, done);
    span.end(reply.statusCode >= 500 ? `HTTP ${reply.statusCode}` : undefined);
  });
}
