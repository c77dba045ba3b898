// Turns anything thrown in a REST route into the C7 error envelope, and answers it.
import { isUtf8 } from 'node:buffer';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { redactUrl, serializeError } from './redact.ts';
import { envelope, type ErrorCode, HttpError } from './http.ts';
import { isStorageUnavailable, STORAGE_RETRY_AFTER_SECONDS } from './storage.ts';

interface AjvIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Field-level details of a schema failure: `[{field, message}]` (C7). */
function validationDetails(err: FastifyError): Array<{ field: string; message: string }> {
  const where = err.validationContext ?? 'body';
  return ((err.validation ?? []) as AjvIssue[]).map((v) => {
    let field = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
    let message = v.message ?? v.keyword;
    if (v.keyword === 'additionalProperties') {
      const extra = String(v.params.additionalProperty);
      field = field ? `${field}.${extra}` : extra;
      message = 'unknown field';
    } else if (v.keyword === 'required') {
      const missing = String(v.params.missingProperty);
      field = field ? `${field}.${missing}` : missing;
      message = 'is required';
    } else if (v.keyword === 'format' && v.params.format === 'date-time') {
      message = 'must be an RFC 3339 date-time such as 2030-01-31T12:00:00Z, in years 1000–9999, without leap second';
    } else if (v.keyword === 'format' && v.params.format === 'date') {
      message = 'must be a day YYYY-MM-DD in years 0001–9999';
    }
    return { field: field ? `${where}.${field}` : where, message };
  });
}

/** Maps anything thrown in a REST route to one HttpError. */
export function toHttpError(err: FastifyError | Error): HttpError {
  if (err instanceof HttpError) return err;
  const e = err as FastifyError;
  if (e.validation) {
    const details = validationDetails(e);
    const summary = details.map((d) => `${d.field} ${d.message}`).join('; ');
    return new HttpError('VALIDATION_ERROR', `Invalid request: ${summary}`, { details });
  }
  switch (e.code) {
    // The router's own refusal (a path with a bad percent-escape): the path is not repeated, it may hold a key.
    case 'FST_ERR_BAD_URL':
      return new HttpError('BAD_REQUEST', 'The request path holds an invalid percent-escape');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new HttpError('INVALID_JSON', 'Request body is not valid JSON');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HttpError('PAYLOAD_TOO_LARGE', 'Request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HttpError('UNSUPPORTED_MEDIA_TYPE', 'Send the body as application/json');
  }
  if (err instanceof SyntaxError && e.statusCode === 400) return new HttpError('INVALID_JSON', 'Request body is not valid JSON');
  if (e.statusCode === 404) return new HttpError('NOT_FOUND', 'Not found');
  if (e.statusCode === 413) return new HttpError('PAYLOAD_TOO_LARGE', 'Request body is too large');
  if (e.statusCode === 429) return new HttpError('RATE_LIMITED', 'Too many requests');
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return new HttpError('BAD_REQUEST', e.message);
  // C48: the database is unreachable: a state to wait out, not a fault of the request.
  if (isStorageUnavailable(err)) {
    return new HttpError('SERVICE_UNAVAILABLE', 'Storage is unavailable; retry later', {
      details: { retryAfter: STORAGE_RETRY_AFTER_SECONDS },
      headers: { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) },
      cause: err,
    });
  }
  return new HttpError('INTERNAL_ERROR', 'Internal server error', { cause: err });
}

/** Refusals worth a debug line: who was turned away and why (the request line says the rest). */
const REFUSALS = new Set([401, 403, 429]);

export function sendHttpError(reply: FastifyReply, err: HttpError): FastifyReply {
  if (REFUSALS.has(err.statusCode)) {
    reply.log.debug({ status: err.statusCode, code: err.code, reason: err.message }, 'request refused');
  }
  return reply.status(err.statusCode).headers(err.headers).send(envelope(err));
}

/**
 * Fastify's `frameworkErrors` option: what its router refuses before any hook or handler runs
 * (a path with a bad percent-escape), in the C7 envelope like every other failure.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  void sendHttpError(reply.header('x-request-id', req.id), toHttpError(err));
}

/**
 * JSON bodies of REST routes: Fastify's own parser (prototype poisoning refused) behind a check
 * that the bytes are UTF-8. Bytes that are not would be decoded to U+FFFD and stored altered, as a
 * lone surrogate would be (refused by the validators); both are a 400 instead.
 */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const bytes = body as Buffer;
    if (!isUtf8(bytes)) {
      done(new HttpError('INVALID_JSON', 'Request body is not valid UTF-8'), undefined);
      return;
    }
    const text = bytes.toString('utf8');
    void parse(req, text, (err, value) => {
      // Fastify's parser refuses `__proto__` and `constructor.prototype` members (prototype
      // poisoning) with the same error as broken JSON; say which it was.
      if (err && parsesAsJson(text)) done(new HttpError('INVALID_JSON', 'Request body has a member named __proto__ or constructor.prototype, which is not accepted'), undefined);
      else done(err, value);
    });
  });
}

function parsesAsJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** 5xx codes that report a known state of a service rather than a failure of the gateway. */
const EXPECTED_STATES: ReadonlySet<string> = new Set(['FAUCET_EMPTY', 'SERVICE_UNAVAILABLE']);

/** One error handler and one 404 for the REST scope: every failure in the C7 envelope. */
export function installRestErrors(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    const httpErr = toHttpError(err);
    // Class, code and a short message only: a failed query's text and parameters (password and
    // key hashes, ciphertexts) never reach the log, whatever logger the app was given.
    if (httpErr.statusCode >= 500) {
      // An empty faucet is a state the service announces (C29), not a fault: a warning, with its code.
      if (EXPECTED_STATES.has(httpErr.code)) req.log.warn({ code: httpErr.code, status: httpErr.statusCode }, 'request refused: service state');
      else req.log.error({ err: serializeError(err) }, 'request failed');
    }
    return sendHttpError(reply, httpErr);
  });
  // The path is echoed redacted: a mistyped RPC address still holds the caller's key (C19).
  app.setNotFoundHandler((req, reply) =>
    sendHttpError(reply, new HttpError('NOT_FOUND', `No route ${req.method} ${redactUrl(req.url.split('?')[0] ?? '')}`)),
  );
}

/** How long a refused client's answer may take to flush before its socket is destroyed anyway. */
const FLUSH_GRACE_MS = 1000;

/**
 * Answers what Node's HTTP parser refuses before any route sees it (headers too large, a request
 * that took too long to arrive, malformed HTTP) in the C7 envelope, then closes the connection.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, code, message]: [number, ErrorCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'HEADERS_TOO_LARGE', 'Request headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'REQUEST_TIMEOUT', 'The request did not arrive in time']
        : [400, 'BAD_REQUEST', 'Malformed HTTP request'];
  const body = JSON.stringify({ success: false, error: { code, message } });
  // end() alone only half-closes: a client that never reads and keeps sending would hold the
  // socket (and its fd) for as long as it likes. Destroyed once the answer is flushed, or a
  // second later if the client does not take it.
  const cut = setTimeout(() => socket.destroy(), FLUSH_GRACE_MS);
  cut.unref();
  socket.once('close', () => clearTimeout(cut));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
