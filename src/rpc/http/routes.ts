import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { NetworkRegistry } from '../../chains/registry.ts';
import type { Config } from '../../config/schema.ts';
import { InternalRpcError, InvalidApiKeyError, InvalidRequestError, type RpcError, UnknownNetworkError } from '../../errors/rpc.ts';
import { errorText } from '../jsonrpc.ts';
import { idText } from '../lossless.ts';
import { type RpcProxy, type RpcReply, type RpcRequest, UNPARSABLE } from '../pipeline.ts';

declare module 'fastify' {
  interface FastifyRequest {
    rawBody?: Buffer;
  }
}

const PUBLIC_NETWORK = 'native-mainnet';

/**
 * The JSON-RPC addresses of C1: `/rpc/main/evm/{chainId}` (X-API-Key), `/v1/{network}/{apiKey}`,
 * and the keyless `/public/main`. Bodies are read as bytes and parsed once; errors here are
 * JSON-RPC errors, never the REST envelope.
 */
export async function rpcRoutes(
  app: FastifyInstance,
  opts: { config: Config; registry: NetworkRegistry; proxy: RpcProxy },
): Promise<void> {
  const { config, registry, proxy } = opts;

  app.removeAllContentTypeParsers();
  // Any content type: many JSON-RPC clients send none or text/plain.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    req.rawBody = body;
    try {
      done(null, JSON.parse(body.toString('utf8')));
    } catch {
      done(null, UNPARSABLE);
    }
  });

  app.setErrorHandler((err: { code?: string; statusCode?: number }, req, reply) => {
    let e: RpcError;
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
      e = new InvalidRequestError(`Request body is larger than ${config.server.bodyLimitBytes} bytes`);
      return reply.status(413).type('application/json').send(errorText('null', e));
    }
    req.log.error({ err }, 'rpc request failed');
    e = new InternalRpcError('Internal error');
    return reply.status(e.httpStatus).type('application/json').send(errorText('null', e));
  });

  // Browser dapps call the RPC addresses directly (CORS).
  const origins = new Set(config.rpc.corsOrigins);
  const anyOrigin = origins.has('*');
  const allowOrigin = (req: FastifyRequest, reply: FastifyReply) => {
    const origin = req.headers.origin;
    if (anyOrigin) reply.header('access-control-allow-origin', '*');
    else if (origin && origins.has(origin)) reply.header('access-control-allow-origin', origin).header('vary', 'Origin');
  };
  app.addHook('onRequest', async (req, reply) => {
    allowOrigin(req, reply);
    reply.header(
      'access-control-expose-headers',
      'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, X-CU-Remaining, Retry-After, X-Request-Id',
    );
  });
  const preflight = async (_req: FastifyRequest, reply: FastifyReply) =>
    reply
      .status(204)
      .header('access-control-allow-methods', 'POST, OPTIONS')
      .header('access-control-allow-headers', 'Content-Type, X-API-Key, Authorization')
      .header('access-control-max-age', '86400')
      .send();
  for (const url of ['/rpc/*', '/v1/*', '/public/*']) app.options(url, { schema: { hide: true } }, preflight);

  const routeOpts = { schema: { hide: true }, ...(config.rpc.accessLog ? {} : { logLevel: 'warn' as const }) };
  const send = (reply: FastifyReply, r: RpcReply) => {
    if (r.headers) reply.headers(r.headers);
    if (r.body === null) return reply.status(204).send();
    return reply.status(r.status).type('application/json').send(r.body);
  };
  const request = (req: FastifyRequest, network: RpcRequest['network'], apiKey: RpcRequest['apiKey']): RpcRequest => ({
    network,
    apiKey,
    parsed: req.body === undefined ? UNPARSABLE : req.body,
    raw: req.rawBody ?? Buffer.alloc(0),
    ip: req.ip,
  });
  const unknownNetwork = (what: string) =>
    new UnknownNetworkError(`Unknown network: ${what}`, { data: { networks: registry.all.map((n) => n.slug) } });

  app.post<{ Params: { chainId: string } }>('/rpc/main/evm/:chainId', routeOpts, async (req, reply) => {
    const chainId = /^\d{1,12}$/.test(req.params.chainId) ? Number(req.params.chainId) : Number.NaN;
    const network = registry.byChainId(chainId) ?? unknownNetwork(`chainId ${req.params.chainId.slice(0, 20)}`);
    const key = req.headers['x-api-key'];
    return send(reply, await proxy.handle(request(req, network, typeof key === 'string' ? key : undefined)));
  });

  app.post<{ Params: { network: string; apiKey: string } }>('/v1/:network/:apiKey', routeOpts, async (req, reply) => {
    const network = registry.bySlug(req.params.network) ?? unknownNetwork(req.params.network.slice(0, 64));
    return send(reply, await proxy.handle(request(req, network, req.params.apiKey)));
  });

  app.post<{ Params: { network: string } }>('/v1/:network', routeOpts, async (req, reply) => {
    const err = new InvalidApiKeyError('Invalid or inactive API key: append /{apiKey} to the address');
    const single = req.body !== UNPARSABLE && typeof req.body === 'object' && req.body !== null && !Array.isArray(req.body);
    const id = single && req.rawBody ? idText(req.rawBody.toString('utf8')) : 'null';
    return send(reply, { status: err.httpStatus, body: errorText(id, err) });
  });

  app.post('/public/main', routeOpts, async (req, reply) => {
    const network = registry.bySlug(PUBLIC_NETWORK) ?? unknownNetwork(PUBLIC_NETWORK);
    return send(reply, await proxy.handle(request(req, network, null)));
  });
}
