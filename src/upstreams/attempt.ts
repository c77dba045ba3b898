import type { Cancel } from './hedge.ts';
import type { PoolState, Upstream } from './state.ts';
import type { FailureKind } from './types.ts';

/**
 * One attempt of a call on one upstream. `final`: no other node would do better (e.g. an answer
 * over the size cap): stop failing over. `sent`: the request may have reached the node (C26).
 */
export type Attempt<T> = { ok: true; value: T } | { ok: false; reason: string; kind: FailureKind; sent: boolean; final?: boolean };

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
 * One POST to one upstream, through undici's dispatch API with a handler of our own: the answer
 * is gathered as the chunks arrive, without the response stream, header object and promise
 * chain of `request()` + `arrayBuffer()` (bench/README.md: "Forwarding").
 */
export function attempt<T>(
  p: PoolState,
  u: Upstream,
  body: string | Buffer,
  timeoutMs: number,
  read: (status: number, body: Buffer) => T | undefined,
  cancel?: Cancel,
): Promise<Attempt<T>> {
  const max = p.maxResponseBytes;
  return new Promise((resolve) => {
    let status = 0;
    let chunks: Buffer[] | null = [];
    let size = 0;
    /** Decided before the end (a 5xx or 429, an answer over the cap): what the attempt resolves with. */
    let verdict: Attempt<T> | null = null;
    let abort: ((err?: Error) => void) | null = null;
    const tooLarge = (): Attempt<T> => ({ ok: false, reason: `answer larger than ${max} bytes`, kind: 'too_large', sent: true, final: true });
    const cut = (why: Attempt<T>): false => {
      verdict = why;
      chunks = null;
      abort?.(new Error('answer cut'));
      return false;
    };
    const onCancel = () => abort?.(cancel?.reason);
    const handler = {
      onConnect: (a: (err?: Error) => void) => {
        abort = a;
        // A hedge decided before the request reached a socket: it never goes out.
        if (cancel?.aborted) a(cancel.reason);
        else cancel?.on('abort', onCancel);
      },
      onHeaders: (statusCode: number, rawHeaders: Buffer[] | string[] | null): boolean => {
        if (statusCode < 200) return true; // 1xx: the answer comes next
        status = statusCode;
        if (statusCode >= 500 || statusCode === 429) {
          // Read to the end and dropped: the connection stays usable.
          verdict = { ok: false, reason: `HTTP ${statusCode}`, kind: statusCode === 429 ? 'http_429' : 'http_5xx', sent: true };
          chunks = null;
          return true;
        }
        if (contentLength(rawHeaders) > max) return cut(tooLarge());
        return true;
      },
      onData: (chunk: Buffer): boolean => {
        if (chunks === null) return true;
        size += chunk.length;
        // Counted as it arrives, so an endless chunked answer is cut at the cap.
        if (size > max) return cut(tooLarge());
        chunks.push(chunk);
        return true;
      },
      onComplete: () => {
        cancel?.removeListener('abort', onCancel);
        if (verdict !== null || chunks === null) return resolve(verdict ?? tooLarge());
        const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
        const value = read(status, buf);
        resolve(value === undefined ? { ok: false, reason: `invalid body (HTTP ${status})`, kind: 'invalid_answer', sent: true } : { ok: true, value });
      },
      onError: (err: Error) => {
        cancel?.removeListener('abort', onCancel);
        resolve(verdict ?? failure(p, err, timeoutMs));
      },
    };
    // undici's own timers bound the attempt (no AbortController and timer per call): the
    // answer's headers within the timeout, and no gap longer than it between body chunks.
    // They tick about every 500 ms, so an attempt ends up to that much after its timeout.
    u.dispatcher.dispatch({ method: 'POST', path: u.path, headers: u.headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
  });
}

/** What a failed attempt says: only codes and our own words (undici and Node messages may quote the upstream's address). */
function failure(p: PoolState, err: unknown, timeoutMs: number): Attempt<never> {
  const code = errorCode(err);
  if (p.closed) return { ok: false, reason: 'pool closed', kind: 'connection', sent: true };
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return { ok: false, reason: `timeout after ${timeoutMs} ms`, kind: 'timeout', sent: true };
  }
  const notSent = code !== undefined && NOT_SENT_CODES.has(code);
  return { ok: false, reason: code ?? 'request failed', kind: notSent ? 'connect' : 'connection', sent: !notSent };
}

/**
 * The upstreams in the order to try (see the class comment). Kept until something changes it

/** The Content-Length of undici's raw header list (name, value, name, value, ...), -1 when absent. */
function contentLength(raw: Buffer[] | string[] | null): number {
  if (raw === null) return -1;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as Buffer | string;
    if (name.length === 14 && name.toString().toLowerCase() === 'content-length') return Number(raw[i + 1]?.toString());
  }
  return -1;
}

function errorCode(err: unknown): string | undefined {
  // Node wraps a failed dual-stack connect in an AggregateError; undici may nest the cause.
  for (const e of [err, (err as { cause?: unknown })?.cause, (err as { errors?: unknown[] })?.errors?.[0]]) {
    const code = (e as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}
