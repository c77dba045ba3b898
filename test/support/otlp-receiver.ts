import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One span as an OTLP/HTTP JSON export carries it, its attributes made a plain object. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: Array<{ traceId: string; spanId: string }>;
  /** 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string };
  /** The resource's `service.name`. */
  service: string;
  /** Start and end, milliseconds since the epoch (from the span's nanoseconds; sub-millisecond kept). */
  startMs: number;
  endMs: number;
}

type Nanos = string | number | { low: number; high: number } | undefined;
/** An OTLP JSON time (a decimal string, a number, or a 64-bit {low, high}) in epoch milliseconds. */
function epochMs(t: Nanos): number {
  if (t === undefined) return Number.NaN;
  if (typeof t === 'object') return Number((BigInt(t.high >>> 0) << 32n) | BigInt(t.low >>> 0)) / 1e6;
  return Number(BigInt(t)) / 1e6;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:PORT`, the value of OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  /** Every span received so far, in the order they came. */
  readonly spans: ReceivedSpan[];
  /** POST /v1/traces requests received. */
  exports(): number;
  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: AnyValue }>;
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number; message?: string };
  startTimeUnixNano?: Nanos;
  endTimeUnixNano?: Nanos;
}
interface ExportRequest {
  resourceSpans?: Array<{ resource?: { attributes?: Array<{ key: string; value: AnyValue }> }; scopeSpans?: Array<{ spans?: JsonSpan[] }> }>;
}

function plain(attributes: Array<{ key: string; value: AnyValue }> | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
  }
  return out;
}

/**
 * An OTLP/HTTP traces receiver for tests, as a collector (Jaeger, Tempo) would be one: it takes
 * `POST /v1/traces` in the JSON encoding (what @opentelemetry/exporter-trace-otlp-http sends) and
 * keeps the spans.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let exports = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
      let body: ExportRequest;
      try {
        body = JSON.parse(raw.toString('utf8')) as ExportRequest;
      } catch {
        res.writeHead(400).end();
        return;
      }
      exports++;
      for (const rs of body.resourceSpans ?? []) {
        const service = String(plain(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              attributes: plain(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              status: { code: s.status?.code ?? 0, ...(s.status?.message ? { message: s.status.message } : {}) },
              service,
              startMs: epochMs(s.startTimeUnixNano),
              endMs: epochMs(s.endTimeUnixNano),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    exports: () => exports,
    trace: (traceId) => spans.filter((s) => s.traceId === traceId),
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
