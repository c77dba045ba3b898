import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';

/** Why a connection was cut. */
export type CutReason = 'write timeout' | 'instance cap';

/** A connection that cuts itself its own way (a WebSocket: terminated, its subscriptions released); an HTTP socket is destroyed. */
export interface Cuttable {
  cut(why: CutReason): void;
}

/** Answers smaller than this never look at the instance's total (it is summed over the sockets that hold bytes). */
const LARGE_ANSWER_BYTES = 64 * 1024;

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
 * C60: what clients that do not read can hold of the gateway's memory, over HTTP and WebSocket.
 * The transports call {@link wrote} after writing an answer and {@link makeRoom} before writing a
 * large one:
 * - a socket left with bytes unsent is watched: what it held when the watch started must be
 *   flushed within `server.writeTimeoutMs`, else the connection is cut (a client that reads slowly
 *   but steadily keeps going: each round only asks for the bytes of the round before);
 * - the bytes unsent on all watched sockets together stay under `server.maxPendingBytes`: before
 *   a large answer would go past it, the connections holding the most are cut (a client that does
 *   not read holds all it was sent; one that reads holds little), so new answers still go out.
 * The per-connection caps are the transports' own (`server.maxPendingBytesPerConnection` in the
 * HTTP fast path, `ws.maxBufferedBytes` on a WebSocket).
 */
export class Outbound {
  readonly #timeoutMs: number;
  readonly #maxBytes: number;
  readonly #log: Logger;
  readonly #watched = new Map<Duplex, Watch>();
  /** Connections cut, by reason (tests and logs read them). */
  readonly cuts = { writeTimeout: 0, instanceCap: 0 };

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

  /**
   * Before writing `bytes` to `socket`: when the instance's unsent bytes and these would go past
   * `server.maxPendingBytes`, the other connections holding the most are cut until they fit.
   */
  makeRoom(bytes: number, socket: Duplex | null): void {
    if (bytes < LARGE_ANSWER_BYTES || this.#watched.size === 0) return;
    let total = this.pendingBytes();
    if (total + bytes <= this.#maxBytes) return;
    const holders = [...this.#watched.values()].filter((w) => w.socket !== socket).sort((a, b) => b.socket.writableLength - a.socket.writableLength);
    for (const w of holders) {
      if (total + bytes <= this.#maxBytes) break;
      const held = w.socket.writableLength;
      this.cuts.instanceCap++;
      this.#log.warn({ heldBytes: held, pendingBytes: total, maxPendingBytes: this.#maxBytes }, 'unsent answers past the instance cap; the connection holding the most is cut');
      this.#cut(w, 'instance cap');
      total -= held;
    }
  }

  /** After a write to `socket`: if the kernel did not take it all, the socket is watched until it has. */
  wrote(socket: Duplex, owner?: Cuttable): void {
    if (socket.writableLength === 0 || socket.destroyed) return;
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
    if (s.destroyed || s.writableLength === 0) return this.#forget(s);
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
