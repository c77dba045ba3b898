// The primary of a gateway run as several processes (C56, WORKERS > 1; docs/scaling.md "Workers"):
// it serves no request itself. It owns what only one process may own -- the embedded store, the
// in-process limits, the usage write-behind -- forks the workers that serve the port, replaces a
// worker that dies, and on a stop (C57) passes the stop on, waits for every worker to drain, and
// writes the last usage after the last worker is gone: all of it within server.shutdownGraceMs.
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { AnalyticsRecorder } from '../analytics/recorder.ts';
import { maskUrl } from '../config/describe.ts';
import type { Config } from '../config/schema.ts';
import { resolveSecrets, type Secrets } from '../config/secrets.ts';
import { listenStartError, StartError, storageStartError } from '../config/start-errors.ts';
import { GracefulStop } from '../http/graceful-stop.ts';
import { SharedLimits } from '../metering/shared-limiter.ts';
import { bindEarly } from '../ops/early-listener.ts';
import { rpcMethodLabels } from '../ops/rpc-metrics.ts';
import { workerExecArgv } from '../ops/runtime.ts';
import { openStorage, type Storage } from '../storage/db.ts';
import { IpcChannel } from '../storage/ipc.ts';
import { type OpenTransactions, serveSharedPglite } from '../storage/pglite-shared.ts';
import { openWhenReachable, warnSlowOpen } from '../storage/wait.ts';
import { serveUsageHandoff } from '../usage/handoff.ts';
import { UsageService } from '../usage/service.ts';

/** The processes `server.workers` asks for: `auto` is one per core the process may use. */
export function workerCount(setting: Config['server']['workers']): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

/** What a worker is told when it starts (`cluster.hello`). */
export interface WorkerHello {
  secrets: Secrets;
  /** The port every worker listens on (the one the primary found free; PORT=0 picks one for all). */
  port: number;
  /** Where the worker's storage is: the primary's embedded database, or PostgreSQL of its own pool. */
  storage: 'shared' | 'postgres';
  /** In-process limits live in the primary (no Redis); else each worker uses Redis. */
  sharedLimits: boolean;
}

/** A worker's number (1..N) stays with its place when it is replaced: logs and metrics keep their label. */
const SLOT_ENV = 'JUNCTION_WORKER';
/** A worker that ran at least this long before dying is replaced at once; sooner, with a growing pause. */
const STABLE_MS = 10_000;
const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 30_000;
/** The share of the grace the primary keeps for itself after the workers' deadline ({@link stopBudget}). */
const PRIMARY_TAIL_SHARE = 0.25;

/** How the grace of a stop with workers is shared out ({@link stopBudget}). */
export interface StopBudget {
  /**
   * The workers' deadline, from the stop on: each stops within it as one process stops within the
   * grace (half of it to drain, the rest to close and hand its last usage over); one still running
   * then is killed by the primary.
   */
  workersMs: number;
  /** What is left of the grace after that, the primary's own: the last usage write and the store's close. */
  tailMs: number;
}

/**
 * C57 with workers (C56): the whole stop, the workers' drain and then the primary's last usage
 * write, fits in `server.shutdownGraceMs`, the primary's own limit, as one process's stop does. The
 * workers get the grace less a tail (a quarter of it) that the primary keeps for the write done
 * after the last worker is gone. The primary and its workers derive it from the same setting (a
 * worker runs with the primary's arguments and environment).
 */
export function stopBudget(graceMs: number): StopBudget {
  const tailMs = Math.floor(graceMs * PRIMARY_TAIL_SHARE);
  return { workersMs: graceMs - tailMs, tailMs };
}

interface Slot {
  n: number;
  worker?: Worker;
  channel?: IpcChannel;
  transactions?: OpenTransactions;
  startedAt: number;
  /** Deaths in a row of workers that did not run STABLE_MS. */
  failures: number;
  ready: boolean;
  respawn?: NodeJS.Timeout;
  /** Since it listens the worker is pinged (`cluster.ping`); when the ping not yet answered was sent. */
  pinged: boolean;
  pingSentAt?: number;
}

/** This process's worker number when it is a worker of a primary, else undefined. */
export function workerNumber(): number | undefined {
  if (!cluster.isWorker) return undefined;
  const n = Number(process.env[SLOT_ENV]);
  return Number.isInteger(n) && n > 0 ? n : cluster.worker?.id;
}

/**
 * Runs the primary: opens storage (applying migrations once for all), forks `count` workers of
 * `mainFile`, and stays until a stop signal. Resolves never; exits the process.
 */
export async function runPrimary(opts: { config: Config; log: Logger; count: number; mainFile: string; args: string[] }): Promise<void> {
  const { config, count } = opts;
  const log = opts.log.child({ process: 'primary' });
  if (config.devnet.enabled) {
    throw new StartError(`WORKERS=${config.server.workers}: --devnet runs as one process; unset WORKERS (or set it to 1) with --devnet`);
  }
  const grace = config.server.shutdownGraceMs;
  const budget = stopBudget(grace);
  // C57: as one process, a repeated signal is ignored, and the whole stop is bounded by the grace:
  // the workers' (each within `budget.workersMs`, killed past it) and then the last usage write
  // (in `budget.tailMs`). Until the workers are forked it has no steps: a signal ends the start
  // once storage is open (never half made).
  const stop = new GracefulStop({ log, limitMs: grace }).listen();
  let storage: Storage | undefined;
  const slots: Slot[] = Array.from({ length: count }, (_, i) => ({ n: i + 1, startedAt: 0, failures: 0, ready: false, pinged: false }));
  let anyReady = false;

  // Fail fast, as one process does: a port in use stops the start before storage opens.
  const early = await bindEarly(config.server.port, config.server.host).catch((err: unknown) => {
    throw listenStartError(err, config);
  });
  const secrets = resolveSecrets(config);
  const shared = !config.storage.databaseUrl;
  const sharedLimits = !config.redis.url && !config.redis.clusterNodes;
  try {
    storage = await openWhenReachable(
      () => openStorage({ databaseUrl: config.storage.databaseUrl, dataDir: config.storage.dataDir, queryTimeoutMs: config.storage.queryTimeoutMs, sharedBuffersMb: config.storage.embeddedSharedBuffersMb, onSlowOpen: warnSlowOpen(log) }),
      { log, where: config.storage.databaseUrl ? maskUrl(config.storage.databaseUrl) : config.storage.dataDir, stopped: () => stop.stopping },
    ).catch((err: unknown) => {
      throw storageStartError(err, config);
    });
  } catch (err) {
    await early.handOver();
    throw err;
  }
  if (stop.stopping) {
    await storage.close();
    await early.handOver();
    log.info('stopped');
    process.exit(0);
  }
  const where = config.storage.databaseUrl ? maskUrl(config.storage.databaseUrl) : config.storage.dataDir === 'memory' ? 'memory' : path.resolve(config.storage.dataDir);
  log.info({ storage: storage.kind, where, workers: count, port: early.port }, `storage ready (${storage.kind === 'postgres' ? 'PostgreSQL' : 'embedded PGlite'}, ${where}), migrations applied; starting ${count} workers`);

  // The workers' limits without Redis; with it, where they go while Redis is away (C48).
  const limits = new SharedLimits();
  limits.start();
  const live = () => slots.filter((s) => s.channel && !s.channel.closed);
  let quotaTurn = 0;
  // The usage of every worker, written by this process alone (one transaction per flush, as one process does).
  const usage = new UsageService({
    db: storage.db,
    settings: config.usage,
    logger: log,
    analytics: config.analytics.enabled ? new AnalyticsRecorder(rpcMethodLabels(config.methods)) : undefined,
    // Every worker drops its answer caches of these accounts (C46, C27)...
    onStored: (userIds) => {
      for (const s of live()) s.channel?.note('usage.stored', { userIds: [...userIds], checkQuota: false });
    },
    // ...and one of them, in turn, checks their usage.quota (C38; a notice is recorded once whoever checks).
    onFlush: (userIds) => {
      const all = live();
      all[quotaTurn++ % Math.max(1, all.length)]?.channel?.note('usage.stored', { userIds: [...userIds], checkQuota: true });
    },
  });
  usage.start();

  const port = early.port;
  cluster.setupPrimary({ exec: opts.mainFile, args: opts.args, execArgv: workerExecArgv(process.execArgv), serialization: 'advanced' });

  const fork = (slot: Slot) => {
    slot.respawn = undefined;
    slot.ready = false;
    slot.pinged = false;
    slot.pingSentAt = undefined;
    slot.startedAt = Date.now();
    const worker = cluster.fork({ [SLOT_ENV]: String(slot.n) });
    const channel = new IpcChannel(worker);
    slot.worker = worker;
    slot.channel = channel;
    channel.handle('cluster.hello', (): WorkerHello => {
      return { secrets, port, storage: shared ? 'shared' : 'postgres', sharedLimits };
    });
    // C3: the early listener answers "starting" (live, not ready) until the first worker is about
    // to listen, and only then lets go of the port: it is never closed for the seconds a worker's
    // start takes (nor free for another process to take, port 0 included). Later workers find it
    // handed over already.
    channel.handle('cluster.listen', async () => {
      await early.handOver();
      return null;
    });
    channel.onNote('cluster.ready', () => {
      slot.ready = true;
      // Listening, so handed connections: from now on its event loop is expected to answer
      // (watchHangs). Not before: a start (modules compiled, storage opened) may hold the loop for
      // seconds on a busy machine, and no connection waits on a worker that does not listen yet.
      slot.pinged = true;
      if (!anyReady) log.info({ workers: count, port }, `${count} workers serve port ${port}`);
      anyReady = true;
    });
    if (shared && storage?.embedded) slot.transactions = serveSharedPglite(channel, storage.embedded);
    limits.serve(channel);
    serveUsageHandoff(channel, usage);
    // C20 across workers without Redis: a key change made by one reaches the others' key caches.
    if (sharedLimits) {
      channel.onNote('keys.change', (change) => {
        for (const s of live()) if (s !== slot) s.channel?.note('keys.change', change);
      });
    }
  };

  cluster.on('exit', (worker, code, signal) => {
    const slot = slots.find((s) => s.worker === worker);
    if (!slot) return;
    if (slot.channel) limits.gone(slot.channel);
    slot.channel?.close();
    // What it left open on the shared database is rolled back: the others' queries go on.
    slot.transactions?.abandon();
    slot.worker = undefined;
    slot.channel = undefined;
    if (stop.stopping) return;
    if (!slot.ready && !anyReady) {
      // No worker ever started: a start error (it said why), not a crash to retry.
      log.fatal({ worker: slot.n, code, signal }, 'a worker failed to start; stopping');
      void stop.stop('start failed', 1);
      return;
    }
    const ranMs = Date.now() - slot.startedAt;
    slot.failures = ranMs >= STABLE_MS ? 0 : slot.failures + 1;
    const delay = slot.failures === 0 ? 0 : Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (slot.failures - 1));
    log.warn({ worker: slot.n, pid: worker.process.pid, code, signal, ranMs, replaceInMs: delay }, `worker ${slot.n} exited (${signal ?? `code ${code}`}); replacing it${delay ? ` in ${delay} ms` : ''}`);
    slot.respawn = setTimeout(() => fork(slot), delay);
  });

  const hangs = watchHangs(slots, config.server.workerHangMs, log);

  // C57: a stop reaches every worker (by the primary too, when it was sent to the primary alone);
  // each drains as one process does and hands its last usage over; the primary writes it once the
  // last worker has gone, then closes the store: the owner exits last, within the grace.
  stop.setSteps(async () => {
    clearInterval(hangs);
    // Stopped before any worker listened: the early listener still holds the port.
    await early.handOver();
    for (const s of slots) clearTimeout(s.respawn);
    const gone = slots.filter((s) => s.worker).map((s) => new Promise<void>((resolve) => s.worker?.once('exit', () => resolve())));
    for (const s of slots) s.worker?.process.kill('SIGTERM');
    // Each worker bounds its own stop by the workers' deadline; one still there then is killed
    // (stuck, or its exit held: Node's exit waits for the thread pool, a DNS lookup in it too), so
    // that the tail of the grace is left for the last usage write.
    const late = setTimeout(() => {
      for (const s of slots) if (s.worker) {
        log.error({ worker: s.n, workersMs: budget.workersMs }, 'a worker did not stop in time; killing it');
        s.worker.process.kill('SIGKILL');
      }
    }, budget.workersMs);
    await Promise.all(gone);
    clearTimeout(late);
    await usage.close();
    await limits.close();
    await storage?.close();
  });

  // The workers take the port from the early listener when the first is ready to listen
  // ('cluster.listen'; the cluster's listening socket is the primary's).
  for (const slot of slots) fork(slot);
}

/**
 * C56: a worker whose event loop no longer runs (a busy loop, a process stopped or wedged) is still
 * handed connections by the primary, which then hang: each worker is pinged over its IPC channel
 * from the moment it listens, and one that leaves a ping unanswered for `hangMs` is killed, then replaced as
 * a worker that dies is. A ping is answered in the worker's next event-loop turn, so a worker busy
 * with requests answers it; only one ping per worker is out at a time.
 */
function watchHangs(slots: readonly Slot[], hangMs: number, log: Logger): NodeJS.Timeout {
  const timer = setInterval(
    () => {
      const now = Date.now();
      for (const slot of slots) {
        const { worker, channel } = slot;
        if (!worker || !channel || !slot.pinged || worker.isDead()) continue;
        if (slot.pingSentAt !== undefined) {
          if (now - slot.pingSentAt < hangMs) continue;
          log.error({ worker: slot.n, pid: worker.process.pid, workerHangMs: hangMs }, `worker ${slot.n} has not answered for ${hangMs} ms (server.workerHangMs); killing it`);
          slot.pinged = false;
          worker.process.kill('SIGKILL');
          continue;
        }
        slot.pingSentAt = now;
        channel.call('cluster.ping', null).then(
          () => {
            if (slot.channel === channel) slot.pingSentAt = undefined;
          },
          () => {},
        );
      }
    },
    Math.max(100, Math.floor(hangMs / 4)),
  );
  timer.unref();
  return timer;
}
