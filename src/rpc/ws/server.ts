// JSON-RPC over WebSocket at `/ws` and `/ws/{network}` (C1), with shared subscriptions.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { type Server, WebSocketServer } from 'ws';
import type { Networks } from '../../chains/networks.ts';
import type { RpcConfig, ServerConfig, WsConfig } from '../../config/schema.ts';
import { InternalRpcError, InvalidRequestError, RateLimitedError, type RpcError, UnknownNetworkError } from '../../errors/rpc.ts';
import { admit, Refusal } from '../../keys/admission.ts';
import type { KeyCache } from '../../keys/cache.ts';
import type { KeyChange } from '../../keys/changes.ts';
import type { Meter } from '../../metering/meter.ts';
import { genReqId, redactSecrets } from '../../ops/logging.ts';
import type { Upstreams } from '../../upstreams/upstreams.ts';
import { lacksHost, MISSING_HOST } from '../../http/host-header.ts';
import { errorText } from '../jsonrpc.ts';
import type { RpcPipeline } from '../pipeline.ts';
import { clientIpResolver } from '../client-ip.ts';
import { ClientWebSocket, type ConnectionContext, GOING_AWAY, GOING_AWAY_REASON, type SlotKey, wholeMs, WsConnection } from './connection.ts';
import { flat, notificationFrame } from './frame.ts';
import { refuse, serveAsHttp } from './http-fallback.ts';
import { OTHER_METHOD } from '../../ops/metrics.ts';
import type { Outbound } from '../../http/outbound.ts';
import type { Tracing } from '../../ops/tracing.ts';
import { WATCHES_ONLY } from '../../http/drain.ts';

export interface WsDeps {
  /** The WebSocket section; the proxies and CORS origins shared with the HTTP addresses. */
  settings: { ws: WsConfig; server: Pick<ServerConfig, 'trustedProxies'>; rpc: Pick<RpcConfig, 'corsOrigins'> };
  networks: Networks;
  pipeline: RpcPipeline;
  keys: KeyCache;
  meter: Meter;
  upstreams: Upstreams;
  logger: Logger;
  /** Key changes (C20): connections of a changed key are checked again at once. */
  onKeyChange?: (listener: (change: KeyChange) => void) => () => void;
  /** Where the connection gauges are registered. */
  metricsRegistry?: Registry;
  /** C60: the instance's unsent bytes and the write timeout. */
  outbound?: Outbound;
  /** C58: a span per message; absent while tracing is off. */
  tracing?: Tracing;
}

const ignore = (): void => {};
/** Connections pinged and checked per turn of the event loop (see WsGateway.start). */
const SWEEP_SLICE = 500;

/** `/ws` and `/ws/` (native mainnet), `/ws/{network}` (C1); a trailing slash is accepted. */
const WS_PATH = /^\/ws(?:\/([^/]*))?\/?$/;
const DEFAULT_NETWORK = 'native-mainnet';

/**
 * JSON-RPC over WebSocket at `/ws` and `/ws/{network}` (C1), with shared `eth_subscribe`
 * subscriptions. The upgrade is answered here, before any WebSocket exists: the key, the
 * network and the connection limit are checked and refused with a plain HTTP status (401, 403,
 * 404, 429) and a JSON-RPC error body; the 101 carries the rate-limit headers (C13).
 */
export function installWebSocket(app: FastifyInstance, deps: WsDeps): WsGateway {
  const gateway = new WsGateway(app, deps);
  app.server.on('upgrade', gateway.onUpgrade);
  // preClose: before the server waits for its connections, which WebSockets would hold open.
  app.addHook('preClose', () => gateway.close());

  // A plain GET on the WebSocket address says how to use it.
  const upgradeRequired = async (_req: unknown, reply: FastifyReply) => {
    const err = new InvalidRequestError('Upgrade required: open a WebSocket connection to this address');
    return reply.status(426).header('upgrade', 'websocket').header('connection', 'Upgrade').type('application/json').send(errorText('null', err));
  };
  for (const url of ['/ws', '/ws/', '/ws/:network']) app.get(url, { schema: { hide: true } }, upgradeRequired);
  return gateway;
}

/** Open connections per API key on this instance (with REDIS_URL too: the count is per instance). */
class ConnectionSlots {
  readonly #open = new Map<string, { open: number; key: SlotKey }>();

  /**
   * A connection slot of `keyId`, or null at its limit. Then the key as the connection keeps it:
   * the object its key's other connections hold when it sent the same text (a dapp's key is
   * shared by many clients), else its own, with a flat copy of the text (frame.ts: the key is a
   * slice of the whole URL). Memory per connection, docs/scaling.md.
   */
  take(keyId: string, max: number | null, text: string): SlotKey | null {
    const slots = this.#open.get(keyId);
    if (slots === undefined) {
      if (max !== null && max < 1) return null;
      const key = { keyId, text: flat(text) };
      this.#open.set(keyId, { open: 1, key });
      return key;
    }
    if (max !== null && slots.open >= max) return null;
    slots.open++;
    return slots.key.text === text ? slots.key : { keyId, text: flat(text) };
  }

  release(keyId: string): void {
    const slots = this.#open.get(keyId);
    if (slots !== undefined && --slots.open <= 0) this.#open.delete(keyId);
  }

  count(keyId: string): number {
    return this.#open.get(keyId)?.open ?? 0;
  }
}

/** The WebSocket endpoint of one app: upgrades, open connections, subscription hubs. */
export class WsGateway {
  readonly connections = new Set<WsConnection>();
  readonly #app: FastifyInstance;
  readonly #d: WsDeps;
  readonly #wss: Server<typeof ClientWebSocket>;
  readonly #ctx: ConnectionContext;
  readonly #slots = new ConnectionSlots();
  readonly #clientIp: (req: IncomingMessage) => string;
  readonly #upgradeHeaders = new WeakMap<IncomingMessage, Record<string, string>>();
  #sweep: NodeJS.Timeout | undefined;
  readonly #offKeyChanges: () => void;
  readonly #origins: ReadonlySet<string>;
  #closing: Promise<void> | undefined;
  /** C57: during a stop, the connections whose calls in flight are still being answered, and who waits for none to be left. */
  #draining: { busy: Set<WsConnection>; done: () => void } | undefined;
  /** Notification frames made (one per notification and topic, whatever the number of clients). */
  #framesBuilt = 0;

  constructor(app: FastifyInstance, deps: WsDeps) {
    this.#app = app;
    this.#d = deps;
    const ws = deps.settings.ws;
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: ws.maxPayloadBytes, clientTracking: false, perMessageDeflate: false, WebSocket: ClientWebSocket });
    this.#wss.on('headers', (headers: string[], req: IncomingMessage) => {
      for (const [k, v] of Object.entries(this.#upgradeHeaders.get(req) ?? {})) headers.push(`${k}: ${v}`);
    });
    const counted = (resultText: string) => {
      this.#framesBuilt++;
      return notificationFrame(resultText);
    };
    this.#ctx = {
      settings: deps.settings.ws,
      pipeline: deps.pipeline,
      keys: deps.keys,
      upstreams: deps.upstreams,
      logger: deps.logger,
      frameOf: (note) => note.shared(counted),
      outbound: deps.outbound,
      tracing: deps.tracing,
      closed: (conn) => {
        this.connections.delete(conn);
        this.#slots.release(conn.slotKey.keyId);
        this.#drained(conn);
      },
      stopping: false,
      drained: (conn) => this.#drained(conn),
    };
    this.#clientIp = clientIpResolver(deps.settings.server.trustedProxies);
    this.#origins = new Set(deps.settings.rpc.corsOrigins);

    // C20: a key revoked, rotated, deleted, switched off or narrowed closes its connections now.
    this.#offKeyChanges =
      deps.onKeyChange?.((change) => {
        const hashes = new Set(change.keyHashes);
        for (const c of this.connections) {
          if (hashes.has(c.key.keyHash) || (change.type === 'account' && c.key.userId === change.userId)) {
            void c.recheckKey().catch(() => {});
          }
        }
      }) ?? (() => {});

    const registry = deps.metricsRegistry;
    if (registry) {
      const connections = this.connections;
      const upstreams = deps.upstreams;
      new Gauge({
        name: 'junction_ws_connections',
        help: 'Open client WebSocket connections',
        registers: [registry],
        collect() {
          this.set(connections.size);
        },
      });
      new Gauge({
        name: 'junction_ws_upstream_subscriptions',
        help: 'Upstream subscriptions (distinct topics) by network, shared by all clients',
        labelNames: ['network'] as const,
        registers: [registry],
        collect() {
          this.reset();
          for (const s of upstreams.hubStats()) this.set({ network: s.network }, s.topics);
        },
      });
    }
  }

  /** Counters of each network's subscription hub. */
  stats(): { connections: number; framesBuilt: number; hubs: ReturnType<Upstreams['hubStats']> } {
    return { connections: this.connections.size, framesBuilt: this.#framesBuilt, hubs: this.#d.upstreams.hubStats() };
  }

  /** Open connections of one key on this instance. */
  connectionsOf(keyId: string): number {
    return this.#slots.count(keyId);
  }

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const path = (req.url ?? '/').split('?', 1)[0] as string;
    const match = WS_PATH.exec(path);
    const wantsWebSocket = (req.headers.upgrade ?? '').toLowerCase() === 'websocket';
    if (!match || !wantsWebSocket) {
      this.#notOurs(req, socket, head, Boolean(match));
      return;
    }
    socket.on('error', ignore); // a client gone mid-handshake is not an error of ours
    const slug = match[1] || DEFAULT_NETWORK;
    this.#accept(req, socket, head, slug).catch((err: unknown) => {
      this.#d.logger.error({ err }, 'websocket upgrade failed');
      refuse(socket, 500, new InternalRpcError('Internal error'));
    });
  };

  async #accept(req: IncomingMessage, socket: Duplex, head: Buffer, slug: string): Promise<void> {
    // One request id for the connection: its refusal, its 101 and the log lines of its messages.
    // Flat copies of what the connection keeps (frame.ts: a UUID is built by concatenation, the key is a slice of the whole URL).
    const reqId = flat(genReqId(req));
    const deny = (s: Duplex, status: number, err: RpcError, headers: Record<string, string> = {}): void => {
      if ((status === 401 || status === 403 || status === 429) && this.#d.logger.isLevelEnabled('debug')) {
        this.#d.logger.debug({ reqId, network: slug, status, code: err.code, reason: err.message }, 'websocket refused');
      }
      refuse(s, status, err, { ...headers, 'x-request-id': reqId });
    };
    if (this.#closing) return deny(socket, 503, new InternalRpcError('The gateway is shutting down; reconnect shortly'));
    const url = new URL(req.url ?? '/', 'http://gateway');
    const header = req.headers['x-api-key'];
    const apiKey = url.searchParams.get('apiKey') ?? (typeof header === 'string' ? header : undefined);
    const ip = this.#clientIp(req);
    // C13: a refusal before the key is admitted carries the caller's limits, read (pipeline.limitHeaders).
    const denyUnmetered = async (status: number, err: RpcError, own?: Record<string, string>): Promise<void> =>
      deny(socket, status, err, { ...(await this.#d.pipeline.limitHeaders(apiKey, ip)), ...own });
    // C7, C22: an HTTP/1.1 upgrade without Host is refused as any HTTP/1.1 request without it is.
    if (lacksHost(req)) return denyUnmetered(400, new InvalidRequestError(MISSING_HOST));
    const network = this.#d.networks.bySlug(slug);
    if (!network) {
      return denyUnmetered(404, new UnknownNetworkError(`Unknown network: ${redactSecrets(slug.slice(0, 64))}`, { details: { networks: this.#d.networks.all.map((n) => n.slug) } }));
    }
    const origin = req.headers.origin;
    if (origin && !this.#origins.has('*') && !this.#origins.has(origin)) {
      return denyUnmetered(403, new InvalidRequestError('Origin not allowed'));
    }
    const jwt = url.searchParams.get('jwt');
    const authorization = req.headers.authorization ?? (jwt ? `Bearer ${jwt}` : undefined);
    // The one admission step, as on the HTTP RPC addresses (the key's allowlists are checked again on
    // each message); a key only storage can tell about takes a place in the address's failed-lookup
    // allowance first (C17), so guessing keys through upgrades cannot make a storage round trip each.
    let admitted = admit(this.#d.keys, apiKey ?? undefined, network.slug, { origin, ip, authorization }, this.#d.meter);
    if (admitted instanceof Promise) admitted = await admitted;
    if (admitted instanceof Refusal) {
      const { error, key: known } = admitted;
      this.#d.pipeline.countRefusal(admitted, network.slug, OTHER_METHOD);
      // C13: a refusal of a usable key (network, allowlists) carries its limits (read, not consumed);
      // a failed lookup, the window that counted it; any other key refusal, the window read.
      if (known && (admitted.reason === 'network' || admitted.reason === 'access')) return deny(socket, error.httpStatus, error, (await this.#d.meter.rpc({ key: known }, 0, 0)).headers);
      if (admitted.headers?.['x-ratelimit-limit'] !== undefined) return deny(socket, error.httpStatus, error, admitted.headers);
      return denyUnmetered(error.httpStatus, error, admitted.headers);
    }
    const key = admitted;
    // C13: the 101 and every refusal from here on carry the caller's limits (read, not consumed).
    const { headers } = await this.#d.meter.rpc({ key }, 0, 0);
    const max = this.#d.settings.ws.plans[key.tier].connectionsPerKey;
    const slotKey = this.#slots.take(key.keyId, max, apiKey as string);
    if (slotKey === null) {
      const err = new RateLimitedError(`Connection limit exceeded: at most ${max} WebSocket connections per API key`, { details: { limit: 'connections', max } });
      return deny(socket, err.httpStatus, err, headers);
    }
    if (socket.destroyed || this.#closing) {
      this.#slots.release(key.keyId);
      return deny(socket, 503, new InternalRpcError('The gateway is shutting down; reconnect shortly'));
    }
    // A handshake ws refuses (bad Sec-WebSocket-Key, version) ends the socket without a callback.
    // ws 8 completes or refuses one before handleUpgrade returns (no verifyClient here), so the
    // slot of a refused one is given back right after; were the callback ever to come later, a
    // close listener does it instead. Nothing is left on the socket for the connection's life:
    // memory per connection (docs/scaling.md).
    let upgraded = false;
    let listening = false;
    const notUpgraded = () => this.#slots.release(key.keyId);
    this.#upgradeHeaders.set(req, { ...headers, 'x-request-id': reqId });
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      upgraded = true; // from now on the connection's close gives the slot back
      if (listening) socket.off('close', notUpgraded);
      // ws has its own error listener on the socket now.
      socket.off('error', ignore);
      // C58: the upgrade's traceparent, which each message's trace links to (read only while tracing is on).
      const traceLink = this.#d.tracing ? upgradeTrace(req) : undefined;
      const conn = new WsConnection(ws, socket, { network, slotKey, key, ip, origin, authorization, reqId, traceLink }, this.#ctx);
      this.connections.add(conn);
      if (this.#closing) ws.close(GOING_AWAY, GOING_AWAY_REASON);
    });
    if (upgraded) return;
    if (socket.destroyed) return notUpgraded();
    listening = true;
    socket.once('close', notUpgraded);
  }

  /**
   * An upgrade that is not a WebSocket to /ws: another listener's, or an HTTP request that merely
   * offered an upgrade (`curl --http2` sends `Upgrade: h2c`, even with a body), which Fastify
   * answers as HTTP/1.1 as Node does when nobody listens for upgrades. A WebSocket elsewhere is 404.
   */
  #notOurs(req: IncomingMessage, socket: Duplex, head: Buffer, ourPath: boolean): void {
    // Another listener that answers upgrades takes them; one that only watches (the stop's drain) does not count.
    const others = this.#app.server.listeners('upgrade').filter((l) => l !== this.onUpgrade && !(WATCHES_ONLY in l));
    if (others.length > 0) return;
    socket.on('error', () => {});
    const wantsWebSocket = (req.headers.upgrade ?? '').toLowerCase() === 'websocket';
    if (wantsWebSocket && !ourPath) return refuse(socket, 404, new InvalidRequestError('No WebSocket endpoint here: use /ws or /ws/{network}'));
    serveAsHttp(this.#app.server, req, socket as Socket, head);
  }

  /**
   * Starts the one timer for every connection: pings, idle clients, keys that expired meanwhile.
   * Each round goes over the connections in slices, yielding between them, so that with many
   * thousands of clients a round does not hold the event loop (and the notifications) for long.
   */
  start(): void {
    if (this.#sweep || this.#closing) return;
    this.#sweep = setInterval(() => {
      const now = wholeMs();
      const open = [...this.connections];
      let i = 0;
      const slice = () => {
        for (const end = Math.min(open.length, i + SWEEP_SLICE); i < end; i++) {
          const c = open[i] as WsConnection;
          if (c.closed) continue;
          c.heartbeat(now);
          void c.recheckKey().catch(() => {});
        }
        if (i < open.length && !this.#closing) setImmediate(slice);
      };
      slice();
    }, this.#d.settings.ws.pingIntervalMs);
    this.#sweep.unref();
  }

  /**
   * Graceful stop (SIGTERM, C57). From now on every connection turns new messages away (-32603,
   * `data.retryAfter`, as HTTP's 503) and its subscriptions get no more notifications; a
   * connection with no call in flight gets its 1001 close at once, one with calls in flight once
   * they are answered. The whole of it takes at most `drainMs` (main.ts: the same half of
   * `server.shutdownGraceMs` the HTTP drain has), so the last usage write keeps the rest of the
   * grace: calls in flight have `drainMs` less the close handshake's time (`ws.closeGraceMs`, at
   * most half of `drainMs`); the connections still busy then get their 1001 anyway: their answers
   * are dropped and, never answered, not counted as usage (the pipeline records a call's usage
   * only while its connection can still carry the answer). Clients then have what is left of
   * `drainMs` to answer the close, the rest are cut; the hubs close their upstream connections.
   * `drainMs` 0 (the app's own close, without a stop before it) closes every connection at once,
   * with `ws.closeGraceMs` for the handshake.
   */
  close(drainMs = 0): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#sweep);
      this.#offKeyChanges();
      this.#ctx.stopping = true;
      const open = [...this.connections];
      const closed = open.map((c) => new Promise<void>((resolve) => (c.closed ? resolve() : c.ws.once('close', () => resolve()))));
      const busy = new Set<WsConnection>();
      for (const c of open) if (!c.stop()) busy.add(c);
      const closeGraceMs = this.#d.settings.ws.closeGraceMs;
      const deadline = performance.now() + drainMs;
      if (busy.size > 0) {
        let cut: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          this.#draining = { busy, done: resolve };
          cut = setTimeout(resolve, drainMs - Math.min(closeGraceMs, Math.floor(drainMs / 2)));
        });
        clearTimeout(cut);
        this.#draining = undefined;
        if (busy.size > 0) {
          this.#d.logger.warn({ drainMs, connections: busy.size }, 'websocket calls still running after the drain; closing their connections (1001), their calls unanswered and not counted');
          for (const c of busy) c.ws.close(GOING_AWAY, GOING_AWAY_REASON);
        }
      }
      let timer: NodeJS.Timeout | undefined;
      const handshakeMs = drainMs > 0 ? Math.max(0, Math.min(closeGraceMs, deadline - performance.now())) : closeGraceMs;
      await Promise.race([Promise.all(closed), new Promise((r) => (timer = setTimeout(r, handshakeMs)))]);
      clearTimeout(timer);
      for (const c of this.connections) c.ws.terminate();
      this.#wss.close();
    })();
    return this.#closing;
  }

  /** C57: a connection busy when the stop began is done (its calls answered, or it closed). */
  #drained(conn: WsConnection): void {
    const draining = this.#draining;
    if (draining === undefined || !draining.busy.delete(conn)) return;
    if (draining.busy.size === 0) draining.done();
  }
}

/** The W3C trace headers of an upgrade, when it carried a traceparent. */
function upgradeTrace(req: IncomingMessage): Record<string, string> | undefined {
  const { traceparent, tracestate } = req.headers;
  if (typeof traceparent !== 'string') return undefined;
  return typeof tracestate === 'string' ? { traceparent, tracestate } : { traceparent };
}
