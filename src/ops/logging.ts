import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Removes secrets that can sit in a URL: the key segment of `/v1/{network}/{apiKey}` and the
 * `apiKey` query parameter of `/ws`. Logs and error messages only ever see the redacted form.
 */
export function redactUrl(url: string): string {
  let out = url.replace(/^(\/v1\/[^/?#]+\/)[^/?#]+/, '$1[redacted]');
  out = out.replace(/([?&]api[_-]?key=)[^&#]*/gi, '$1[redacted]');
  return out;
}

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

/** The JSON logger (pino); `stream` lets tests read every line. */
export function createLogger(level: string, stream?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: {
        req: (req: FastifyRequest) => ({
          method: req.method,
          url: redactUrl(req.url),
          remoteAddress: req.ip,
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
        err: pino.stdSerializers.err,
      },
    },
    stream,
  );
}

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Request ids: the caller's `X-Request-Id` when it is a sane token, else a UUID. */
export function genReqId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
}
