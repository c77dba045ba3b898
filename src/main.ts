import type http from 'node:http';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { ConfigError, loadConfig, validateConfig } from './config/load.ts';
import type { Config } from './config/schema.ts';
import { resolveSecrets } from './config/secrets.ts';
import { type Devnet, startDevnet } from './devnet/devnet.ts';
import { withDevnetFaucetKeys } from './faucet/wallets.ts';
import { createLogger } from './ops/logging.ts';
import type { Logger } from 'pino';
import { openStorage, type Storage } from './storage/db.ts';
import { openRedis } from './storage/redis.ts';
import type { Redis } from 'ioredis';

/** The config with every network's upstream pointed at its local devnet chain (C31). */
function onDevnet(cfg: Config, devnet: Devnet): Config {
  const copy = structuredClone<Config>(cfg);
  for (const n of copy.networks) {
    const u = devnet.upstreams[n.slug];
    if (u) n.upstreams = [{ http: u.http, ws: u.ws }];
  }
  return validateConfig(copy);
}

/**
 * Lets the requests in flight finish, then closes their connections. `server.close()` closes only
 * the connections idle at that moment: one whose request ends later would stay open for the whole
 * keep-alive timeout, holding the stop (and the last usage flush, which comes after the server has
 * closed) past its grace. So idle connections are closed as they appear, and after `drainMs` the
 * ones still busy are closed too. Returns the function that ends the sweep.
 */
function drainConnections(server: http.Server, drainMs: number, log: Logger): () => void {
  const sweep = setInterval(() => server.closeIdleConnections(), 100);
  const cut = setTimeout(() => {
    log.warn({ drainMs }, 'requests still running after the drain; closing their connections');
    server.closeAllConnections();
  }, drainMs);
  return () => {
    clearInterval(sweep);
    clearTimeout(cut);
  };
}

/** The local chains of `--devnet` (C31) and the config pointed at them. */
async function startChains(cfg: Config, log: Logger): Promise<{ config: Config; devnet: Devnet }> {
  const started = Date.now();
  // C31: testnets without a faucet key get one for this run; the chains fund every faucet wallet.
  const faucet = withDevnetFaucetKeys(cfg);
  const devnet = await startDevnet({
    networks: faucet.config.networks.map((n) => ({ slug: n.slug, chainId: n.chainId, native: n.native === true })),
    nativeBlockTimeSeconds: faucet.config.devnet.nativeBlockTimeSeconds,
    fund: faucet.fund,
    logger: log,
  });
  log.info({ networks: faucet.config.networks.length, ms: Date.now() - started }, 'devnet chains are up');
  return { config: onDevnet(faucet.config, devnet), devnet };
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
      // Half the grace for requests in flight, the rest for the onClose hooks (the last usage flush).
      const endDrain = app && drainConnections(app.server, Math.floor(config.server.shutdownGraceMs / 2), log);
      await app?.close(); // stops accepting, finishes in-flight requests, runs onClose hooks
      endDrain?.();
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
  // A stop sent to the whole process group (systemd, Ctrl-C in a terminal, `kill -- -PGID`) arrives
  // twice: directly and relayed by `npm start`. The handlers stay installed, so a repeat is logged
  // and ignored instead of falling to Node's default, which would kill the process in the middle of
  // writing the last usage counts. What bounds the stop is server.shutdownGraceMs.
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) log.warn({ signal }, 'already stopping; signal ignored');
    else void stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  try {
    const secrets = resolveSecrets(config);
    // The storage, Redis and the chains (their own processes) start side by side; storage first, as
    // its loading goes on in the background while the chains are being spawned.
    const [opened, connected, chains] = await Promise.allSettled([
      openStorage({ databaseUrl: config.storage.databaseUrl, dataDir: config.storage.dataDir }),
      config.redis.url ? openRedis(config.redis.url) : undefined,
      config.devnet.enabled ? startChains(config, log) : undefined,
    ]);
    if (chains.status === 'fulfilled' && chains.value) ({ config, devnet } = chains.value);
    if (opened.status === 'fulfilled') storage = opened.value;
    if (connected.status === 'fulfilled') redis = connected.value;
    for (const r of [chains, opened, connected]) if (r.status === 'rejected') throw r.reason;
    if (!storage) throw new Error('storage did not open');
    log.info({ storage: storage.kind }, 'storage ready, migrations applied');
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
