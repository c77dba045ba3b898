import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig, validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { type Devnet, DEVNET_BLOCK_TIME_MS, startDevnet } from '../../src/devnet/devnet.ts';
import { applyDevnetPrices } from '../../src/devnet/prices.ts';
import { withDevnetFaucetKeys } from '../../src/faucet/wallets.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { openRedis, openRedisCluster } from '../../src/storage/redis.ts';
import { pgliteTemplate } from './pglite-template.ts';
import { REDIS_URL } from './services.ts';
import { createTestDatabase } from './storage.ts';

// Storage alone, for tests of a module over real storage without the app.
export { createTestDatabase, openTestStorage } from './storage.ts';

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  storage: Storage;
  /** Base URL when started with `listen: true` (127.0.0.1, a free port). */
  url: string;
  /** The local chains when started with `devnet: true`. */
  devnet: Devnet | undefined;
  /** Every log line the app wrote, as text. */
  logs: string[];
  close(): Promise<void>;
}

export interface TestAppOptions {
  backend?: 'pglite' | 'postgres';
  /** An existing PostgreSQL URL to reuse (restart tests); else a fresh database is made. */
  databaseUrl?: string;
  /** A PGlite directory to reuse (restart tests); default in memory. */
  dataDir?: string;
  env?: Record<string, string>;
  overrides?: Record<string, unknown>;
  secrets?: { jwtSecret: string; keyEncryptionSecret: string };
  /** Start anvil chains (only `devnetNetworks`, default all 16) and point the upstreams at them. */
  devnet?: boolean;
  devnetNetworks?: string[];
  /** C45: seconds between dev account 9's whale transfers on the native chains; off unless given (tests stay deterministic). */
  devnetWhaleEverySeconds?: number;
  /** Listen on 127.0.0.1 with a free port (for real clients). */
  listen?: boolean;
  /** Share state through the local Redis (TEST_REDIS_URL), as REDIS_URL does. */
  redis?: boolean;
  /** Share state through this Redis instead (a test's own redis-server). */
  redisUrl?: string;
  /** Share state through this Redis Cluster instead (a test's own, see redis-cluster.ts). */
  redisClusterNodes?: string[];
}

const GENEROUS_REST_LIMITS = { restPerMinute: 100_000, failedLoginsPerMinute: 1_000, failedAuthPerMinute: 100_000, registrationsPerHour: 100_000 };

/** log2 of scrypt's N for passwords hashed by test apps (`auth.passwordHashCost`; production: 15). */
export const TEST_PASSWORD_HASH_COST = 10;

export const TEST_SECRETS = {
  jwtSecret: 'test-jwt-secret-0123456789abcdef0123456789',
  keyEncryptionSecret: 'test-key-secret-0123456789abcdef0123456789',
};

/** The app on the given storage backend, not listening (use `app.inject`), logs captured. */
export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  let dropDb: (() => Promise<void>) | undefined;
  let databaseUrl = opts.databaseUrl;
  if (opts.backend === 'postgres' && !databaseUrl) {
    const db = await createTestDatabase();
    databaseUrl = db.url;
    dropDb = () => db.drop();
  }
  // Tests make many accounts from one address: generous REST limits unless a test sets its own.
  // Cheap password hashes (2^10 instead of 2^15) unless a test sets its own: hashing is not what most tests test.
  // No answer sampling (C55) unless a test sets a rate: a check is another call at a node, at random,
  // and many tests count the calls their nodes receive.
  const rpc = opts.overrides?.rpc as { sampling?: object } | undefined;
  const overrides = {
    ...opts.overrides,
    auth: { passwordHashCost: TEST_PASSWORD_HASH_COST, ...(opts.overrides?.auth as object | undefined) },
    limits: { ...GENEROUS_REST_LIMITS, ...(opts.overrides?.limits as object | undefined) },
    rpc: { ...rpc, sampling: { rate: 0, ...rpc?.sampling } },
  };
  let config = loadConfig({ env: { LOG_LEVEL: 'info', ...opts.env }, overrides });
  let devnet: Devnet | undefined;
  if (opts.devnet) {
    const wanted = new Set(opts.devnetNetworks ?? config.networks.map((n) => n.slug));
    // As `--devnet` does (C31): a faucet key for each devnet testnet without one, funded on its chain.
    const faucet = withDevnetFaucetKeys(config, wanted);
    config = faucet.config;
    devnet = await startDevnet({
      networks: config.networks.filter((n) => wanted.has(n.slug)).map((n) => ({ slug: n.slug, chainId: n.chainId, native: n.native === true })),
      nativeBlockTimeSeconds: config.devnet.nativeBlockTimeSeconds,
      fund: faucet.fund,
      nativeUsdPrice: config.devnet.nativeUsdPrice, // C45: the feed on each native chain
      whaleEverySeconds: opts.devnetWhaleEverySeconds ?? 0,
    });
    const copy = structuredClone<Config>(config);
    applyDevnetPrices(copy, devnet.priceFeeds);
    for (const n of copy.networks) if (devnet.upstreams[n.slug]) n.explorerUrl = null; // as --devnet: no explorer
    for (const n of copy.networks) {
      const u = devnet.upstreams[n.slug];
      // Upstreams given in env (UPSTREAM_<SLUG>) come first, the devnet chain after them.
      if (u) n.upstreams = [...(opts.env?.[`UPSTREAM_${n.slug.toUpperCase().replaceAll('-', '_')}`] ? n.upstreams : []), { http: u.http, ws: u.ws }];
      if (u) n.blockTimeMs = DEVNET_BLOCK_TIME_MS; // as --devnet: anvil's pace, not the real chain's
    }
    config = validateConfig(copy);
  }
  // In memory: a copy of the migrated template instead of a new database (initdb takes seconds),
  // on this thread: a worker thread per app adds ~0.3 s to each of hundreds of apps. The
  // gateway's own start and data folders on disk use the worker (docs/scaling.md); TEST_EMBEDDED_THREAD=worker
  // runs every in-memory app on one too (docs/development.md).
  const inMemory = !databaseUrl && !opts.dataDir;
  const storage = await openStorage({
    databaseUrl: databaseUrl ?? null,
    queryTimeoutMs: config.storage.queryTimeoutMs,
    dataDir: opts.dataDir ?? 'memory',
    ...(inMemory ? { pgliteImage: await pgliteTemplate(), embeddedThread: process.env.TEST_EMBEDDED_THREAD === 'worker' ? 'worker' : 'main' } : {}),
  });
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const redisUrl = opts.redisUrl ?? (opts.redis ? REDIS_URL : undefined);
  const redis = opts.redisClusterNodes
    ? await openRedisCluster(opts.redisClusterNodes, { commandTimeoutMs: config.redis.commandTimeoutMs })
    : redisUrl
      ? await openRedis(redisUrl, { commandTimeoutMs: config.redis.commandTimeoutMs })
      : undefined;
  const app = await buildApp(config, { storage, secrets: opts.secrets ?? TEST_SECRETS, logStream, ...(redis ? { redis } : {}) });
  await app.ready();
  const url = opts.listen ? await app.listen({ host: '127.0.0.1', port: 0 }) : '';
  return {
    app,
    config,
    storage,
    url,
    devnet,
    logs,
    close: async () => {
      await app.close();
      await storage.close();
      redis?.disconnect();
      await devnet?.stop();
      await dropDb?.();
    },
  };
}

let counter = 0;
/** A unique e-mail per call. */
export const uniqueEmail = (tag = 'user') => `${tag}.${Date.now().toString(36)}.${counter++}@example.com`;

/** Registers an account and returns its tokens and a ready Authorization header. */
export async function registerUser(
  app: FastifyInstance,
  body: { email?: string; password?: string; name?: string } = {},
): Promise<{ id: string; email: string; password: string; accessToken: string; refreshToken: string; auth: { authorization: string } }> {
  const email = body.email ?? uniqueEmail();
  const password = body.password ?? 'correct horse battery';
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/auth/register',
    payload: { email, password, name: body.name ?? 'Test User' },
  });
  if (res.statusCode !== 200) throw new Error(`register failed: ${res.statusCode} ${res.body}`);
  const { user, tokens } = res.json().data;
  return { id: user.id, email, password, ...tokens, auth: { authorization: `Bearer ${tokens.accessToken}` } };
}

/** Registers an account and creates one API key; returns the key value and the account. */
export async function createKey(
  app: FastifyInstance,
  payload: { name?: string; networks?: string[]; rateLimit?: number; expiresAt?: string } = {},
  user?: Awaited<ReturnType<typeof registerUser>>,
): Promise<{ key: string; id: string; user: Awaited<ReturnType<typeof registerUser>> }> {
  const u = user ?? (await registerUser(app));
  const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: u.auth, payload: { name: 'test key', ...payload } });
  if (res.statusCode !== 200) throw new Error(`key creation failed: ${res.statusCode} ${res.body}`);
  return { key: res.json().data.key, id: res.json().data.id, user: u };
}

/** Makes an account pro (all networks, 1000/min) through the admin route; needs ADMIN_TOKEN in env. */
export async function setTier(app: FastifyInstance, userId: string, tier: string, adminToken: string): Promise<void> {
  const res = await app.inject({
    method: 'PATCH',
    url: `/api/v1/admin/users/${userId}`,
    headers: { 'x-admin-token': adminToken },
    payload: { tier },
  });
  if (res.statusCode !== 200) throw new Error(`tier change failed: ${res.statusCode} ${res.body}`);
}
