import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { ConfigError, loadConfig, validateConfig } from './config/load.ts';
import type { Config } from './config/schema.ts';
import { resolveSecrets } from './config/secrets.ts';
import { type Devnet, startDevnet } from './devnet/devnet.ts';
import { withDevnetFaucetKeys } from './faucet/wallets.ts';
import { createLogger } from './ops/logging.ts';
import { openStorage, type Storage } from './storage/db.ts';
import { openRedis } from './storage/redis.ts';
import type { Redis } from 'ioredis';

/** The config with every network's upstream pointed at its local devnet chain (C31). */
function onDevnet(cfg: Config, devnet: Devnet): Config {
  const copy = structuredClone(cfg) as Config;
  for (const n of copy.networks) {
    const u = devnet.upstreams[n.slug];
    if (u) n.upstreams = [{ http: u.http, ws: u.ws }];
  }
  return validateConfig(copy);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { config: { type: 'string' }, devnet: { type: 'boolean', default: false } },
    allowPositionals: false,
  });
  let config = loadConfig({ configFile: values.config, devnet: values.devnet });
  const log = createLogger(config.logLevel);

  let devnet: Devnet | undefined;
  let storage: Storage | undefined;
  let redis: Redis | undefined;
  let app: FastifyInstance | undefined;
  let stopping = false;

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    const force = setTimeout(() => {
      log.error('graceful stop took too long; exiting');
      process.exit(1);
    }, config.server.shutdownGraceMs);
    force.unref();
    try {
      await app?.close(); // stops accepting, finishes in-flight requests, runs onClose hooks
      await storage?.close();
      redis?.disconnect();
      await devnet?.stop();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error while stopping');
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  try {
    if (config.devnet.enabled) {
      const started = Date.now();
      // C31: testnets without a faucet key get one for this run; the chains fund every faucet wallet.
      const faucet = withDevnetFaucetKeys(config);
      config = faucet.config;
      devnet = await startDevnet({
        networks: config.networks.map((n) => ({ slug: n.slug, chainId: n.chainId, native: n.native === true })),
        nativeBlockTimeSeconds: config.devnet.nativeBlockTimeSeconds,
        fund: faucet.fund,
        logger: log,
      });
      config = onDevnet(config, devnet);
      log.info({ networks: config.networks.length, ms: Date.now() - started }, 'devnet chains are up');
    }
    const secrets = resolveSecrets(config);
    storage = await openStorage({ databaseUrl: config.storage.databaseUrl, dataDir: config.storage.dataDir });
    log.info({ storage: storage.kind }, 'storage ready, migrations applied');
    if (config.redis.url) redis = await openRedis(config.redis.url);
    app = await buildApp(config, { storage, secrets, logger: log, probeUpstreams: true, ...(redis ? { redis } : {}) });
    const address = await app.listen({ port: config.server.port, host: config.server.host });
    log.info({ address, devnet: config.devnet.enabled }, 'Junction is listening');
  } catch (err) {
    if (err instanceof ConfigError) console.error(`Configuration error: ${err.message}`);
    else log.error({ err }, 'start failed');
    await app?.close().catch(() => {});
    await storage?.close().catch(() => {});
    redis?.disconnect();
    await devnet?.stop().catch(() => {});
    process.exit(1);
  }
}

await main().catch((err) => {
  if (err instanceof ConfigError) console.error(`Configuration error: ${err.message}`);
  else console.error(err);
  process.exit(1);
});
