// The command line and the config are read with light modules only: `--help` and a mistake in a
// setting answer at once. The app, storage and devnet modules are loaded once they are needed.
import cluster from 'node:cluster';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import type { RedisClient } from './storage/redis.ts';
import type { Logger } from 'pino';
import type { Address } from 'viem';
import { helpText, parseCommandLine, UsageError } from './config/cli.ts';
import { maskUrl } from './config/describe.ts';
import { ConfigError, loadConfig, publicUrl, validateConfig } from './config/load.ts';
import type { Config } from './config/schema.ts';
import { resolveSecrets } from './config/secrets.ts';
import { refuseWeakSecrets } from './config/weak-secrets.ts';
import { listenStartError, redisStartError, redisUnreachable, StartError, storageStartError } from './config/start-errors.ts';
import type { Devnet } from './devnet/devnet.ts';
import { bindEarly, type EarlyListener } from './ops/early-listener.ts';
import { createLogger, prettyLogs } from './ops/logging.ts';
import { tracingEnabled } from './ops/tracing.ts';
import { devnetAdminToken, recordDevnetAdminUrl } from './devnet/admin-token.ts';
import { installBenchGc } from './ops/bench-gc.ts';
import { GracefulStop } from './http/graceful-stop.ts';
import type { Storage } from './storage/db.ts';

/** The config with every network's upstream pointed at its local devnet chain (C31) and the devnet's prices (C45). */
async function onDevnet(cfg: Config, devnet: Devnet, tokens: Readonly<Record<string, Address>>): Promise<Config> {
  const [{ applyDevnetPrices }, { applyDevnetTokens }, { DEVNET_BLOCK_TIME_MS }] = await Promise.all([import('./devnet/prices.ts'), import('./devnet/tokens.ts'), import('./devnet/devnet.ts')]);
  const copy = structuredClone<Config>(cfg);
  for (const n of copy.networks) {
    const u = devnet.upstreams[n.slug];
    if (!u) continue;
    n.upstreams = [{ http: u.http, ws: u.ws }];
    n.blockTimeMs = DEVNET_BLOCK_TIME_MS; // anvil's pace, not the real chain's
  }
  applyDevnetPrices(copy, devnet.priceFeeds);
  applyDevnetTokens(copy, tokens);
  // The local chains have no block explorer: say so rather than link to the real network's.
  for (const n of copy.networks) if (devnet.upstreams[n.slug]) n.explorerUrl = null;
  return validateConfig(copy);
}

let devnetLoading: ReturnType<typeof loadDevnetModules> | undefined;
const loadDevnetModules = () =>
  Promise.all([import('./devnet/devnet.ts'), import('./devnet/tokens.ts'), import('./intents/deploy.ts'), import('./devnet/prices.ts'), import('./faucet/wallets.ts')]);
/** The modules of `--devnet`, loaded once. */
const devnetModules = () => (devnetLoading ??= loadDevnetModules());

/**
 * The local chains of `--devnet` (C31) and the config pointed at them. The dev accounts with their
 * private keys and every address go to `detailsFile` and to a debug line, never to an info line; on
 * a terminal (`terse`) the info lines carry their message only, JSON lines keep the addresses.
 */
async function startChains(cfg: Config, log: Logger, stateDir: string | undefined, detailsFile: string, terse: boolean): Promise<{ config: Config; devnet: Devnet }> {
  const started = Date.now();
  const [{ startDevnet }, { deployTestTokens }, { deployDevnetSettlers, devnetSolver, withDevnetIntents }, { feedHeartbeatSeconds }, { faucetWallets, withDevnetFaucetKeys }] = await devnetModules();
  // C31: testnets without a faucet key get one for this run; the chains fund every faucet wallet.
  const faucet = withDevnetFaucetKeys(cfg);
  // C42: the solver wallet (configured, or made for this run) is funded on every chain and deploys the settlers.
  const solver = devnetSolver(faucet.config);
  const devnet = await startDevnet({
    networks: faucet.config.networks.map((n) => ({ slug: n.slug, chainId: n.chainId, native: n.native === true })),
    nativeBlockTimeSeconds: faucet.config.devnet.nativeBlockTimeSeconds,
    fund: [...faucet.fund, solver.address],
    // The chains keep their state in the data folder, in step with the database across restarts.
    ...(stateDir === undefined ? {} : { stateDir }),
    // C45: the native coin's feed price, dev account 9's whale transfers, and the feeds' heartbeat.
    nativeUsdPrice: faucet.config.devnet.nativeUsdPrice,
    whaleEverySeconds: faucet.config.devnet.whaleEverySeconds,
    feedHeartbeatSeconds: feedHeartbeatSeconds(faucet.config),
    logger: log,
  });
  const chains = Object.fromEntries(Object.entries(devnet.upstreams).map(([slug, u]) => [slug, u.http]));
  const count = Object.keys(devnet.upstreams).length;
  log.info(terse ? {} : { networks: count, ms: Date.now() - started, chains: devnet.upstreams }, `devnet chains are up (${count} networks, one anvil each)`);
  // Public anvil keys (the "test test ... junk" mnemonic), so a newcomer can sign at once: in the file and at debug.
  const accounts = devnet.accounts.map((a, i) => ({ index: i, address: a.address, privateKey: a.privateKey }));
  const wallets = Object.fromEntries(faucetWallets(faucet.config).map((w) => [w.slug, w.address]));
  // C40: a test ERC-20 on every chain (the shipped token addresses hold no contract locally); C42: both settlers.
  const [tokens, settlers] = await Promise.all([
    deployTestTokens({ urls: chains, from: devnet.accounts[9]!.address, recipients: devnet.accounts.map((a) => a.address) }),
    deployDevnetSettlers({
      chains: faucet.config.networks.filter((n) => chains[n.slug]).map((n) => ({ slug: n.slug, chainId: n.chainId, rpcUrl: chains[n.slug]! })),
      solver,
    }),
  ]).catch(async (err: unknown) => {
    await devnet.stop();
    throw err;
  });
  // The addresses (a token and two settlers per chain, the wallets) go to the file and to debug.
  log.info(terse ? {} : { networks: Object.keys(tokens).length, solver: solver.address, ms: Date.now() - started }, 'devnet contracts deployed (test token JUSD, intent settlers)');
  const details = {
    note: '10 dev accounts with 10,000,000 coins each on every chain; public keys (the anvil mnemonic), never use them elsewhere; index 9 is the devnet\'s own',
    accounts,
    chains: devnet.upstreams,
    faucetWallets: wallets,
    tokens,
    settlers: settlers.settlers,
    solver: solver.address,
  };
  mkdirSync(path.dirname(detailsFile), { recursive: true, mode: 0o700 });
  writeFileSync(detailsFile, `${JSON.stringify(details, null, 2)}\n`, { mode: 0o600 });
  log.debug(details, 'devnet dev accounts, keys and addresses');
  log.info(terse ? {} : { file: detailsFile }, `devnet dev accounts, keys and addresses: ${detailsFile}`);
  return { config: withDevnetIntents(await onDevnet(faucet.config, devnet, tokens), settlers), devnet };
}

async function main(): Promise<void> {
  const values = parseCommandLine(process.argv.slice(2));
  if (values.help) {
    process.stdout.write(helpText());
    return;
  }
  let config = loadConfig({ configFile: values.config, devnet: values.devnet });
  // C59: outside the devnet, no secret from the repository's examples or of obviously low entropy.
  refuseWeakSecrets(config);
  const log = createLogger(config.logLevel, undefined, config.logFormat, tracingEnabled(config));
  // On a terminal a start line carries its message only; JSON lines keep their fields for machines.
  const terse = prettyLogs(config.logFormat);
  // C56: WORKERS > 1 runs a primary that owns the store and forks the workers (src/cluster/); a
  // worker is this same file, forked by it. WORKERS=1 (the default) is the single process below.
  if (cluster.isWorker) {
    const [{ runWorker }, { buildApp }] = await Promise.all([import('./cluster/worker.ts'), import('./app.ts')]);
    await runWorker({ config, log, build: (deps) => buildApp(config, deps), connectRedis });
    return;
  }
  if (config.server.workers !== 1) {
    const { runPrimary, workerCount } = await import('./cluster/primary.ts');
    const count = workerCount(config.server.workers);
    if (count > 1) {
      await runPrimary({ config, log, count, mainFile: fileURLToPath(import.meta.url), args: process.argv.slice(2) });
      return;
    }
  }
  let early: EarlyListener | undefined;

  let devnet: Devnet | undefined;
  let storage: Storage | undefined;
  let redis: RedisClient | undefined;
  let app: FastifyInstance | undefined;
  // C57: a stop signal drains the connections and closes the parts, within server.shutdownGraceMs
  // (exit 1 past it); a signal during the start closes what has started so far.
  const stop = new GracefulStop({
    log,
    limitMs: config.server.shutdownGraceMs,
    steps: async () => {
      // The same signal may have reached the chains (a stop sent to the process group): their exit is expected now.
      devnet?.beginStop();
      // C57: the HTTP connections drain by themselves (every answer closes its connection, a new
      // request on one is answered 503) while each WebSocket turns new messages away, answers its
      // calls in flight and then gets its 1001; half the grace for that (then busy connections
      // are cut), the rest for the onClose hooks (the last usage flush).
      const drainMs = Math.floor(config.server.shutdownGraceMs / 2);
      if (app) await Promise.all([app.parts.drain.drain(drainMs), app.parts.ws.close(drainMs)]);
      await app?.close(); // runs the onClose hooks once the server has no connection left
      await storage?.close();
      redis?.disconnect();
      await devnet?.stop();
    },
  }).listen();

  try {
    // Fail fast: the port is bound first, so a port in use stops the start before storage opens
    // and the chains start. Until the app is ready it answers /health/live, and 503 to the rest.
    early = await bindEarly(config.server.port, config.server.host).catch((err: unknown) => {
      throw listenStartError(err, config);
    });
    const secrets = resolveSecrets(config);
    // Redis first, as the port: one connection, answered or refused within a second, so a REDIS_URL
    // that names no host or has a wrong password stops the start at once, before the storage
    // (seconds of loading; a new embedded database must not be left half made) and the chains
    // begin; a Redis that is only away is waited for in the background (C48).
    // (Not beside the loading below: that holds this thread, and the refusal would wait for it.)
    redis = await connectRedis(config, log);
    // Every module is loaded before anything starts: loading is work on this thread, and done
    // while the storage opens it would delay the chains' answers past their timeouts.
    const [{ buildApp }, { openStorage }, { openWhenReachable, warnSlowOpen }] = await Promise.all([
      import('./app.ts'),
      import('./storage/db.ts'),
      import('./storage/wait.ts'),
      config.devnet.enabled ? devnetModules() : undefined,
    ]);
    const dataDir = path.resolve(config.storage.dataDir);
    log.info({ dataDir, secrets: secretsSource(config) }, `data folder ${config.storage.dataDir === 'memory' ? '(none: in memory)' : dataDir}`);
    // Devnet chains persist next to the embedded database; with DATABASE_URL too, in the data folder.
    const devnetStateDir = config.devnet.enabled && config.storage.dataDir !== 'memory' ? path.join(dataDir, 'devnet') : undefined;
    if (values.fresh) {
      if (!config.devnet.enabled) throw new StartError('--fresh resets the devnet chains and the embedded database: use it with --devnet');
      if (config.storage.databaseUrl) {
        throw new StartError(`--fresh starts the chains and the database anew, but DATABASE_URL (${maskUrl(config.storage.databaseUrl)}) is not the gateway's to drop: drop and create that database yourself, then start without --fresh after removing ${path.join(dataDir, 'devnet')}`);
      }
      rmSync(path.join(dataDir, 'pglite'), { recursive: true, force: true });
      if (devnetStateDir) rmSync(devnetStateDir, { recursive: true, force: true });
      log.info({ dataDir }, '--fresh: the devnet chains and the database start anew');
    }
    // C52: the devnet serves the admin API, with a token of its own when ADMIN_TOKEN is not set.
    let adminToken: { token: string; file?: string } | undefined;
    if (config.devnet.enabled && !config.admin.token) {
      adminToken = devnetAdminToken(config.storage.dataDir);
      config = validateConfig({ ...structuredClone<Config>(config), admin: { token: adminToken.token } });
    }
    const detailsFile = path.join(devnetStateDir ?? tmpdir(), devnetStateDir ? 'accounts.json' : `junction-devnet-${process.pid}.json`);
    // The storage and the chains (their own processes) start side by side; storage first, as its
    // loading goes on in the background while the chains are being spawned.
    const [opened, chains] = await Promise.allSettled([
      // C48: a PostgreSQL that is not there yet is waited for (logged at each attempt), not a failed start.
      openWhenReachable(
        () => openStorage({ databaseUrl: config.storage.databaseUrl, dataDir: config.storage.dataDir, queryTimeoutMs: config.storage.queryTimeoutMs, sharedBuffersMb: config.storage.embeddedSharedBuffersMb, onSlowOpen: warnSlowOpen(log) }),
        { log, where: config.storage.databaseUrl ? maskUrl(config.storage.databaseUrl) : config.storage.dataDir, stopped: () => stop.stopping },
      ).catch((err: unknown) => {
        throw storageStartError(err, config);
      }),
      config.devnet.enabled ? startChains(config, log, devnetStateDir, detailsFile, terse) : undefined,
    ]);
    if (chains.status === 'fulfilled' && chains.value) ({ config, devnet } = chains.value);
    if (opened.status === 'fulfilled') storage = opened.value;
    for (const r of [chains, opened]) if (r.status === 'rejected') throw r.reason;
    if (!storage) throw new Error('storage did not open');
    const where = config.storage.databaseUrl ? maskUrl(config.storage.databaseUrl) : config.storage.dataDir === 'memory' ? 'memory' : dataDir;
    log.info(terse ? {} : { storage: storage.kind, where }, `storage ready (${storage.kind === 'postgres' ? 'PostgreSQL' : 'embedded PGlite'}, ${where}), migrations applied`);
    app = await buildApp(config, { storage, secrets, logger: log, probeUpstreams: true, ...(redis ? { redis } : {}) });
    // The background work starts here (the key-change subscription, probes, flushes), before the
    // listener opens: a failure of it is not reported as a port that cannot be listened on.
    await app.ready();
    const parts = app.parts;
    installBenchGc(process.env, () => ({ ...parts.ws.stats(), pendingBytes: parts.outbound.pendingBytes(), receivingBytes: parts.outbound.receivingBytes(), refused: parts.outbound.refused }));
    // The early listener lets go of the port and the app takes it in the same turn.
    await early.handOver();
    const address = await app.listen({ port: early.port, host: config.server.host }).catch((err: unknown) => {
      throw listenStartError(err, config);
    });
    const base = publicUrl(config, (app.server.address() as { port?: number } | null)?.port);
    // C52: the admin command sends the devnet's token to this gateway only, and finds it here by itself.
    if (config.devnet.enabled) recordDevnetAdminUrl(config.storage.dataDir, adminToken?.file ? base : undefined);
    log.info(terse ? {} : { address, publicUrl: base, dashboard: `${base}/`, docs: `${base}/docs`, devnet: config.devnet.enabled }, 'Junction is listening');
    // The per-network states of the first probe round, in one line (they are at debug), then the banner.
    const round = await app.parts.upstreams.firstRound();
    const total = round.answering.length + round.down.length;
    const summary =
      round.down.length === 0 ? `${total} networks: ${total} answering`
      : round.answering.length === 0 ? `0 of ${total} networks answering`
      : `${round.answering.length} of ${total} networks answering; down: ${round.down.join(', ')}`;
    (round.down.length === 0 ? log.info : log.warn).call(log, terse ? {} : { networks: total, answering: round.answering, down: round.down }, summary);
    const ready = banner({ base, devnet: config.devnet.enabled, adminToken, detailsFile, noNode: total > 0 && round.answering.length === 0 });
    // A terminal gets the banner's lines; a JSON line is one event: its lines are its fields.
    if (terse) log.info(ready.lines.join('\n'));
    else log.info({ dashboard: `${base}/`, ...ready.fields, ...(adminToken ? { adminTokenFile: adminToken.file ?? null } : {}) }, ready.lines[0]);
  } catch (err) {
    if (!plainStartError(err, log)) log.error({ err }, 'start failed');
    // Whatever had started is closed, but a failed start never hangs on it.
    setTimeout(() => process.exit(1), config.server.shutdownGraceMs).unref();
    await app?.close().catch(() => {});
    await storage?.close().catch(() => {});
    redis?.disconnect();
    await devnet?.stop().catch(() => {});
    process.exit(1);
  }
}

/**
 * The Redis of `redis.url` or `redis.clusterNodes`, or undefined when there is none (one instance).
 * A Redis that refuses or does not answer yet is no reason to stay down (C48): the client goes on
 * trying, one warn line says so, and limits are kept in memory until it answers. A name that does
 * not resolve or a refused password stops the start (one line naming the setting).
 */
async function connectRedis(config: Config, log: Logger): Promise<RedisClient | undefined> {
  const { url, clusterNodes, commandTimeoutMs } = config.redis;
  if (!url && !clusterNodes) return undefined;
  const { openRedis, openRedisCluster, firstConnectError } = await import('./storage/redis.ts');
  const [where, setting] = clusterNodes ? [clusterNodes[0] ?? '', 'REDIS_CLUSTER_NODES'] : [url as string, 'REDIS_URL'];
  const redis = await (clusterNodes ? openRedisCluster(clusterNodes, { commandTimeoutMs }) : openRedis(url as string, { commandTimeoutMs })).catch((err: unknown) => {
    throw redisStartError(err, where, setting);
  });
  const unreachable = firstConnectError(redis);
  if (unreachable !== undefined) log.warn(`${redisUnreachable(unreachable, where, setting)}; the start goes on with every limit enforced by this instance in memory until Redis answers (C48)`);
  return redis;
}

/** Where the secrets come from, for the start line (never their values). */
function secretsSource(cfg: Config): string {
  if (cfg.auth.jwtSecret && cfg.keys.encryptionSecret) return 'given (JWT_SECRET, KEY_ENCRYPTION_SECRET)';
  if (cfg.storage.dataDir === 'memory') return 'generated for this run only';
  return `generated once into ${path.resolve(cfg.storage.dataDir, 'secrets.json')} (mode 0600)`;
}

/**
 * The start's last line: where the dashboard and the docs are, one call to try, and on the devnet
 * how to reach the paid features (C52). The admin token is shown on the devnet only, where it was
 * made for this data folder; a given ADMIN_TOKEN is never printed.
 */
function banner(o: { base: string; devnet: boolean; adminToken: { token: string; file?: string } | undefined; detailsFile: string; noNode: boolean }): {
  lines: string[];
  fields: Record<string, string>;
} {
  const fields: Record<string, string> = {
    docs: `${o.base}/docs`,
    try: `curl -s ${o.base}/public/main -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'`,
  };
  if (o.devnet) {
    fields.accounts = o.detailsFile;
    // C52: with this gateway's address, so the command reaches it on any port, from any folder.
    if (o.adminToken) fields.admin = `ADMIN_TOKEN=${o.adminToken.token} npm run admin -- set-tier me@example.com max --url ${o.base}`;
  }
  if (o.noNode) fields.hint = 'no node answers: offline? try --devnet';
  const lines = [`Junction is ready: dashboard ${o.base}/`, `  API docs   ${fields.docs}`, `  try        ${fields.try}`];
  if (fields.accounts) lines.push(`  accounts   dev accounts, private keys and addresses in ${fields.accounts}`);
  if (fields.admin) lines.push(`  admin      ${fields.admin}`);
  if (fields.hint) lines.push(`  ${fields.hint}`);
  return { lines, fields };
}

/**
 * A mistake of the user or the surroundings: one line, no stack. Once the logger exists (`log`), in
 * the log's format (a JSON line, or a readable one on a terminal); before that, plain on stderr.
 */
function plainStartError(err: unknown, log?: Logger): boolean {
  if (err instanceof ConfigError) console.error(`Configuration error: ${err.message}`);
  else if (err instanceof StartError) {
    if (log) log.fatal(`Cannot start: ${err.message}`);
    else console.error(`Cannot start: ${err.message}`);
  }
  else if (err instanceof UsageError) console.error(`Command line: ${err.message}`);
  else return false;
  return true;
}

await main().catch((err: unknown) => {
  if (!plainStartError(err)) console.error(err);
  process.exit(1);
});
