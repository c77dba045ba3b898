// Bounds on what the gateway writes out (C60): connections too slow to read their answers are cut.
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, onSendHookHandler } from 'fastify';
import type { Logger } from 'pino';
import { type AnswerRoom, ROOM_FROM_BYTES } from '../upstreams/http/types.ts';

/** Why a connection was cut. */
export type CutReason = 'write timeout' | 'instance cap';

/** A connection that cuts itself its own way (a WebSocket: terminated, its subscriptions released); an HTTP socket is destroyed. */
export interface Cuttable {
  cut(why: CutReason): void;
}

/** Milliseconds between two log lines about calls refused for want of room (a count of those refused in between). */
const REFUSAL_LOG_MS = 1_000;

/** A socket that holds bytes it has not handed to the kernel yet. */
interface Watch {
  socket: Duplex;
  owner: Cuttable | undefined;
  /** The bytes written into the socket when the watch was armed: all of them must be flushed by the deadline. */
  target: number;
  timer: NodeJS.Timeout | undefined;
}

type Counted = Duplex & { bytesWritten?: number };

/**
 * C60: what answers can hold of the gateway's memory, over HTTP and WebSocket: those being read
 * from the nodes and those written to clients that have not taken them yet.
 * The transports call {@link wrote} after writing an answer and {@link makeRoom} before writing a
 * large one; the upstream attempts {@link take} room for a large answer as it arrives and
 * {@link give} it back once it is handed on:
 * - a socket left with bytes unsent is watched: what it held when the watch started must be
 *   flushed within `server.writeTimeoutMs`, else the connection is cut (a client that reads slowly
 *   but steadily keeps going: each round only asks for the bytes of the round before);
 * - the bytes unsent on all watched sockets and those of answers being read from nodes together
 *   stay under `server.maxPendingBytes`: before a large answer would go past it, the connections
 *   holding the most unsent are cut (a client that does not read holds all it was sent; one that
 *   reads holds little), so new answers still go out; a node's answer that still finds no room is
 *   not read further and its call is refused (-32603, 503 with Retry-After: retry shortly).
 * The per-connection caps are the transports' own (`server.maxPendingBytesPerConnection` in the
 * HTTP fast path, `ws.maxBufferedBytes` on a WebSocket). The answers Fastify sends (REST API,
 * dashboard, /docs, /metrics, /health) are under the same write timeout and room through
 * {@link boundFastifyAnswers}.
 */
export class Outbound implements AnswerRoom {
  readonly #timeoutMs: number;
  readonly #maxBytes: number;
  readonly #log: Logger;
  readonly #watched = new Map<Duplex, Watch>();
  /** Bytes of large answers being read from nodes (or read and not handed on yet). */
  #receiving = 0;
  /** Calls refused for want of room since the last log line about them, and when that was. */
  #refusedUnlogged = 0;
  #refusalLoggedAt = 0;
  /** Connections cut, by reason, and nodes' answers refused for want of room (tests and logs read them). */
  readonly cuts = { writeTimeout: 0, instanceCap: 0 };
  refused = 0;

  constructor(opts: { writeTimeoutMs: number; maxPendingBytes: number; logger: Logger }) {
    this.#timeoutMs = opts.writeTimeoutMs;
    this.#maxBytes = opts.maxPendingBytes;
    this.#log = opts.logger;
  }

  /** Bytes unsent on the watched sockets now. */
  pendingBytes(): number {
    let sum = 0;
    for (const w of this.#watched.values()) sum += w.socket.writableLength;
    return sum;
  }

  /** Bytes of large answers being read from nodes now. */
  receivingBytes(): number {
    return this.#receiving;
  }

  /**
   * Before writing `bytes` to `socket`: when the instance's answers in memory and these would go
   * past `server.maxPendingBytes`, the other connections holding the most unsent are cut until
   * they fit (or none is left to cut: the answer is already in memory and goes out).
   */
  makeRoom(bytes: number, socket: Duplex | null): void {
    if (bytes < ROOM_FROM_BYTES || this.#watched.size === 0) return;
    this.#cutFor(this.#receiving + bytes, socket);
  }

  /**
   * C60, for the upstream attempts: room for `bytes` more of a node's answer. Connections holding
   * unsent answers are cut first, as for a write; false when that leaves too little (the answers
   * being read fill the room by themselves): the answer is not read further, its call refused.
   */
  take(bytes: number, held: number): boolean {
    const receiving = this.#receiving + bytes;
    // An answer read while no other is passes whatever its size (rpc.maxResponseBytes bounds it).
    const alone = this.#receiving === held;
    if (receiving > this.#maxBytes && !alone) return this.#refuse();
    const pending = this.#watched.size > 0 ? this.#cutFor(receiving, null) : 0;
    if (pending + receiving > this.#maxBytes && !alone) return this.#refuse();
    this.#receiving = receiving;
    return true;
  }

  /** A node's answer refused for want of room: counted, and logged at most once a second. */
  #refuse(): false {
    this.refused++;
    this.#refusedUnlogged++;
    const now = Date.now();
    if (now - this.#refusalLoggedAt >= REFUSAL_LOG_MS) {
      this.#log.warn(
        { refused: this.#refusedUnlogged, receivingBytes: this.#receiving, pendingBytes: this.pendingBytes(), maxPendingBytes: this.#maxBytes },
        'no room for the large answers of nodes: calls refused (503, retry shortly)',
      );
      this.#refusalLoggedAt = now;
      this.#refusedUnlogged = 0;
    }
    return false;
  }

  /** C60: room taken by {@link take} given back (the answer was handed on, or dropped). */
  give(bytes: number): void {
    this.#receiving -= bytes;
  }

  /**
   * Cuts the connections holding the most unsent bytes (but `spare`'s) until they and `extra`
   * fit under the cap, or none is left; returns the bytes still unsent.
   */
  #cutFor(extra: number, spare: Duplex | null): number {
    let total = this.pendingBytes();
    if (total + extra <= this.#maxBytes) return total;
    const holders = [...this.#watched.values()].filter((w) => w.socket !== spare).sort((a, b) => b.socket.writableLength - a.socket.writableLength);
    for (const w of holders) {
      if (total + extra <= this.#maxBytes) break;
      const held = w.socket.writableLength;
      this.cuts.instanceCap++;
      this.#log.warn({ heldBytes: held, pendingBytes: total, receivingBytes: this.#receiving, maxPendingBytes: this.#maxBytes }, 'answers in memory past the instance cap; the connection holding the most unsent is cut');
      this.#cut(w, 'instance cap');
      total -= held;
    }
    return total;
  }

  /**
   * After a write to `socket`: if the kernel did not take it all, the socket is watched until it
   * has. A socket that holds nothing (the common case: a small answer flushed at once) costs a
   * length check; one that counts nothing (an injected request's stand-in) is not watched either.
   */
  wrote(socket: Duplex, owner?: Cuttable): void {
    if (!(socket.writableLength > 0) || socket.destroyed) return;
    const w = this.#watched.get(socket);
    if (w) return;
    const watch: Watch = { socket, owner, target: written(socket), timer: undefined };
    this.#watched.set(socket, watch);
    socket.once('close', onSocketGone);
    socket.on('drain', onSocketDrain);
    owners.set(socket, this);
    if (this.#timeoutMs > 0) {
      watch.timer = setTimeout(this.#check, this.#timeoutMs, watch);
      watch.timer.unref();
    }
  }

  /** The deadline of a watch: flushed what it held (and more waits: another round), or cut. */
  readonly #check = (w: Watch): void => {
    w.timer = undefined;
    const s = w.socket;
    // Nothing held, or nothing that counts what it holds (an injected request's stand-in socket): not watched.
    if (s.destroyed || !(s.writableLength > 0)) return this.#forget(s);
    if (written(s) - s.writableLength >= w.target) {
      w.target = written(s);
      w.timer = setTimeout(this.#check, this.#timeoutMs, w);
      w.timer.unref();
      return;
    }
    this.cuts.writeTimeout++;
    this.#log.warn({ heldBytes: s.writableLength, writeTimeoutMs: this.#timeoutMs }, 'client took not its answer within the write timeout; connection cut');
    this.#cut(w, 'write timeout');
  };

  #cut(w: Watch, why: CutReason): void {
    this.#forget(w.socket);
    if (w.owner) w.owner.cut(why);
    else w.socket.destroy();
  }

  /** The socket holds nothing more (or is gone): no longer watched. */
  forget(socket: Duplex): void {
    this.#forget(socket);
  }

  #forget(socket: Duplex): void {
    const w = this.#watched.get(socket);
    if (!w) return;
    this.#watched.delete(socket);
    if (w.timer) clearTimeout(w.timer);
    socket.off('close', onSocketGone);
    socket.off('drain', onSocketDrain);
  }

  /** Sockets watched now (tests). */
  get watched(): number {
    return this.#watched.size;
  }

  /** Stops every watch (the app closes). */
  close(): void {
    for (const s of [...this.#watched.keys()]) this.#forget(s);
  }
}

/**
 * C60: the answers Fastify sends (REST API, the dashboard's files, /docs, /metrics, /health) under
 * the same bounds as the RPC's, through `outbound`:
 * - before a string or Buffer answer is written, room is made for it as for an RPC answer
 *   ({@link Outbound.makeRoom}: only from 64 KiB, where other connections holding the most unsent
 *   may be cut);
 * - once the answer is ended (`prefinish`: its last bytes handed to the socket, a pipelined one's
 *   once its turn came), a socket left holding bytes is watched ({@link Outbound.wrote}): not
 *   flushed within `server.writeTimeoutMs`, it is destroyed and counted as a write-timeout cut,
 *   and its unsent bytes count against `server.maxPendingBytes` meanwhile;
 * - a streamed answer (a file of /docs) is watched each time the socket stops taking it (the
 *   stream is paused by its pipe), so a client that stops reading half way is cut too (the file
 *   stream is then closed by Fastify).
 * Per answer: a listener shared by all (no closure, no timer; a streamed answer's adds one) and a
 * length check once written; a timer only for a socket left holding bytes. Register it at the
 * root, before the routes.
 */
export function boundFastifyAnswers(app: FastifyInstance, outbound: Outbound): void {
  /**
   * `this`: a response just ended; its bytes are in its socket now. The request's socket is that
   * socket (an injected request's stand-in counts nothing, and is not watched).
   */
  function ended(this: ServerResponse): void {
    const socket = this.req.socket as Duplex | null;
    if (socket) outbound.wrote(socket);
  }
  const onSend: onSendHookHandler = (req, reply, payload, done) => {
    const socket = req.raw.socket as Duplex | null;
    if (typeof payload === 'string') {
      // A UTF-16 unit is 3 bytes at most: only a text that may reach the threshold is measured.
      if (socket && payload.length * 3 >= ROOM_FROM_BYTES) outbound.makeRoom(Buffer.byteLength(payload), socket);
    } else if (Buffer.isBuffer(payload)) {
      if (socket) outbound.makeRoom(payload.length, socket);
    } else if (socket && isPipedStream(payload)) {
      // The pipe pauses the stream when the response takes no more for now: watched from there on.
      // Looked at in the next turn: the response hands its corked bytes to the socket after the
      // pause (Node 24 does so later than 20 and 22, and the socket held nothing yet).
      const check = () => outbound.wrote(socket);
      payload.on('pause', () => setImmediate(check));
    }
    reply.raw.on('prefinish', ended);
    done(null, payload);
  };
  app.addHook('onSend', onSend);
}

/** A Node stream Fastify pipes into the response. */
function isPipedStream(payload: unknown): payload is NodeJS.ReadableStream {
  return typeof payload === 'object' && payload !== null && typeof (payload as { pipe?: unknown }).pipe === 'function' && typeof (payload as { on?: unknown }).on === 'function';
}

/** The watcher of each socket, for the listeners every socket shares (none made per socket). */
const owners = new WeakMap<Duplex, Outbound>();

function onSocketGone(this: Duplex): void {
  owners.get(this)?.forget(this);
}

function onSocketDrain(this: Duplex): void {
  if (this.writableLength === 0) owners.get(this)?.forget(this);
}

/** Bytes written into the socket since it opened, queued or sent (a net.Socket counts them; another stream: what it holds). */
function written(s: Duplex): number {
  return (s as Counted).bytesWritten ?? s.writableLength;
}
