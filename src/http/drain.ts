// A stop that lets HTTP connections drain (C57): requests told to close, idle connections closed.
import type http from 'node:http';
import net from 'node:net';
import type { Logger } from 'pino';
import { Slots } from '../collections/slots.ts';

/** Seconds a caller turned away during a stop is told to wait (`Retry-After`): another instance, or this one restarted. */
export const STOPPING_RETRY_AFTER_S = 2;
/** A kept-alive connection with no request for this long is closed during a stop; one busier than that is closed by its own next answer. */
const QUIET_MS = 1000;
/** How often the stop looks for connections to close. */
const SWEEP_MS = 50;

/**
 * A connection's requests under way, the time of its last request or answer (ms) and its slot
 * among the open connections, in one object under one symbol: an upgrade to a WebSocket lets go
 * of the object (and the boxed number in it), so the WebSocket's socket keeps one empty slot of
 * it for its life (memory per connection, docs/scaling.md).
 */
const STATE = Symbol('drain state');
type Tracked = net.Socket & { [STATE]: { active: number; last: number; slot: number } | undefined };

/**
 * C57: a stop that lets the HTTP connections drain by themselves. From {@link drain} on, the
 * transports answer every request with `Connection: close` ({@link stopping}), and one that
 * arrives on an open connection with 503 and `Retry-After` before anything else runs; the
 * listener stops taking connections. A connection is closed by its own answer, or after
 * {@link QUIET_MS} without a request; once none is left (or after the drain limit, when the
 * ones still busy are cut) the stop goes on.
 *
 * Idle connections are not closed all at once, as `server.close()` does (Node 19+): a client may
 * have sent its next request on one already, and a close then resets a call that was never
 * answered, where a 503 tells it to go elsewhere.
 */
/** Marks an 'upgrade' listener that only watches (answers nothing): see WsGateway's fallback. */
export const WATCHES_ONLY = Symbol.for('junction.upgradeListenerWatchesOnly');

export class ConnectionDrain {
  #server: http.Server | undefined;
  readonly #log: Logger;
  /** Open HTTP connections: a slot each, not a Set, so that a closed one is let go at once (collections/slots.ts). */
  readonly #open = new Slots<Tracked>();
  #stopping = false;
  #drained: Promise<void> | undefined;

  constructor(log: Logger) {
    this.#log = log;
  }

  /** Follows the connections and requests of `server` (once, before it listens). */
  attach(server: http.Server): void {
    this.#server = server;
    // One listener for every socket (its `this`), nothing made per connection.
    const open = this.#open;
    const closed = function (this: net.Socket): void {
      const state = (this as Tracked)[STATE];
      if (state !== undefined) open.remove(state.slot, this as Tracked);
    };
    server.on('connection', (socket: net.Socket) => {
      const s = socket as Tracked;
      s[STATE] = { active: 0, last: performance.now(), slot: open.add(s) };
      s.on('close', closed);
    });
    server.on('request', onRequest);
    // A WebSocket is the WebSocket gateway's to close (1001), not an HTTP connection to drain; its
    // socket is let go of whole, the close listener too, so that the WebSocket's socket keeps ws's
    // listener alone (three at once grew the socket's list of them to 19 slots, held for the
    // connection's life: memory per connection, docs/scaling.md). The listener only
    // watches: it is marked so that the WebSocket gateway still answers upgrades no other
    // listener takes (ws/server.ts).
    const forget = Object.assign(
      (req: http.IncomingMessage) => {
        const s = req.socket as Tracked;
        const state = s[STATE];
        if (state !== undefined) open.remove(state.slot, s);
        s.off('close', closed);
        s[STATE] = undefined;
      },
      { [WATCHES_ONLY]: true },
    );
    server.on('upgrade', forget);
  }

  /** True from the start of a stop: answers carry `Connection: close`, new requests get 503. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /** HTTP connections open now (WebSockets not counted). */
  get open(): number {
    return this.#open.size;
  }

  /**
   * Stops taking connections and waits for the open ones to close (see the class); after
   * `limitMs` the connections still busy are cut. Resolves once none is left.
   */
  drain(limitMs: number): Promise<void> {
    this.#drained ??= new Promise<void>((resolve) => {
      this.#stopping = true;
      // net's close, not http's: it stops listening without closing the kept-alive connections.
      if (this.#server?.listening) net.Server.prototype.close.call(this.#server);
      const sweep = setInterval(() => {
        const now = performance.now();
        this.#open.forEach((s) => {
          const state = s[STATE];
          if (state && state.active === 0 && now - state.last >= QUIET_MS) s.destroy();
        });
        if (this.#open.size === 0) done();
      }, SWEEP_MS);
      const cut = setTimeout(() => {
        if (this.#open.size > 0) this.#log.warn({ drainMs: limitMs, connections: this.#open.size }, 'requests still running after the drain; closing their connections');
        this.#open.forEach((s) => s.destroy());
        done();
      }, limitMs);
      function done(): void {
        clearInterval(sweep);
        clearTimeout(cut);
        resolve();
      }
    });
    return this.#drained;
  }
}

// Listeners every request shares (`this` is the request or the response): none made per request.
function onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
  const state = (req.socket as Tracked)[STATE];
  if (state === undefined) return;
  state.active++;
  state.last = performance.now();
  // `on`, not `once`: a response closes once, and `once` would wrap the listener anew per request.
  res.on('close', onAnswered);
}

function onAnswered(this: http.ServerResponse): void {
  const state = (this.req.socket as Tracked | null)?.[STATE];
  if (state === undefined) return;
  state.active--;
  state.last = performance.now();
}
