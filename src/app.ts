import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { adminRoutes } from './admin/routes.ts';
import { accountRoutes } from './auth/account-routes.ts';
import { AccountService } from './auth/accounts.ts';
import { configureHashSlots } from './auth/passwords.ts';
import { requireBearer } from './auth/bearer.ts';
import { authRoutes } from './auth/routes.ts';
import { TokenService } from './auth/tokens.ts';
import { NetworkRegistry } from './chains/registry.ts';
import { networkRoutes } from './chains/routes.ts';
import { publicUrl } from './config/load.ts';
import type { Config } from './config/schema.ts';
import type { Secrets } from './config/secrets.ts';
import { clientErrorHandler, installRestErrors } from './errors/handler.ts';
import { applyServerTimeouts } from './http/server-timeouts.ts';
import { installValidators } from './http/validation.ts';
import { KeyChangeBus } from './keys/bus.ts';
import { KeyCache } from './keys/cache.ts';
import { keyRoutes } from './keys/routes.ts';
import { KeyService } from './keys/service.ts';
import { healthRoutes, type ReadinessCheck } from './ops/health.ts';
import { createLogger, genReqId } from './ops/logging.ts';
import { instrument, Metrics, RpcHttpMetrics } from './ops/metrics.ts';
import { ResponseCache } from './rpc/dispatch/cache.ts';
import { rpcFastPath } from './rpc/http/fast-path.ts';
import { RpcPipeline } from './rpc/pipeline.ts';
import { MethodPolicy } from './rpc/policy.ts';
import { installWebSocket, type WsGateway } from './rpc/ws/server.ts';
import { Upstreams } from './upstreams/upstreams.ts';
import { faucetRoutes } from './faucet/routes.ts';
import { FaucetService } from './faucet/service.ts';
import type { Storage } from './storage/db.ts';
import type { Redis } from 'ioredis';
import { type Limiter, MemoryLimiter } from './metering/limiter.ts';
import { Meter } from './metering/meter.ts';
import { RestLimits } from './metering/rest-limits.ts';
import { RedisLimiter } from './metering/redis-limiter.ts';
import { usageRoutes } from './usage/routes.ts';
import { UsageService } from './usage/service.ts';

export interface AppDeps {
  storage: Storage;
  secrets: Secrets;
  /** Probe every network's upstreams from the start (the server); tests probe a network on first use. */
  probeUpstreams?: boolean;
  /** Shared state across instances (REDIS_URL): limits and key-change events. */
  redis?: Redis;
  /** Where log lines go (tests read them); default stdout. */
  logStream?: DestinationStream;
  logger?: Logger;
}

/**
 * The parts of a built app, for main.ts, tests and the benchmark to observe (counters, flushes).
 * Features never read them from here: each is handed what it needs when it is made.
 */
export interface AppParts {
  config: Config;
  registry: NetworkRegistry;
  accounts: AccountService;
  tokens: TokenService;
  keys: KeyService;
  metrics: Metrics;
  keyCache: KeyCache;
  upstreams: Upstreams;
  usage: UsageService;
  ws: WsGateway;
}

declare module 'fastify' {
  interface FastifyInstance {
    parts: AppParts;
  }
}

export const API_PREFIX = '/api/v1';

/**
 * Builds the whole service as a Fastify instance that is not listening yet (main.ts listens).
 * Everything it needs comes in: config, storage, secrets. Nothing runs in the background until
 * the app is ready (`onReady`: health probes, usage flushing, the faucet's re-broadcast).
 * The JSON-RPC addresses are served by a fast path on the same server, ahead of Fastify.
 */
export async function buildApp(config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const logger = deps.logger ?? createLogger(config.logLevel, deps.logStream);
  // Set once the pipeline exists; the server asks it first for every request.
  // eslint-disable-next-line prefer-const -- assigned once the pipeline exists, read by the server factory before that
  let fastPath: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;
  const app = Fastify({
    serverFactory: (handler) =>
      createServer((req, res) => {
        if (!fastPath?.(req, res)) handler(req, res);
      }),
    clientErrorHandler,
    loggerInstance: logger,
    genReqId,
    requestIdHeader: false,
    bodyLimit: config.server.bodyLimitBytes,
    // Keys travel as a path segment (/v1/{network}/{apiKey}); longer ones are refused as keys, not as URLs.
    routerOptions: { maxParamLength: 512 },
    trustProxy: config.server.trustedProxies.length ? [...config.server.trustedProxies] : false,
    // A graceful stop closes idle keep-alive sockets and lets requests in flight finish.
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as FastifyInstance;
  applyServerTimeouts(app.server, config);

  let listeningPort: number | undefined;
  app.addHook('onListen', async () => {
    const addr = app.server.address();
    if (addr && typeof addr === 'object') listeningPort = addr.port;
  });
  const registry = new NetworkRegistry(config, () => publicUrl(config, listeningPort));
  const db = deps.storage.db;
  // Password hashing is bounded process-wide (register, login, password change).
  configureHashSlots(config.auth);
  const accounts = new AccountService(db, { passwordHashCost: config.auth.passwordHashCost });
  const tokens = new TokenService(db, {
    secret: deps.secrets.jwtSecret,
    issuer: config.auth.issuer,
    accessTtlSeconds: config.auth.accessTokenTtlSeconds,
    refreshTtlSeconds: config.auth.refreshTokenTtlSeconds,
  });
  const keys = new KeyService({ db, config, registry, encryptionSecret: deps.secrets.keyEncryptionSecret });
  const metrics = new Metrics();
  const keyCache = new KeyCache(keys, config, { ttlMs: config.rpc.keyCacheTtlMs });
  const upstreams = new Upstreams(config, logger);
  const policy = new MethodPolicy({ config, wsHint: 'the WebSocket address /ws/{network}?apiKey=...' });
  const bus = deps.redis ? await KeyChangeBus.start(deps.redis, keys, keyCache, logger) : undefined;
  const limiter: Limiter = deps.redis ? new RedisLimiter(deps.redis) : new MemoryLimiter();
  const meter = new Meter(config, limiter);
  const usage = new UsageService({ db, config, logger });
  keys.usage = usage;
  const cache = config.cache.enabled ? new ResponseCache(config.cache) : undefined;
  const pipeline = new RpcPipeline({ config, keys: keyCache, policy, upstreams, logger, meter, usage, ...(cache ? { cache } : {}) });
  app.addHook('onClose', async () => {
    await bus?.close();
    keyCache.close();
    await upstreams.close();
    await limiter.close();
    // Nothing accepted is lost on a graceful stop: the last counts reach storage (C27).
    await usage.close();
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  installValidators(app);
  installRestErrors(app);
  instrument(app, metrics);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Junction API',
        version: '1.0.0',
        description: 'REST API of the Junction multi-chain RPC gateway. JSON-RPC addresses: see README.',
      },
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          adminToken: { type: 'apiKey', in: 'header', name: 'X-Admin-Token' },
        },
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  const checks: ReadinessCheck[] = [{ name: 'storage', check: () => deps.storage.ping() }];
  const redis = deps.redis;
  if (redis) checks.push({ name: 'redis', check: async () => void (await redis.ping()) });
  healthRoutes(app, checks, () => upstreams.report());
  const rpcHttp = rpcFastPath({ config, registry, pipeline, logger, metrics: new RpcHttpMetrics(metrics.registry) });
  fastPath = rpcHttp;
  // The server hands RPC requests to the fast path before Fastify sees them; requests that
  // reach Fastify another way (app.inject in tests) take the same path from here.
  const viaFastPath = async (req: FastifyRequest, reply: FastifyReply) => {
    if (rpcHttp(req.raw, reply.raw)) reply.hijack();
  };
  for (const url of ['/rpc/*', '/v1/*', '/public/*']) {
    app.route({ method: ['POST', 'OPTIONS'], url, schema: { hide: true }, onRequest: viaFastPath, handler: async (_req, reply) => reply.callNotFound() });
  }
  const ws = installWebSocket(app, {
    config,
    registry,
    pipeline,
    keys: keyCache,
    meter,
    upstreams,
    logger,
    onKeyChange: (listener) => keys.onChange(listener),
    metricsRegistry: metrics.registry,
  });
  const faucet = new FaucetService({ db, config, registry, upstreams, logger });
  app.addHook('onClose', () => faucet.close());
  app.decorate('parts', { config, registry, accounts, tokens, keys, metrics, keyCache, upstreams, usage, ws } satisfies AppParts);

  // Background work starts once the app is ready, never while it is being built.
  app.addHook('onReady', async () => {
    if (deps.probeUpstreams) upstreams.startAll();
    await meter.seedFromUsage(usage);
    usage.start();
    await faucet.start();
  });

  const restLimits = new RestLimits(config, limiter);
  await app.register(
    async (api) => {
      // C17: signed-out REST traffic is limited per client IP...
      await api.register(async (open) => {
        open.addHook('onRequest', (req, reply) => restLimits.request(req, reply));
        await open.register(authRoutes, { accounts, tokens, limits: restLimits });
        await open.register(networkRoutes, { registry });
        if (config.admin.token) await open.register(adminRoutes, { token: config.admin.token, accounts, keys, config });
      });
      // ...and signed-in traffic per account.
      await api.register(async (protectedScope) => {
        requireBearer(protectedScope, tokens, restLimits);
        protectedScope.addHook('onRequest', (req, reply) => restLimits.request(req, reply, req.userId));
        await protectedScope.register(accountRoutes, { accounts, tokens, limits: restLimits, meter, config });
        await protectedScope.register(keyRoutes, { keys, accounts, config });
        await protectedScope.register(usageRoutes, { usage });
        await protectedScope.register(faucetRoutes, { faucet });
      });
    },
    { prefix: API_PREFIX },
  );

  return app;
}
