// A worker of a gateway run as several processes (C56, WORKERS > 1; docs/scaling.md "Workers"): a
// full gateway (HTTP, WebSocket, REST) on the port the primary shares, that reaches what the
// primary owns over the cluster's IPC channel: the embedded store, the in-process limits, the
// usage write-behind, the other workers' key changes. With PostgreSQL and Redis it uses both
// directly, as a single process does; only its usage goes through the primary.
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { maskUrl } from '../config/describe.ts';
import { listenStartError, storageStartError } from '../config/start-errors.ts';
import { publicUrl } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import type { Secrets } from '../config/secrets.ts';
import { GracefulStop } from '../http/graceful-stop.ts';
import { installBenchGc } from '../ops/bench-gc.ts';
import { relayKeyChanges } from '../keys/relay.ts';
import type { Limiter } from '../metering/limiter.ts';
import { SharedLimiter } from '../metering/shared-limiter.ts';
import { openStorage, type Storage } from '../storage/db.ts';
import { IpcChannel, type IpcEndpoint } from '../storage/ipc.ts';
import { sharedStorage } from '../storage/pglite-shared.ts';
import type { RedisClient } from '../storage/redis.ts';
import { openWhenReachable } from '../storage/wait.ts';
import { IpcUsageHandoff } from '../usage/handoff.ts';
import type { UsageHandoff } from '../usage/service.ts';
import { stopBudget, type WorkerHello, workerNumber } from './primary.ts';

/** What a worker's app is built with (app.ts `AppDeps`, the parts a worker chooses). */
export interface WorkerAppDeps {
  storage: Storage;
  secrets: Secrets;
  logger: Logger;
  probeUpstreams: boolean;
  redis?: RedisClient;
  limiter?: Limiter;
  usageHandoff: UsageHandoff;
}

/** How long a stopping worker waits for the primary to confirm its last usage (it is gone past that). */
const HANDOFF_CONFIRM_MS = 2_000;

/**
 * Runs this process as a worker: asks the primary for the secrets and the port, builds the app
 * with `build` (main.ts's buildApp), listens, and stops as one process does (C57) when told to,
 * or when the primary goes away.
 */
export async function runWorker(opts: {
  config: Config;
  log: Logger;
  build: (deps: WorkerAppDeps) => Promise<FastifyInstance>;
  connectRedis: (config: Config, log: Logger) => Promise<RedisClient | undefined>;
}): Promise<void> {
  const { config } = opts;
  const n = workerNumber() ?? 0;
  // Every line says which process wrote it (operators follow one worker; tests see calls spread).
  const log = opts.log.child({ process: `worker-${n}` });
  if (!process.send) throw new Error('a worker runs with an IPC channel (forked by the primary)');
  const channel = new IpcChannel(process as unknown as IpcEndpoint);
  // C56: the primary's liveness ping, answered by the event loop (a worker that hangs is replaced).
  channel.handle('cluster.ping', () => null);
  // What the stop closes: filled in as the start goes (a stop may come at any point of it).
  const held: { app?: FastifyInstance; storage?: Storage; redis?: RedisClient } = {};
  // C57: a worker's stop is bounded by the workers' deadline, not the whole grace: the primary
  // keeps the tail of the grace for the last usage write, after the last worker is gone.
  const { workersMs } = stopBudget(config.server.shutdownGraceMs);
  const stop = new GracefulStop({
    log,
    limitMs: workersMs,
    steps: async () => {
      // C57 as one process, in the workers' deadline: connections drain, WebSocket clients have
      // their calls in flight answered and get their 1001 (both within half of it), then the parts
      // close (usage's close hands the last counts to the primary).
      const { app } = held;
      const drainMs = Math.floor(workersMs / 2);
      if (app) await Promise.all([app.parts.drain.drain(drainMs), app.parts.ws.close(drainMs)]);
      await app?.close();
      // The channel keeps its order: this answer comes once the primary has taken the last batch.
      if (!channel.closed) {
        await Promise.race([channel.call('usage.taken', null), new Promise((resolve) => setTimeout(resolve, HANDOFF_CONFIRM_MS).unref())]).catch(() => {});
      }
      await held.storage?.close();
      held.redis?.disconnect();
    },
  }).listen();
  // The primary gone (killed): the store and the limits are out of reach, this worker stops too.
  process.on('disconnect', () => {
    if (stop.stopping) return;
    log.error('the primary process is gone; stopping');
    void stop.stop('primary gone');
  });

  const hello = await channel.call<WorkerHello>('cluster.hello', null);
  const redis = await opts.connectRedis(config, log);
  if (redis) held.redis = redis;
  const storage =
    hello.storage === 'shared'
      ? sharedStorage(channel)
      : await openWhenReachable(
          () => openStorage({ databaseUrl: config.storage.databaseUrl, dataDir: config.storage.dataDir, queryTimeoutMs: config.storage.queryTimeoutMs }),
          { log, where: maskUrl(config.storage.databaseUrl ?? ''), stopped: () => stop.stopping },
        ).catch((err: unknown) => {
          throw storageStartError(err, config);
        });
  held.storage = storage;
  const app = await opts.build({
    storage,
    secrets: hello.secrets,
    logger: log,
    probeUpstreams: true,
    ...(redis ? { redis } : {}),
    // The primary's limits: the limits without Redis, the fallback while Redis is away with it (C48).
    ...(hello.sharedLimits ? { limiter: new SharedLimiter(channel) } : { limitsFallback: new SharedLimiter(channel) }),
    usageHandoff: new IpcUsageHandoff(channel),
  });
  held.app = app;
  if (hello.sharedLimits) relayKeyChanges(channel, app.parts.keys);
  // C56: /metrics answers for the worker that took the connection; its series say which.
  app.parts.metrics.registry.setDefaultLabels({ worker: String(n) });
  await app.ready();
  // Benches only (BENCH_GC=1, --expose-gc): SIGUSR2 sent to this worker prints its own memory and
  // connections, which the primary cannot collect for it (bench/scenarios/ws.ts sums them).
  const parts = app.parts;
  installBenchGc(process.env, () => ({ worker: n, ...parts.ws.stats(), pendingBytes: parts.outbound.pendingBytes(), receivingBytes: parts.outbound.receivingBytes(), refused: parts.outbound.refused }));
  // The primary's early listener lets go of the port first (C3: the port answers "starting" until then).
  await channel.call('cluster.listen', null);
  const address = await app.listen({ port: hello.port, host: config.server.host }).catch((err: unknown) => {
    throw listenStartError(err, config);
  });
  const base = publicUrl(config, hello.port);
  log.info({ address, publicUrl: base, worker: n }, 'Junction is listening');
  channel.note('cluster.ready', null);
}
