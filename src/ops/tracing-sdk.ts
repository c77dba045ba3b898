/**
 * C58: the OpenTelemetry side of tracing, loaded by tracing.ts only when tracing is on. Spans go
 * in batches to an OTLP/HTTP collector (JSON); the request under way is kept in an
 * AsyncLocalStorage, so its stages, upstream attempts and log lines find it without being handed
 * it. Nothing here is registered globally (no global tracer provider or context manager): two
 * apps in one process trace apart.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  DiagLogLevel,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, type Sampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import type { TracingConfig } from '../config/schema.ts';
import type { AttemptSpan, FailureKind } from '../upstreams/http/types.ts';

type Settings = TracingConfig;
type Value = string | number | boolean;
type Carrier = Readonly<Record<string, string | string[] | undefined>>;

/** A child span: a stage of a request. Ended once; a later end is ignored. */
class StageSpan {
  readonly #span: Span;
  #open = true;

  constructor(span: Span) {
    this.#span = span;
  }

  set(key: string, value: Value): void {
    if (this.#open) this.#span.setAttribute(key, value);
  }

  end(outcome?: string): void {
    if (!this.#open) return;
    this.#open = false;
    finish(this.#span, outcome);
  }
}

/** The request under way: its span, the context its children hang from, and its attempts so far. */
class ActiveRequest {
  readonly span: Span;
  readonly context: Context;
  readonly traceId: string;
  readonly spanId: string;
  /** False once ended: work the request left behind (a timer it started) no longer joins it. */
  open = true;
  attempts = 0;

  constructor(span: Span) {
    this.span = span;
    this.context = trace.setSpan(ROOT_CONTEXT, span);
    const ids = span.spanContext();
    this.traceId = ids.traceId;
    this.spanId = ids.spanId;
  }

  set(key: string, value: Value): void {
    this.span.setAttribute(key, value);
  }

  end(outcome?: string): void {
    if (!this.open) return;
    this.open = false;
    finish(this.span, outcome);
  }
}

/** An upstream attempt's span and the headers that carry it to the node. */
class UpstreamAttemptSpan implements AttemptSpan {
  readonly #span: Span;
  readonly headers: Readonly<Record<string, string>>;

  constructor(span: Span, headers: Readonly<Record<string, string>>) {
    this.#span = span;
    this.headers = headers;
  }

  end(outcome: 'ok' | 'cancelled' | FailureKind, reason?: string): void {
    this.#span.setAttribute('junction.outcome', outcome);
    if (reason !== undefined) this.#span.setAttribute('junction.reason', reason);
    // A hedge's loser did nothing wrong: it was slower than the winner.
    if (outcome !== 'ok' && outcome !== 'cancelled') this.#span.setStatus({ code: SpanStatusCode.ERROR, message: reason ?? outcome });
    this.#span.end();
  }
}

function finish(span: Span, outcome: string | undefined): void {
  if (outcome !== undefined && outcome !== 'ok') {
    span.setAttribute('junction.outcome', outcome);
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
  }
  span.end();
}

/** One store for every app of the process: a request's work is one async flow whichever app it is in. */
const active = new AsyncLocalStorage<ActiveRequest>();

/** The log fields of the request under way (tracing.ts's `traceLogFields`). */
export function activeLogFields(): Record<string, string> {
  const a = active.getStore();
  return a?.open ? { trace_id: a.traceId, span_id: a.spanId } : {};
}

/** The sampler OTEL_TRACES_SAMPLER names, with OTEL_TRACES_SAMPLER_ARG as its ratio. */
function samplerOf(s: Settings): Sampler {
  switch (s.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(s.samplerArg);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.samplerArg) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Where spans are sent: the traces address as given, or the base address + `/v1/traces`. */
export function tracesUrl(s: Pick<Settings, 'endpoint' | 'tracesEndpoint'>): string {
  if (s.tracesEndpoint !== null) return s.tracesEndpoint;
  return `${(s.endpoint as string).replace(/\/+$/, '')}/v1/traces`;
}

/** The tracing of one app (tracing.ts's `Tracing`). */
export class SdkTracing {
  readonly #provider: TracerProvider;
  readonly #tracer: Tracer;
  readonly #propagator = new W3CTraceContextPropagator();
  readonly #log: Logger;
  readonly attempts = {
    start: (network: string, u: { readonly index: number; readonly name: string; readonly headers: Readonly<Record<string, string>> }, hedge: boolean): AttemptSpan | undefined => {
      const a = active.getStore();
      if (!a?.open) return undefined;
      const attributes: Record<string, Value> = { 'junction.network': network, 'junction.upstream.index': u.index, 'junction.upstream.name': u.name, 'junction.attempt': ++a.attempts };
      if (hedge) attributes['junction.hedge'] = true;
      const span = this.#tracer.startSpan('upstream attempt', { kind: SpanKind.CLIENT, attributes }, a.context);
      const headers: Record<string, string> = { ...u.headers };
      this.#propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
      return new UpstreamAttemptSpan(span, headers);
    },
  };

  constructor(settings: Settings, logger: Logger) {
    this.#log = logger;
    const url = tracesUrl(settings);
    // The exporter also reads OpenTelemetry's own variables for what the config does not hold
    // (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, certificates); the address is ours.
    const exporter = new OTLPTraceExporter({ url });
    this.#provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': settings.serviceName }),
      sampler: samplerOf(settings),
      // A method name is the client's text: no attribute grows a span past this many characters.
      spanLimits: { attributeValueLengthLimit: 256 },
      spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: settings.batchDelayMs })],
    });
    this.#tracer = this.#provider.getTracer('junction');
    // The SDK's own complaints (a collector that does not answer) as warnings in our log. Process-wide.
    diag.setLogger(
      {
        error: (message: string) => logger.warn({ tracing: diagText(message) }, 'tracing: could not export spans'),
        warn: (message: string) => logger.warn({ tracing: diagText(message) }, 'tracing'),
        info: () => {},
        debug: () => {},
        verbose: () => {},
      },
      { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
    );
    logger.info({ tracing: { traces: redactCredentials(url), serviceName: settings.serviceName, sampler: settings.sampler } }, 'tracing on: spans go to the OTLP collector');
  }

  request(name: string, carrier: Carrier | undefined, attributes: Record<string, Value>, startedAt?: number, link?: Carrier): ActiveRequest {
    const parent = carrier?.traceparent === undefined ? ROOT_CONTEXT : this.#propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
    const links: Link[] = [];
    if (link?.traceparent !== undefined) {
      const linked = trace.getSpanContext(this.#propagator.extract(ROOT_CONTEXT, link, defaultTextMapGetter));
      if (linked) links.push({ context: linked });
    }
    // A number below the time origin is read as performance.now() by the SDK.
    const span = this.#tracer.startSpan(name, { kind: SpanKind.SERVER, attributes, links, ...(startedAt === undefined ? {} : { startTime: startedAt }) }, parent);
    return new ActiveRequest(span);
  }

  within<T>(span: ActiveRequest, fn: () => T): T {
    return active.run(span, fn);
  }

  stage(name: string): StageSpan | undefined {
    const a = active.getStore();
    if (!a?.open) return undefined;
    return new StageSpan(this.#tracer.startSpan(name, { kind: SpanKind.INTERNAL }, a.context));
  }

  annotate(key: string, value: Value): void {
    const a = active.getStore();
    if (a?.open) a.span.setAttribute(key, value);
  }

  async shutdown(waitMs = 3_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(resolve, waitMs, 'late')));
    try {
      const done = await Promise.race([this.#provider.shutdown().then(() => 'done' as const), late]);
      if (done === 'late') this.#log.warn({ waitMs }, 'tracing: spans not all exported before the stop');
    } catch (err) {
      this.#log.warn({ error: (err as Error).message }, 'tracing: spans not all exported before the stop');
    } finally {
      clearTimeout(timer);
    }
  }
}

/** What the SDK reports, in one line: an error it hands over as JSON (with its stack) is its message and code. */
function diagText(message: string): string {
  if (!message.startsWith('{')) return message;
  try {
    const e = JSON.parse(message) as { message?: unknown; code?: unknown };
    if (typeof e.message !== 'string') return message;
    return typeof e.code === 'string' && !e.message.includes(e.code) ? `${e.message} (${e.code})` : e.message;
  } catch {
    return message;
  }
}

/** An address as it may be logged: user and password left out. */
function redactCredentials(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '[invalid URL]';
  }
}
