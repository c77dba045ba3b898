import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { adminRoutes } from './admin/routes.ts';
import { AccountService } from './auth/accounts.ts';
import { requireBearer } from './auth/bearer.ts';
import { authRoutes } from './auth/routes.ts';
import { TokenService } from './auth/tokens.ts';
import { NetworkRegistry } from './chains/registry.ts';
import { networkRoutes } from './chains/routes.ts';
import { publicUrl } from './config/load.ts';
import type { Config } from './config/schema.ts';
import type { Secrets } from './config/secrets.ts';
import { installRestErrors } from './errors/handler.ts';
import { installValidators } from './http/validation.ts';
import { KeyChangeBus } from './keys/bus.ts';
import { KeyCache } from './keys/cache.ts';
import { keyRoutes } from './keys/routes.ts';
import { KeyService } from './keys/service.ts';
import { healthRoutes, type ReadinessCheck } from './ops/health.ts';
import { createLogger, genReqId } from './ops/logging.ts';
import { instrument, Metrics } from './ops/metrics.ts';
import { MethodPolicy } from './rpc/policy.ts';
import { UpstreamPools } from './upstreams/upstreams.ts';
import { RpcProxy } from './rpc/pipeline.ts';
import { rpcRoutes } from './rpc/http/routes.ts';
import { installWebSocket } from './rpc/ws/server.ts';
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

export interface Services {
  config: Config;
  registry: NetworkRegistry;
  accounts: AccountService;
  tokens: TokenService;
  keys: KeyService;
  metrics: Metrics;
  keyCache: KeyCache;
  pools: UpstreamPools;
  usage: UsageService;
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

export const API_PREFIX = '/api/v1';

/**
 * Builds the whole service as a Fastify instance that is not listening yet (main.ts listens).
 * Everything it needs comes in: config, storage, secrets.
 */
export async function buildApp(config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const logger = deps.logger ?? createLogger(config.logLevel, deps.logStream);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    genReqId,
    requestIdHeader: false,
    bodyLimit: config.server.bodyLimitBytes,
    // Keys travel as a path segment (/v1/{network}/{apiKey}); longer ones are refused as keys, not as URLs.
    routerOptions: { maxParamLength: 512 },
    trustProxy: config.server.trustedProxies.length ? [...config.server.trustedProxies] : false,
    // A graceful stop closes idle keep-alive sockets and lets requests in flight finish.
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as FastifyInstance;

  let listeningPort: number | undefined;
  app.addHook('onListen', async () => {
    const addr = app.server.address();
    if (addr && typeof addr === 'object') listeningPort = addr.port;
  });
  const registry = new NetworkRegistry(config, () => publicUrl(config, listeningPort));
  const db = deps.storage.db;
  const accounts = new AccountService(db);
  const tokens = new TokenService(db, {
    secret: deps.secrets.jwtSecret,
    issuer: config.auth.issuer,
    accessTtlSeconds: config.auth.accessTokenTtlSeconds,
    refreshTtlSeconds: config.auth.refreshTokenTtlSeconds,
  });
  const keys = new KeyService({ db, config, registry, encryptionSecret: deps.secrets.keyEncryptionSecret });
  const metrics = new Metrics();
  const keyCache = new KeyCache(keys, config, { ttlMs: config.rpc.keyCacheTtlMs });
  const pools = new UpstreamPools(config, logger);
  if (deps.probeUpstreams) pools.startAll();
  const policy = new MethodPolicy({ config, wsHint: 'the WebSocket address /ws/{network}?apiKey=...' });
  const bus = deps.redis ? await KeyChangeBus.start(deps.redis, keys, keyCache, logger) : undefined;
  const limiter: Limiter = deps.redis ? new RedisLimiter(deps.redis) : new MemoryLimiter();
  const meter = new Meter(config, limiter);
  const usage = new UsageService({ db, config, logger });
  keys.usage = usage;
  await meter.seedFromUsage(usage);
  usage.start();
  const proxy = new RpcProxy({ config, keys: keyCache, policy, pools, logger, meter, usage });
  app.addHook('onClose', async () => {
    await bus?.close();
    keyCache.close();
    await pools.close();
    await limiter.close();
    // Nothing accepted is lost on a graceful stop: the last counts reach storage (C27).
    await usage.close();
  });
  const services: Services = { config, registry, accounts, tokens, keys, metrics, keyCache, pools, usage };
  app.decorate('services', services);

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
  healthRoutes(app, checks, () => pools.report());
  await app.register(rpcRoutes, { config, registry, proxy });
  installWebSocket(app, { config, registry, proxy, keys: keyCache, meter, pools, logger });
  const faucet = new FaucetService({ db, config, registry, pools, logger });
  await faucet.start();
  app.addHook('onClose', () => faucet.close());

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
        requireBearer(protectedScope, tokens);
        protectedScope.addHook('preHandler', (req, reply) => restLimits.request(req, reply, req.userId));
        await protectedScope.register(keyRoutes, { keys, accounts, config });
        await protectedScope.register(usageRoutes, { usage });
        await protectedScope.register(faucetRoutes, { faucet });
      });
    },
    { prefix: API_PREFIX },
  );

  return app;
}
