// The logger: format, level and redaction of the gateway's log lines.
import type { FastifyRequest } from 'fastify';
import pino, { type DestinationStream, type Logger } from 'pino';
import { redactUrl, serializeError } from '../errors/redact.ts';
import { randomUuid } from '../ids/random.ts';
import { traceLogFields } from './tracing.ts';

// The redaction lives with the errors (the layer below); its callers import it from here too.
export { redactSecrets, redactUrl, serializeError } from '../errors/redact.ts';

const REDACT = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers["x-admin-token"]',
  'req.headers.cookie',
  'password',
  'refreshToken',
  'accessToken',
  'key',
  'apiKey',
];

/** How log lines are written: JSON lines, readable lines, or readable only on a terminal. */
export type LogFormat = 'auto' | 'json' | 'pretty';

/** True when lines are written for a person (pino-pretty): `pretty`, or `auto` on a terminal. */
export function prettyLogs(format: LogFormat = 'auto'): boolean {
  return format === 'pretty' || (format === 'auto' && process.stdout.isTTY === true);
}

/**
 * The logger (pino). JSON lines, one per event, for log collectors; readable lines (pino-pretty,
 * as a pino transport in its own thread) with `pretty`, or with `auto` when stdout is a terminal.
 * `stream` (tests) always gets JSON lines. `traceIds` (tracing on, C58): a line written for a
 * traced request carries its `trace_id` and `span_id`.
 */
export function createLogger(level: string, stream?: DestinationStream, format: LogFormat = 'auto', traceIds = false): Logger {
  const options = {
    level,
    ...(traceIds ? { mixin: traceLogFields } : {}),
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: {
      req: (req: FastifyRequest) => ({
        method: req.method,
        url: redactUrl(req.url),
        remoteAddress: req.ip,
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      err: (err: unknown) => serializeError(err),
    },
  };
  if (stream === undefined && prettyLogs(format)) {
    return pino({
      ...options,
      transport: {
        target: 'pino-pretty',
        options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: false, colorize: process.stdout.isTTY === true },
      },
    });
  }
  return pino(options, stream);
}

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Request ids: the caller's `X-Request-Id` when it is a sane token, else a random UUID (one per request: from a pool, ids/random.ts). */
export function genReqId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : randomUuid();
}
