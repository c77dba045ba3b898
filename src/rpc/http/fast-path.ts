// The JSON-RPC HTTP addresses (C1) served straight on node:http, ahead of Fastify.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Network, Networks } from '../../chains/networks.ts';
import type { RpcConfig, ServerConfig } from '../../config/schema.ts';
import { GATEWAY_BUSY_RETRY_AFTER_S, InternalRpcError, InvalidRequestError, RpcError, ShuttingDownRpcError, UnknownNetworkError } from '../../errors/rpc.ts';
import { genReqId, redactSecrets } from '../../ops/logging.ts';
import type { RpcHttpMetrics } from '../../ops/metrics.ts';
import type { RequestSpan, Tracing } from '../../ops/tracing.ts';
import { errorText } from '../jsonrpc.ts';
import type { Connection, RpcOutput } from '../message.ts';
import type { RpcPipeline } from '../pipeline.ts';
import { clientIpResolver } from '../client-ip.ts';
import { lacksHost, MISSING_HOST } from '../../http/host-header.ts';
import type { Outbound } from '../../http/outbound.ts';
import { STOPPING_RETRY_AFTER_S } from '../../http/drain.ts';

const PUBLIC_NETWORK = 'native-mainnet';
const EXPOSED = 'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, X-CU-Remaining, Retry-After, X-Request-Id, X-Cache';

/** Where a request goes: the network (or why none) and the key as sent (`null`: public, no key). */
interface Target {
  route: string;
  network: Network | RpcError;
  apiKey: string | undefined | null;
}

export interface FastPathDeps {
  /** The listener's limits and proxies; the RPC addresses' CORS origins and access log. */
  settings: {
    server: Pick<ServerConfig, 'bodyLimitBytes' | 'maxPendingBytesPerConnection' | 'trustedProxies'>;
    rpc: Pick<RpcConfig, 'corsOrigins' | 'accessLog'>;
  };
  networks: Networks;
  pipeline: RpcPipeline;
  logger: Logger;
  metrics?: RpcHttpMetrics;
  /** C60: the instance's unsent bytes and the write timeout. */
  outbound?: Outbound;
  /** C57: true once the gateway is stopping. */
  stopping?: () => boolean;
  /** C58: a span per request read to its end; absent while tracing is off. */
  tracing?: Tracing;
}

/**
 * The JSON-RPC addresses of C1 served straight on node:http, without Fastify's per-request
 * machinery (routing, hooks, reply objects, a child logger): `POST /rpc/main/evm/{chainId}`
 * (X-API-Key), `POST /v1/{network}/{apiKey}` (or `/v1/{network}` with X-API-Key) and the keyless
 * `POST /public/main`, plus their CORS preflights. Everything else goes on to Fastify.
 *
 * @returns a handler that answers `true` when it took the request.
 */
export function rpcFastPath(deps: FastPathDeps): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { settings, networks, pipeline, logger, metrics, outbound, tracing } = deps;
  const stopping = deps.stopping ?? (() => false);
  const limit = settings.server.bodyLimitBytes;
  const perConnection = settings.server.maxPendingBytesPerConnection;
  /** C60: bytes of answers waiting behind another on their connection (pipelining), by socket. */
  const queued = new WeakMap<Socket, number>();
  /** Their sum over every connection: while 0 (no pipelining), the map is never looked at. */
  let queuedTotal = 0;
  /** Counts a pipelined answer in its connection's queue until it is written out (or the connection ends). */
  const queueBehind = (socket: Socket, res: ServerResponse, size: number): void => {
    queued.set(socket, (queued.get(socket) ?? 0) + size);
    queuedTotal += size;
    let done = false;
    const out = (): void => {
      if (done) return;
      done = true;
      queued.set(socket, (queued.get(socket) ?? size) - size);
      queuedTotal -= size;
    };
    res.once('finish', out).once('close', out);
  };
  const clientIp = clientIpResolver(settings.server.trustedProxies);
  const origins = new Set(settings.rpc.corsOrigins);
  const anyOrigin = origins.has('*');
  const accessLog = settings.rpc.accessLog;
  const publicNetwork = networks.bySlug(PUBLIC_NETWORK);
  const networkList = () => networks.all.map((n) => n.slug);
  // The name as sent is repeated only with anything key-shaped in it redacted (a key in the wrong slot).
  const unknownNetwork = (what: string) => new UnknownNetworkError(`Unknown network: ${redactSecrets(what)}`, { details: { networks: networkList() } });

  const count = (route: string, status: number, seconds: number) => metrics?.record(route, status, seconds);

  // The key-in-header addresses of known networks, as written canonically (`/rpc/main/evm/50`,
  // `/v1/native-mainnet`): found again by one lookup instead of a split and a pattern per request.
  // Bounded by the networks (two per network); a key in the path (`/v1/{network}/{key}`) is never kept.
  const known = new Map<string, { route: string; network: Network }>();
  for (const n of networks.all) {
    known.set(`/rpc/main/evm/${n.chainId}`, { route: '/rpc/main/evm/:chainId', network: n });
    known.set(`/v1/${n.slug}`, { route: '/v1/:network', network: n });
  }

  const target = (path: string, req: IncomingMessage): Target | null => {
    const hit = known.get(path);
    if (hit) return { route: hit.route, network: hit.network, apiKey: header(req, 'x-api-key') };
    const parts = path.split('/');
    // ['', 'rpc', 'main', 'evm', chainId] | ['', 'v1', network, key?] | ['', 'public', 'main']
    if (parts[1] === 'rpc' && parts.length === 5 && parts[2] === 'main' && parts[3] === 'evm') {
      const id = parts[4] as string;
      const network = /^\d{1,12}$/.test(id) ? networks.byChainId(Number(id)) : undefined;
      return { route: '/rpc/main/evm/:chainId', network: network ?? unknownNetwork(`chainId ${decode(id).slice(0, 20)}`), apiKey: header(req, 'x-api-key') };
    }
    if (parts[1] === 'v1' && (parts.length === 3 || parts.length === 4) && parts[2]) {
      const slug = decode(parts[2]);
      const network = networks.bySlug(slug) ?? unknownNetwork(slug.slice(0, 64));
      if (parts.length === 4) {
        if (!parts[3]) return null;
        return { route: '/v1/:network/:apiKey', network, apiKey: decode(parts[3]) };
      }
      return { route: '/v1/:network', network, apiKey: header(req, 'x-api-key') };
    }
    if (parts[1] === 'public' && parts.length === 3 && parts[2] === 'main') {
      return { route: '/public/main', network: publicNetwork ?? unknownNetwork(PUBLIC_NETWORK), apiKey: null };
    }
    return null;
  };

  // Only browsers send Origin, and only their answers need the CORS headers.
  const cors = (req: IncomingMessage, headers: Record<string, string>) => {
    const origin = req.headers.origin;
    if (origin === undefined) return;
    if (anyOrigin) headers['access-control-allow-origin'] = '*';
    else if (origin && origins.has(origin)) {
      headers['access-control-allow-origin'] = origin;
      headers.vary = 'Origin';
    }
    headers['access-control-expose-headers'] = EXPOSED;
  };

  /** A request's answer is known: headers completed, then written with the others of this round. */
  const finish = (x: Exchange, out: Answer): void => {
    if (x.answered) return;
    x.answered = true;
    const headers = x.headers;
    if (out.headers) Object.assign(headers, out.headers);
    // C44: HIT for an answer wholly from memory, MISS for every other (a node's, a refusal).
    headers['x-cache'] = out.cache ?? 'MISS';
    // C60: a call refused for want of room in memory (503) is told when to retry; other 503s bring their own.
    if (out.status === 503 && headers['retry-after'] === undefined) headers['retry-after'] = String(GATEWAY_BUSY_RETRY_AFTER_S);
    if (out.body !== null) {
      headers['content-type'] = 'application/json; charset=utf-8';
      // A length, not chunked encoding: one write of head and body.
      headers['content-length'] = String(typeof out.body === 'string' ? Buffer.byteLength(out.body) : out.body.length);
    }
    x.status = out.status;
    x.body = out.body;
    writes.add(x);
  };
  const write = (x: Exchange): void => {
    const { res, t } = x;
    if (res.destroyed) {
      logger.debug({ reqId: x.requestId, route: t.route }, 'client closed the connection before the answer');
      return;
    }
    // C57: from the start of a stop every answer closes its connection, so connections drain by themselves.
    if (stopping()) x.headers.connection = 'close';
    if (x.body === null) res.writeHead(204, x.headers).end();
    else {
      // The request's socket: a pipelined answer's response has none of its own until the answers
      // before it are written (Node queues it), yet it is held for the same connection.
      const socket = x.req.socket;
      // A large text goes out as its bytes: a string waiting in the socket's queue is held twice
      // (the string, and the copy the socket writes from).
      const body = typeof x.body === 'string' && x.body.length > LARGE_TEXT ? Buffer.from(x.body) : x.body;
      x.body = null; // from here on only the socket holds the answer
      if (outbound) {
        // C60: a connection still holding unsent bytes (in the socket, or in answers queued behind
        // the one it writes) takes no answer past its cap; it is cut instead.
        const size = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
        const held = socket.writableLength + (queuedTotal > 0 ? (queued.get(socket) ?? 0) : 0);
        if (held > 0 && held + size > perConnection) {
          logger.warn({ reqId: x.requestId, route: t.route, heldBytes: held, answerBytes: size, maxPendingBytesPerConnection: perConnection }, 'client does not read its answers; connection cut');
          socket.destroy();
          return;
        }
        outbound.makeRoom(size, socket);
        if (res.socket === null) queueBehind(socket, res, size);
      }
      res.writeHead(x.status, x.headers).end(body);
      if (outbound) outbound.wrote(socket);
    }
    const ms = performance.now() - x.started;
    count(t.route, x.status, ms / 1000);
    if (accessLog) logger.info({ reqId: x.requestId, route: t.route, status: x.status, ms: Math.round(ms) }, 'rpc request');
  };
  // C58: a traced request's answer is written (and its access line logged) under its span, which then ends.
  const writeTraced = (x: Exchange): void => {
    const span = x.span;
    if (span === undefined || tracing === undefined) return write(x);
    tracing.within(span, () => write(x));
    span.set('http.response.status_code', x.status);
    span.end(x.status >= 500 ? `HTTP ${x.status}` : undefined);
  };
  const writes = new AnswerWrites(logger, tracing ? writeTraced : write);

  /** C13: an answer given before the pipeline runs (a body over the limit, no Host) with the caller's limit headers, read. */
  const finishUnmetered = (x: Exchange, answer: Answer): void => {
    const read = pipeline.limitHeaders(x.t.apiKey === '' ? undefined : x.t.apiKey, clientIp(x.req));
    if (!(read instanceof Promise)) return finish(x, { ...answer, headers: read });
    read.then(
      (headers) => finish(x, { ...answer, headers }),
      () => finish(x, answer),
    );
  };
  const tooLarge = (x: Exchange): void => {
    const e = new InvalidRequestError(`Request body is larger than ${limit} bytes`);
    x.headers.connection = 'close';
    finishUnmetered(x, { status: 413, body: errorText('null', e), headers: undefined });
    x.req.resume();
  };
  // Shared by every request (no closures made per request): the request's state hangs on it.
  function onData(this: IncomingMessage, chunk: Buffer): void {
    const x = (this as WithExchange)[EXCHANGE];
    if (x.over) return;
    x.size += chunk.length;
    if (x.size > limit) {
      x.over = true;
      tooLarge(x);
      return;
    }
    // A body comes in one chunk as a rule: a list only for the rest (a push into an empty list
    // reserves sixteen slots, garbage per request).
    if (x.first === undefined) x.first = chunk;
    else (x.more ??= []).push(chunk);
  }
  function onEnd(this: IncomingMessage): void {
    const x = (this as WithExchange)[EXCHANGE];
    if (x.over) return;
    if (tracing) void traced(tracing, x);
    else void run(x);
  }
  /** C58: the request as a server span (continuing its traceparent), the pipeline run under it. */
  const traced = (tracing: Tracing, x: Exchange): Promise<void> => {
    const { t } = x;
    const attributes = { 'http.request.method': 'POST', 'http.route': t.route, 'rpc.system': 'jsonrpc', 'junction.request_id': x.requestId, 'junction.network': t.network instanceof RpcError ? 'unknown' : t.network.slug };
    x.span = tracing.request(`POST ${t.route}`, x.req.headers, attributes, x.started);
    return tracing.within(x.span, async () => run(x));
  };
  const failed = (x: Exchange, err: unknown): void => {
    logger.error({ err, reqId: x.requestId, route: x.t.route }, 'rpc request failed');
    finish(x, { status: 500, body: errorText('null', new InternalRpcError('Internal error')), headers: undefined });
  };
  /** The request through the pipeline; an answer known at once is finished at once (no promise). */
  const run = (x: Exchange): void | Promise<void> => {
    const { req, t, first, more } = x;
    const body = more === undefined ? (first ?? EMPTY_BODY) : Buffer.concat([first as Buffer, ...more], x.size);
    const apiKey = t.apiKey === '' ? undefined : t.apiKey;
    let out: Answer | Promise<Answer>;
    try {
      out = pipeline.handle({ network: t.network, apiKey, body, ip: clientIp(req), origin: req.headers.origin, authorization: req.headers.authorization, requestId: x.requestId, arrivedAt: x.started, connection: x });
    } catch (err) {
      return failed(x, err);
    }
    if (!(out instanceof Promise)) return finish(x, out);
    return finishWhenAnswered(x, out);
  };
  // Awaited, not chained with `.then`: no closures per request (see the pipeline's continuations).
  const finishWhenAnswered = async (x: Exchange, out: Promise<Answer>): Promise<void> => {
    let answer: Answer;
    try {
      answer = await out;
    } catch (err) {
      return failed(x, err);
    }
    finish(x, answer);
  };

  return (req, res) => {
    const method = req.method;
    if (method !== 'POST' && method !== 'OPTIONS') return false;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const t = target(path, req);
    if (!t) return false;
    const started = performance.now();
    const requestId = genReqId(req);
    const headers: Record<string, string> = new AnswerHeaders(requestId);
    cors(req, headers);

    if (method === 'OPTIONS' && !lacksHost(req)) {
      headers['access-control-allow-methods'] = 'POST, OPTIONS';
      headers['access-control-allow-headers'] = 'Content-Type, X-API-Key, Authorization';
      headers['access-control-max-age'] = '86400';
      // C57: answered during a stop too (the call that follows is told to come back), closing the connection.
      if (stopping()) headers.connection = 'close';
      res.writeHead(204, headers).end();
      return true;
    }

    const x = new Exchange(req, res, t, headers, requestId, started, stopping);
    // C57: a request that arrives during a stop is turned away before anything else runs.
    if (stopping()) {
      headers.connection = 'close';
      finish(x, { status: 503, body: errorText('null', new ShuttingDownRpcError(STOPPING_RETRY_AFTER_S)), headers: { 'retry-after': String(STOPPING_RETRY_AFTER_S) } });
      req.resume();
      return true;
    }
    // C22: an HTTP/1.1 request without Host is an invalid request, answered before its body is read.
    if (lacksHost(req)) {
      headers.connection = 'close';
      finishUnmetered(x, { status: 400, body: errorText('null', new InvalidRequestError(MISSING_HOST)), headers: undefined });
      req.resume();
      return true;
    }
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limit) {
      tooLarge(x);
      return true;
    }
    (req as WithExchange)[EXCHANGE] = x;
    req.on('data', onData);
    req.on('error', ignore); // a client gone mid-body is not an error of ours
    req.on('end', onEnd);
    return true;
  };
}

type Answer = Pick<RpcOutput, 'status' | 'body' | 'headers' | 'cache'>;
/** Characters past which an answer's text is written as its bytes (see write). */
const LARGE_TEXT = 64 * 1024;
const EXCHANGE = Symbol('rpc exchange');
const EMPTY_BODY = Buffer.alloc(0);
type WithExchange = IncomingMessage & { [EXCHANGE]: Exchange };
const ignore = (): void => {};

/**
 * An answer's headers, made by `new` so that V8 keeps room in the object itself for the ones added
 * after it (rate limits, x-cache, type, length): a literal of one member grew a separate store
 * for them, garbage per request (bench http-alloc).
 */
class AnswerHeaders {
  [name: string]: string;

  constructor(requestId: string) {
    this['x-request-id'] = requestId;
  }
}

/** One request at the fast path's addresses, from its head to its answer: one object, no closures. */
class Exchange implements Connection {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly t: Target;
  readonly headers: Record<string, string>;
  readonly requestId: string;
  readonly started: number;
  /** The body's first chunk, and the others if it came in more than one. */
  first: Buffer | undefined = undefined;
  more: Buffer[] | undefined = undefined;
  size = 0;
  over = false;
  answered = false;
  status = 0;
  body: Buffer | string | null = null;
  /** C58: the request's span while tracing is on. */
  span: RequestSpan | undefined = undefined;

  readonly #stopping: () => boolean;

  constructor(req: IncomingMessage, res: ServerResponse, t: Target, headers: Record<string, string>, requestId: string, started: number, stopping: () => boolean) {
    this.req = req;
    this.res = res;
    this.t = t;
    this.headers = headers;
    this.requestId = requestId;
    this.started = started;
    this.#stopping = stopping;
  }

  /** C57: the calls' answer counts unless a stop cut this connection (the drain limit) before it (message.ts `Connection`). */
  answerable(): boolean {
    return !this.#stopping() || !this.req.socket.destroyed;
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

function decode(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * The answers decided while the event loop polls are written together once it has (setImmediate),
 * not each as soon as it is known. On loopback, and with any client that waits in epoll, a socket
 * write also wakes the reader; written back to back, the first answer of a round wakes the
 * client and the rest find it awake. Under load that takes a third of the kernel's time per
 * request off the write (bench/README.md: "Why a microsecond of code costs more than a
 * microsecond"); an answer waits at most for the other requests of its round (idle: nothing).
 */
class AnswerWrites {
  readonly #queue: Exchange[] = [];
  #scheduled = false;
  readonly #log: Logger;
  readonly #write: (x: Exchange) => void;

  constructor(log: Logger, write: (x: Exchange) => void) {
    this.#log = log;
    this.#write = write;
  }

  add(x: Exchange): void {
    this.#queue.push(x);
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#scheduled = false;
    // A write may lead to more (the next request of a pipelining client): they join this round.
    for (let i = 0; i < this.#queue.length; i++) {
      try {
        this.#write(this.#queue[i] as Exchange);
      } catch (err) {
        this.#log.error({ err }, 'rpc answer could not be written');
      }
    }
    this.#queue.length = 0;
  };
}
