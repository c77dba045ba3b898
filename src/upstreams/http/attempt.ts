// One attempt of a call on one upstream node, and what its failure means (C26, C60).
import type { Cancel } from './hedge.ts';
import type { PoolState, Upstream } from './state.ts';
import { type AnswerRoom, type AttemptSpan, type FailureKind, ROOM_FROM_BYTES } from './types.ts';
import { Slots } from '../../collections/slots.ts';

/** C60: room for an answer of unknown length is taken this much ahead of what arrived (one call to the room per MiB). */
const ROOM_STEP_BYTES = 1024 * 1024;

/**
 * One attempt of a call on one upstream. `final`: no other node would do better (e.g. an answer
 * over the size cap): stop failing over. `sent`: the request may have reached the node (C26).
 */
export type Attempt<T> = { ok: true; value: T } | { ok: false; reason: string; kind: FailureKind; sent: boolean; final?: boolean };

/** Why an attempt is made, for its trace span (C58): a hedge is marked, a health probe never traced. */
export type AttemptRole = 'call' | 'hedge' | 'probe';

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
  role: AttemptRole = 'call',
): Promise<Attempt<T>> {
  // C58: a span (and a traceparent for the node) for an attempt of a traced request; none while tracing is off.
  const span = p.tracer !== undefined && role !== 'probe' ? p.tracer.start(p.network, u, role === 'hedge') : undefined;
  return new Promise((resolve) => {
    // undici's own timers bound the attempt (no AbortController and timer per call): the
    // answer's headers within the timeout, and no gap longer than it between body chunks.
    // They tick about every 500 ms, so an attempt ends up to that much after its timeout.
    const handler = new AttemptHandler(p, timeoutMs, read, span ? endingSpan(span, resolve, cancel) : resolve, cancel);
    // C48: undici starts those timers only once the request has a socket: before that it waits
    // for a connect (undici's own limit is 10 s, whatever the attempt's) or for a busy
    // connection, and that wait counts in the attempt's timeout too. Even on an idle kept-alive
    // connection undici writes the request a turn later (setImmediate), so every attempt is
    // watched until its answer's headers (watched first: undici may end it within dispatch):
    // a slot of its own (collections/slots.ts), emptied when it leaves.
    watchWaiting(handler, timeoutMs);
    u.dispatcher.dispatch({ method: 'POST', path: u.path, headers: span ? span.headers : u.headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
  });
}

/** How often attempts still waiting for a socket or for their answer's headers are checked. */
const WAIT_TICK_MS = 100;

interface Waiting {
  deadline: number;
  /** Its slot in {@link waiting}, -1 when not watched. */
  slot: number;
  expire(): void;
}

/** C48: attempts under way, until their answer's headers arrive (or they end); a slot each, not a Set (collections/slots.ts). */
const waiting = new Slots<Waiting>();
let waitTimer: NodeJS.Timeout | undefined;

function watchWaiting(h: Waiting, timeoutMs: number): void {
  h.deadline = performance.now() + timeoutMs;
  h.slot = waiting.add(h);
  if (waitTimer === undefined) {
    waitTimer = setInterval(checkWaiting, WAIT_TICK_MS);
    waitTimer.unref();
  }
}

function unwatch(h: Waiting): void {
  if (h.slot < 0) return;
  waiting.remove(h.slot, h);
  h.slot = -1;
}

function checkWaiting(): void {
  const now = performance.now();
  waiting.forEach((h) => {
    if (h.deadline <= now) h.expire();
  });
  if (waiting.size === 0) {
    clearInterval(waitTimer);
    waitTimer = undefined;
  }
}

/** C58: `resolve`, ending the attempt's span with its outcome first. */
function endingSpan<T>(span: AttemptSpan, resolve: (a: Attempt<T>) => void, cancel: Cancel | undefined): (a: Attempt<T>) => void {
  return (a) => {
    if (a.ok) span.end('ok');
    else if (cancel?.aborted) span.end('cancelled');
    else span.end(a.kind, a.reason);
    resolve(a);
  };
}

/**
 * undici's handler of one attempt: one object whose methods undici calls (no closures made per
 * attempt). The answer is gathered as its chunks arrive.
 */
class AttemptHandler<T> {
  readonly #p: PoolState;
  readonly #max: number;
  readonly #timeoutMs: number;
  readonly #read: (status: number, body: Buffer) => T | undefined;
  readonly #resolve: (a: Attempt<T>) => void;
  readonly #cancel: Cancel | undefined;
  #status = 0;
  #chunks: Buffer[] | null = [];
  #size = 0;
  /** C60: the instance's room for answers, and how much of it this answer holds (0 below {@link ROOM_FROM_BYTES}). */
  readonly #room: AnswerRoom | undefined;
  #held = 0;
  /** Decided before the end (a 5xx or 429, an answer over the cap): what the attempt resolves with. */
  #verdict: Attempt<T> | null = null;
  #abort: ((err?: Error) => void) | null = null;
  #onCancel: (() => void) | undefined;
  /** Resolved: later callbacks of undici's change nothing (an attempt given up while it waited). */
  #settled = false;
  /** C48: when the attempt runs out of time if its answer's headers have not come (performance.now()). */
  deadline = 0;
  /** C48: its slot among the attempts watched, -1 once not watched. */
  slot = -1;

  constructor(p: PoolState, timeoutMs: number, read: (status: number, body: Buffer) => T | undefined, resolve: (a: Attempt<T>) => void, cancel: Cancel | undefined) {
    this.#p = p;
    this.#max = p.maxResponseBytes;
    this.#room = p.room;
    this.#timeoutMs = timeoutMs;
    this.#read = read;
    this.#resolve = resolve;
    this.#cancel = cancel;
  }

  #finish(a: Attempt<T>): void {
    if (this.#settled) return;
    this.#settled = true;
    unwatch(this);
    this.#resolve(a);
  }

  /**
   * C48: the attempt's time ran out before its answer's headers: still without a socket, the
   * request was never written (a transaction may go to another node); on one, it timed out as a
   * silent node does.
   */
  expire(): void {
    unwatch(this);
    if (this.#settled) return;
    const abort = this.#abort;
    if (abort === null) {
      this.#finish({ ok: false, reason: `no connection within ${this.#timeoutMs} ms`, kind: 'connect', sent: false });
      return;
    }
    this.#finish({ ok: false, reason: `timeout after ${this.#timeoutMs} ms`, kind: 'timeout', sent: true });
    abort(new Error('attempt timed out'));
  }

  #tooLarge(): Attempt<T> {
    return { ok: false, reason: `answer larger than ${this.#max} bytes`, kind: 'too_large', sent: true, final: true };
  }

  #busy(): Attempt<T> {
    return { ok: false, reason: 'no room for the answer in memory (server.maxPendingBytes)', kind: 'gateway_busy', sent: true, final: true };
  }

  #cut(why: Attempt<T>): false {
    this.#verdict = why;
    this.#chunks = null;
    this.release();
    this.#abort?.(new Error('answer cut'));
    return false;
  }

  /**
   * C60: room for `bytes` of this answer in all (more than it holds): false when the instance has
   * none, and the answer is not read further.
   */
  #hold(bytes: number): boolean {
    if (!(this.#room as AnswerRoom).take(bytes - this.#held, this.#held)) return false;
    this.#held = bytes;
    return true;
  }

  /** The answer's room given back: it was handed on (the transport counts what it has not sent), or dropped. */
  release(): void {
    if (this.#held === 0) return;
    (this.#room as AnswerRoom).give(this.#held);
    this.#held = 0;
  }

  onConnect(abort: (err?: Error) => void): void {
    this.#abort = abort;
    // Given up while it waited for a socket: it never goes out.
    if (this.#settled) return abort(new Error('attempt timed out'));
    const cancel = this.#cancel;
    if (cancel === undefined) return;
    // A hedge decided before the request reached a socket: it never goes out.
    if (cancel.aborted) abort(cancel.reason);
    else cancel.on('abort', (this.#onCancel = () => this.#abort?.(cancel.reason)));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[] | string[] | null): boolean {
    if (statusCode < 200) return true; // 1xx: the answer comes next
    // From here undici's body timeout bounds the gaps between chunks.
    unwatch(this);
    this.#status = statusCode;
    if (statusCode >= 500 || statusCode === 429) {
      // Read to the end and dropped: the connection stays usable.
      this.#verdict = { ok: false, reason: `HTTP ${statusCode}`, kind: statusCode === 429 ? 'http_429' : 'http_5xx', sent: true };
      this.#chunks = null;
      return true;
    }
    const length = contentLength(rawHeaders);
    if (length > this.#max) return this.#cut(this.#tooLarge());
    // C60: a large answer of known length takes its room at once, before any of it is read.
    if (length >= ROOM_FROM_BYTES && this.#room !== undefined && !this.#hold(length)) return this.#cut(this.#busy());
    return true;
  }

  onData(chunk: Buffer): boolean {
    const chunks = this.#chunks;
    if (chunks === null) return true;
    this.#size += chunk.length;
    // Counted as it arrives, so an endless chunked answer is cut at the cap.
    if (this.#size > this.#max) return this.#cut(this.#tooLarge());
    // C60: past ROOM_FROM_BYTES, the bytes held take room first (a step ahead of what arrived).
    if (this.#size >= ROOM_FROM_BYTES && this.#size > this.#held && this.#room !== undefined && !this.#hold(Math.min(this.#size + ROOM_STEP_BYTES, this.#max))) {
      return this.#cut(this.#busy());
    }
    chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.#onCancel) this.#cancel?.removeListener('abort', this.#onCancel);
    const chunks = this.#chunks;
    if (this.#verdict !== null || chunks === null) return this.#finish(this.#verdict ?? this.#tooLarge());
    const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.#size);
    this.#chunks = null;
    // The room is given back once the answer had its turn to be written (the HTTP fast path writes
    // the answers of a round at setImmediate; from then on the transport counts what is unsent).
    if (this.#held > 0) setImmediate(releaseOf, this);
    const value = this.#read(this.#status, buf);
    this.#finish(value === undefined ? { ok: false, reason: `invalid body (HTTP ${this.#status})`, kind: 'invalid_answer', sent: true } : { ok: true, value });
  }

  onError(err: Error): void {
    if (this.#onCancel) this.#cancel?.removeListener('abort', this.#onCancel);
    this.release();
    this.#finish(this.#verdict ?? failure(this.#p, err, this.#timeoutMs));
  }
}

function releaseOf(h: { release(): void }): void {
  h.release();
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
