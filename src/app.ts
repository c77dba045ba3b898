// Composition root of the gateway: builds the Fastify app and wires every feature with the
// parts it needs, opening nothing until started (main.ts and the tests start it).
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { createServer } from 'node:http';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { adminRoutes } from './admin/routes.ts';
import { accountRoutes } from './auth/account-routes.ts';
import { AccountService } from './auth/accounts.ts';
import { configureHashSlots } from './auth/passwords.ts';
import { requireBearer, signedInAccount } from './auth/bearer.ts';
import { planRoutes } from './auth/plan-routes.ts';
import { authRoutes } from './auth/routes.ts';
import { TokenService } from './auth/tokens.ts';
import { Networks } from './chains/networks.ts';
import { networkRoutes } from './chains/routes.ts';
import { publicUrl, publicUrlIsHttps } from './config/load.ts';
import type { Config } from './config/schema.ts';
import type { Secrets } from './config/secrets.ts';
import { clientErrorHandler, frameworkErrors, installJsonParser, installRestErrors } from './errors/handler.ts';
import { contentSecurityPolicy, SWAGGER_UI_STYLE_HASHES } from './http/csp.ts';
import { dashboardRoutes } from './http/dashboard.ts';
import { refuseMissingHost } from './http/host-header.ts';
import { applyServerTimeouts } from './http/server-timeouts.ts';
import { ConnectionDrain, STOPPING_RETRY_AFTER_S } from './http/drain.ts';
import { boundFastifyAnswers, Outbound } from './http/outbound.ts';
import { HttpError } from './errors/http.ts';
import { installValidators } from './http/validation.ts';
import { openapiOptions } from './http/openapi.ts';
import { KeyChangeBus } from './keys/bus.ts';
import { KeyCache } from './keys/cache.ts';
import { keyRoutes } from './keys/routes.ts';
import { KeyService } from './keys/service.ts';
import { healthRoutes, type ReadinessCheck } from './ops/health.ts';
import { createLogger, genReqId } from './ops/logging.ts';
import { startTracing, traceRest, tracingEnabled } from './ops/tracing.ts';
import { instrument, Metrics, RpcHttpMetrics } from './ops/metrics.ts';
import { observeRpc, rpcMethodLabels } from './ops/rpc-metrics.ts';
import { observeFeatures } from './ops/feature-metrics.ts';
import { ResponseCache } from './rpc/dispatch/cache.ts';
import { rpcFastPath } from './rpc/http/fast-path.ts';
import { RpcPipeline } from './rpc/pipeline.ts';
import { MethodPolicy } from './rpc/policy.ts';
import { installWebSocket, type WsGateway } from './rpc/ws/server.ts';
import { UPSTREAM_BUCKETS } from './upstreams/http/pool.ts';
import { Upstreams } from './upstreams/upstreams.ts';
import { faucetRoutes } from './faucet/routes.ts';
import { intentRoutes } from './intents/routes.ts';
import { IntentService } from './intents/service.ts';
import { Solver } from './intents/solver.ts';
import { FaucetService } from './faucet/service.ts';
import { balanceRoutes } from './balance/routes.ts';
import { BalanceService } from './balance/service.ts';
import type { Storage } from './storage/db.ts';
import { RedisLink, type RedisClient } from './storage/redis.ts';
import { type Limiter, MemoryLimiter } from './metering/limiter.ts';
import { Meter } from './metering/meter.ts';
import { effectiveLimits } from './metering/plans.ts';
import { RestLimits } from './metering/rest-limits.ts';
import { type Fallback, RedisLimiter } from './metering/redis-limiter.ts';
import { UsageRetention } from './usage/retention.ts';
import { usageRoutes } from './usage/routes.ts';
import { AnalyticsRecorder } from './analytics/recorder.ts';
import { analyticsRoutes } from './analytics/routes.ts';
import { AnalyticsStore } from './analytics/store.ts';
import { AnswerCache } from './analytics/answer-cache.ts';
import { BlockFollower } from './events/follower.ts';
import { Prices } from './prices/prices.ts';
import { whaleRoutes } from './whales/routes.ts';
import { WhaleAlerts } from './whales/service.ts';
import { webhookRoutes } from './webhooks/routes.ts';
import { Webhooks } from './webhooks/service.ts';
import { AddressActivity } from './webhooks/address-activity.ts';
import { UsageQueries } from './usage/queries.ts';
import { type UsageHandoff, UsageService } from './usage/service.ts';

export interface AppDeps {
  storage: Storage;
  secrets: Secrets;
  /** Probe every network's upstreams from the start (the server); tests probe a network on first use. */
  probeUpstreams?: boolean;
  /** Shared state across instances (REDIS_URL): limits and key-change events. */
  redis?: RedisClient;
  /**
   * Limits kept elsewhere than in this process without Redis: a worker of several (C56) uses the
   * primary's (metering/shared-limiter.ts). Default: Redis when given, else in this process.
   */
  limiter?: Limiter;
  /** With Redis, where limits are kept while it is away (C48): a worker's is the primary's; default this process' memory. */
  limitsFallback?: Fallback;
  /** A worker of several (C56): usage is handed to the primary, which writes it (usage/handoff.ts). */
  usageHandoff?: UsageHandoff;
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
  networks: Networks;
  accounts: AccountService;
  tokens: TokenService;
  keys: KeyService;
  metrics: Metrics;
  keyCache: KeyCache;
  upstreams: Upstreams;
  usage: UsageService;
  /** The reads of stored usage (stats, the key list's counts, the quotas' seed). */
  usageQueries: UsageQueries;
  ws: WsGateway;
  /** The JSON-RPC pipeline every transport hands its messages to. */
  pipeline: RpcPipeline;
  /** C57: the HTTP connections' drain on a stop. */
  drain: ConnectionDrain;
  /** C60: unsent answers of every client. */
  outbound: Outbound;
  /** C46, C27: the kept answers of /usage/analytics and /usage/stats, as their bodies. */
  answers: { analytics: AnswerCache<string>; stats: AnswerCache<string> };
  /** C46: the reads of stored analytics. */
  analyticsStore: AnalyticsStore;
  follower: BlockFollower;
  prices: Prices;
  whales: WhaleAlerts;
  webhooks: Webhooks;
  intents: IntentService;
  solver: Solver;
}

declare module 'fastify' {
  interface FastifyInstance {
    parts: AppParts;
  }
}

export const API_PREFIX = '/api/v1';

/**
 * A part with background work (a subscription, a sweep, probes, a flush timer). Constructors start
 * none of it: the parts start in order once the app is ready and close in reverse order when it
 * closes, after the server has stopped accepting requests.
 */
interface LifecyclePart {
  name: string;
  start?: () => unknown;
  close?: () => unknown;
}

/**
 * The app's one start (`onReady`) and one stop (`onClose`). A part that fails to close is logged
 * and the others still close (the last usage counts are written whatever came before them).
 */
function installLifecycle(app: FastifyInstance, parts: readonly LifecyclePart[]): void {
  app.addHook('onReady', async () => {
    for (const part of parts) await part.start?.();
  });
  app.addHook('onClose', async () => {
    let failed: Error | undefined;
    for (const part of [...parts].reverse()) {
      try {
        await part.close?.();
      } catch (err) {
        app.log.error({ err, part: part.name }, 'a part failed to close');
        // The first failure is what `close()` rejects with, as before the parts were closed together.
        failed ??= err as Error;
      }
    }
    if (failed) throw failed;
  });
}

/**
 * Builds the whole service as a Fastify instance that is not listening yet (main.ts listens).
 * Everything it needs comes in: config, storage, secrets. Building opens no connection and starts
 * no timer: the background work (the key-change subscription, health probes, sweeps, pings, usage
 * flushing, the faucet's re-broadcast, the block follower) starts once the app is ready and stops
 * when it closes (`installLifecycle`). Parts are handed what they need when they are made.
 * The JSON-RPC addresses are served by a fast path on the same server, ahead of Fastify.
 */
export async function buildApp(config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const logger = deps.logger ?? createLogger(config.logLevel, deps.logStream, config.logFormat, tracingEnabled(config));
  // C58: undefined unless an OTLP endpoint is set (the SDK is loaded only then).
  const tracing = await startTracing(config, logger);
  let listeningPort: number | undefined;
  const networks = new Networks(config, () => publicUrl(config, listeningPort));
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
  const metrics = new Metrics();
  // C60: answers in memory bounded in time and bytes, those unsent to clients and those being read from nodes.
  const outbound = new Outbound({ writeTimeoutMs: config.server.writeTimeoutMs, maxPendingBytes: config.server.maxPendingBytes, logger });
  const upstreams = new Upstreams(config, logger, tracing?.attempts, outbound);
  // Chain events (C33-C39): one follower hands blocks to whale alerts, webhooks and the solver; prices
  // value them. Made first: the features that change what it follows tell it so (webhooks, intents).
  const follower = new BlockFollower({ db, settings: config, upstreams, logger });
  const prices = new Prices({ settings: config, upstreams, logger });
  // A new or changed address.activity endpoint is followed at once, not at the next asking.
  const webhooks = new Webhooks({ db, settings: config, logger, encryptionSecret: deps.secrets.keyEncryptionSecret, onEndpointsChange: () => void follower.refresh() });
  // C46: recorded with usage and flushed in its transaction; `analytics.enabled: false` records nothing.
  const analytics = config.analytics.enabled ? new AnalyticsRecorder(rpcMethodLabels(config.methods)) : undefined;
  // C38 usage.quota: checked after usage counts are stored, never on the RPC path.
  // C46, C27: answers of /usage/analytics and /usage/stats kept one flush interval, dropped by each flush of their account.
  const answers = { analytics: new AnswerCache<string>({ ttlMs: config.usage.flushIntervalMs }), stats: new AnswerCache<string>({ ttlMs: config.usage.flushIntervalMs }) };
  const usage = new UsageService({
    db,
    settings: config.usage,
    logger,
    analytics,
    onFlush: (userIds) => webhooks.quota.afterFlush(userIds),
    onStored: (userIds) => {
      answers.analytics.invalidate(userIds);
      answers.stats.invalidate(userIds);
    },
    handoff: deps.usageHandoff,
  });
  const usageQueries = new UsageQueries({ db, networkSlugs: config.networks.map((n) => n.slug) });
  const keys = new KeyService({ db, settings: config, networks, encryptionSecret: deps.secrets.keyEncryptionSecret, usage: usageQueries });
  const keyCache = new KeyCache(keys, config.plans, { ttlMs: config.rpc.keyCacheTtlMs, maxEntries: config.rpc.keyCacheMaxEntries });
  // C20: a tier or limits change, made here or heard from another instance, drops the account's kept row (REST plan checks).
  keys.changes.on((change) => {
    if (change.type === 'account') accounts.forget(change.userId);
  });
  const policy = new MethodPolicy({ methods: config.methods, wsHint: 'the WebSocket address /ws/{network}?apiKey=...' });
  // C48: whether Redis answers, as the limiter, the key-change bus and the readiness check find out.
  const link = deps.redis ? new RedisLink(deps.redis, { log: logger }) : undefined;
  const bus = deps.redis ? new KeyChangeBus(deps.redis, keys, keyCache, logger, link) : undefined;
  const redisLimiter = deps.redis ? new RedisLimiter(deps.redis, { ...(link ? { link } : {}), ...(deps.limitsFallback ? { fallback: deps.limitsFallback } : {}) }) : undefined;
  const limiter: Limiter = redisLimiter ?? deps.limiter ?? new MemoryLimiter();
  const meter = new Meter(config.limits, limiter);
  // C48: the quotas of accounts this instance has not seen yet start in memory from stored usage too.
  link?.onChange((up) => {
    if (!up) meter.seedFromUsage(usageQueries).catch((err: unknown) => logger.warn({ error: (err as Error).message }, 'could not read stored usage for the in-memory quotas'));
  });
  const cache = config.cache.enabled ? new ResponseCache(config.cache) : undefined;
  const rpcMetrics = observeRpc(metrics, { methods: config.methods, upstreams, upstreamBuckets: UPSTREAM_BUCKETS, cache });
  const analyticsStore = new AnalyticsStore({ db, logger });
  const usageRetention = new UsageRetention({ db, logger, retentionDays: config.usage.retentionDays });
  const pipeline = new RpcPipeline({ settings: config, keys: keyCache, policy, upstreams, logger, meter, usage, metrics: rpcMetrics, ...(cache ? { cache } : {}), ...(analytics ? { analytics } : {}), ...(tracing ? { tracing } : {}) });
  // C57: a stop that lets connections drain.
  const drain = new ConnectionDrain(logger);
  const rpcHttp = rpcFastPath({ settings: config, networks, pipeline, logger, metrics: new RpcHttpMetrics(metrics.registry), outbound, stopping: () => drain.stopping, ...(tracing ? { tracing } : {}) });

  const app = Fastify({
    // The server asks the fast path first for every request. A request without Host is let
    // through to be refused in the envelope of its address (src/http/host-header.ts).
    serverFactory: (handler) =>
      createServer({ requireHostHeader: false }, (req, res) => {
        if (!rpcHttp(req, res)) handler(req, res);
      }),
    clientErrorHandler,
    frameworkErrors,
    loggerInstance: logger,
    genReqId,
    requestIdHeader: false,
    // A line per REST or static-file request is written at debug (below), not at info: a console
    // at info stays quiet while the dashboard is used. Errors are still logged at their level.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.server.bodyLimitBytes,
    // Keys travel as a path segment (/v1/{network}/{apiKey}); longer ones are refused as keys, not as URLs.
    routerOptions: { maxParamLength: 512 },
    trustProxy: config.server.trustedProxies.length ? [...config.server.trustedProxies] : false,
    // A graceful stop closes idle keep-alive sockets and lets requests in flight finish.
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as FastifyInstance;
  applyServerTimeouts(app.server, config.server);
  drain.attach(app.server);
  app.addHook('onListen', async () => {
    const addr = app.server.address();
    if (addr && typeof addr === 'object') listeningPort = addr.port;
  });

  // C58: a span per REST request, the hooks below and the handler under it.
  if (tracing) traceRest(app, tracing, API_PREFIX);
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    req.log.debug({ req }, 'incoming request');
    // C57: a request that arrives during a stop is turned away; the connection closes after the answer.
    if (drain.stopping) {
      throw new HttpError('SERVICE_UNAVAILABLE', 'The gateway is shutting down; retry shortly', { headers: { 'retry-after': String(STOPPING_RETRY_AFTER_S), connection: 'close' } });
    }
  });
  app.addHook('onSend', async (_req, reply) => {
    // C57: an answer finished during a stop closes its connection.
    if (drain.stopping) reply.header('connection', 'close');
  });
  // C60: Fastify's answers (REST, dashboard, /docs, /metrics, /health) under the RPC's write timeout and room.
  boundFastifyAnswers(app, outbound);
  app.addHook('onResponse', async (req, reply) => {
    req.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  });
  refuseMissingHost(app);
  installValidators(app);
  installJsonParser(app);
  installRestErrors(app);
  instrument(app, metrics, { token: config.metrics.token, port: config.metrics.port, host: config.server.host }, outbound);

  // The document also describes the JSON-RPC and WebSocket addresses served outside Fastify's routes.
  await app.register(swagger, openapiOptions());
  // C3: the docs page under the dashboard's policy (no WebSocket), its one inline style admitted by hash.
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: contentSecurityPolicy({ styleHashes: SWAGGER_UI_STYLE_HASHES }) });

  const checks: ReadinessCheck[] = [{ name: 'storage', check: () => deps.storage.ping() }];
  if (link) {
    // C48: Redis away leaves the instance ready (it serves, limits in memory) and says so.
    checks.push({
      name: 'redis',
      check: async () => {
        if (link.up) {
          try {
            await link.ping();
            return;
          } catch (err) {
            link.failed(err);
          }
        }
        return { degraded: `${link.report().error ?? 'no answer'}; limits enforced by this instance in memory` };
      },
    });
  }
  healthRoutes(app, checks, () => upstreams.report(), config.health.readyWhen);
  // The server hands RPC requests to the fast path before Fastify sees them; requests that
  // reach Fastify another way (app.inject in tests) take the same path from here.
  const viaFastPath = async (req: FastifyRequest, reply: FastifyReply) => {
    if (rpcHttp(req.raw, reply.raw)) reply.hijack();
  };
  for (const url of ['/rpc/*', '/v1/*', '/public/*']) {
    app.route({ method: ['POST', 'OPTIONS'], url, schema: { hide: true }, onRequest: viaFastPath, handler: async (_req, reply) => reply.callNotFound() });
  }
  const ws = installWebSocket(app, {
    settings: config,
    networks,
    pipeline,
    keys: keyCache,
    meter,
    upstreams,
    logger,
    outbound,
    ...(tracing ? { tracing } : {}),
    onKeyChange: (listener) => keys.changes.on(listener),
    metricsRegistry: metrics.registry,
  });
  const faucet = new FaucetService({ db, settings: config, networks, upstreams, logger });
  const whales = new WhaleAlerts({ db, settings: config, prices, webhooks, logger, upstreams });
  observeFeatures(metrics, { link, redisLimiter, follower, usage, webhooks, outbound });
  follower.register(whales);
  follower.register(new AddressActivity({ webhooks, prices, upstreams, networks: config.networks, logger }));
  // C41: intents; their solver follows the blocks of their networks (a new intent's at once).
  const intents = new IntentService({ db, settings: config, upstreams, logger, onCreated: () => void follower.refresh() });
  const solver = new Solver({ db, settings: config, intents, upstreams, webhooks, logger });
  follower.register(solver);
  // C40: the unified balance reads through the same pools and values with the same prices.
  const balances = new BalanceService({ networks, upstreams, prices, logger });
  app.decorate('parts', { config, networks, accounts, tokens, keys, metrics, keyCache, upstreams, usage, usageQueries, ws, pipeline, drain, outbound, answers, analyticsStore, follower, prices, whales, webhooks, intents, solver } satisfies AppParts);

  // Started in this order once the app is ready, closed in the reverse order when it closes.
  installLifecycle(app, [
    // C58: closed last, so the spans of the other parts' last work are exported too.
    ...(tracing ? [{ name: 'tracing', close: () => tracing.shutdown() }] : []),
    // C20: other instances' key changes are honoured from the first request on.
    ...(bus ? [{ name: 'key-change bus', start: () => bus.start(), close: () => bus.close() }] : []),
    { name: 'key cache', close: () => keyCache.close() },
    { name: 'limiter', start: () => limiter.start(), close: () => limiter.close() },
    ...(link ? [{ name: 'redis link', close: () => link.close() }] : []),
    { name: 'upstreams', start: () => deps.probeUpstreams && upstreams.startAll(), close: () => upstreams.close() },
    {
      name: 'usage',
      start: async () => {
        await meter.seedFromUsage(usageQueries);
        usage.start();
      },
      // Nothing accepted is lost on a graceful stop: the last counts reach storage (C27), analytics with them (C46).
      close: () => usage.close(),
    },
    { name: 'analytics', start: () => analyticsStore.start(), close: () => analyticsStore.close() },
    { name: 'usage retention', start: () => usageRetention.start(), close: () => usageRetention.close() },
    // Closed already before the server waits for its connections (installWebSocket's preClose); a no-op here.
    { name: 'websocket', start: () => ws.start(), close: () => ws.close() },
    { name: 'unsent answers', close: () => outbound.close() },
    { name: 'faucet', start: () => faucet.start(), close: () => faucet.close() },
    { name: 'prices', close: () => prices.close() },
    { name: 'webhooks', start: () => webhooks.start(), close: () => webhooks.close() },
    { name: 'whale alerts', start: () => whales.start(), close: () => whales.close() },
    { name: 'block follower', start: () => follower.start(), close: () => follower.close() },
    { name: 'solver', start: () => solver.start(), close: () => solver.close() },
  ]);

  // C13: a REST answer's X-CU-Remaining is the signed-in account's, as its RPC answers say it.
  const restLimits = new RestLimits(config.limits, limiter, async (req) => {
    const user = await signedInAccount(accounts, req);
    return user ? meter.computeUnitsLeft(req.userId, effectiveLimits(config.plans, user).monthlyComputeUnits) : -1;
  });
  await app.register(
    async (api) => {
      // C17: signed-out REST traffic is limited per client IP...
      await api.register(async (open) => {
        open.addHook('onRequest', (req, reply) => restLimits.request(req, reply));
        await open.register(authRoutes, { accounts, tokens, limits: restLimits, publicHttps: publicUrlIsHttps(config) });
        await open.register(networkRoutes, { networks });
        await open.register(planRoutes, { plans: config.plans });
        if (config.admin.token) await open.register(adminRoutes, { token: config.admin.token, accounts, keys, plans: config.plans });
      });
      // ...and signed-in traffic per account.
      await api.register(async (protectedScope) => {
        requireBearer(protectedScope, tokens, restLimits);
        protectedScope.addHook('onRequest', (req, reply) => restLimits.request(req, reply, req.userId));
        await protectedScope.register(accountRoutes, { accounts, tokens, limits: restLimits, meter, plans: config.plans, publicHttps: publicUrlIsHttps(config) });
        await protectedScope.register(keyRoutes, { keys, accounts, networks });
        await protectedScope.register(usageRoutes, { usage: usageQueries, answers: answers.stats });
        await protectedScope.register(analyticsRoutes, { store: analyticsStore, answers: answers.analytics, accounts, networks: new Set(config.networks.map((n) => n.slug)) });
        await protectedScope.register(faucetRoutes, { faucet });
        await protectedScope.register(whaleRoutes, { whales, accounts });
        await protectedScope.register(webhookRoutes, { webhooks, accounts, maxEndpoints: config.webhooks.maxEndpoints });
        await protectedScope.register(balanceRoutes, { balances });
        await protectedScope.register(intentRoutes, { intents });
      });
    },
    { prefix: API_PREFIX },
  );
  // C43: the dashboard at `/`, from web/dist/ (built by npm install / npm start).
  dashboardRoutes(app);

  return app;
}
