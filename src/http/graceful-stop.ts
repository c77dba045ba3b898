// The stop of a gateway process on SIGTERM, SIGINT or SIGHUP (C57), the same for the single
// process, the primary of several and each of its workers: one stop, whatever signals follow it,
// bounded in time, that ends the process. What is stopped (the drain, the parts) is the caller's.
import type { Logger } from 'pino';

/** The signals that stop a gateway process. */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const satisfies readonly NodeJS.Signals[];

/** Where the signals come from: `process`, or an emitter in a test. */
export interface SignalSource {
  on(event: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
}

export interface GracefulStopOptions {
  log: Logger;
  /** How long the stop may take (ms) before the process exits 1 anyway. */
  limitMs: number;
  /** What the stop closes, in order; the process exits once it resolves. Also settable later ({@link GracefulStop.setSteps}). */
  steps?: () => Promise<void>;
  /** Ends the process (`process.exit`); a test's own, to see the exit code. */
  exit?: (code: number) => void;
}

/**
 * C57: the stop of one process. The first stop signal (or {@link GracefulStop.stop} called by the
 * process itself) logs `stopping`, runs the steps and exits with the stop's code, 1 when a step
 * fails or when the steps outlast `limitMs`; every later signal is ignored. Until the steps are
 * given, a stop only marks {@link GracefulStop.stopping}, for a start that ends itself on it.
 */
export class GracefulStop {
  readonly #log: Logger;
  readonly #limitMs: number;
  readonly #exit: (code: number) => void;
  #steps: (() => Promise<void>) | undefined;
  #stopping = false;

  constructor(opts: GracefulStopOptions) {
    this.#log = opts.log;
    this.#limitMs = opts.limitMs;
    this.#steps = opts.steps;
    this.#exit = opts.exit ?? ((code) => process.exit(code));
  }

  /** True from the first stop on. */
  get stopping(): boolean {
    return this.#stopping;
  }

  /**
   * Stops on SIGTERM, SIGINT and SIGHUP from `source`. A stop sent to the whole process group
   * (systemd, Ctrl-C in a terminal, `kill -- -PGID`) arrives twice: directly and relayed by
   * `npm start` (and by the primary, to a worker). The handlers stay installed, so a repeat is
   * ignored instead of falling to Node's default, which would kill the process in the middle of
   * writing the last usage counts. The relayed copy is normal, so it is only a debug line. What
   * bounds the stop is `limitMs` (server.shutdownGraceMs).
   */
  listen(source: SignalSource = process): this {
    const onSignal = (signal: NodeJS.Signals): void => {
      if (this.#stopping) this.#log.debug({ signal }, 'already stopping; signal ignored');
      else void this.stop(signal);
    };
    // SIGHUP too: a closed terminal (or an SSH session that drops) sends it, whose default kills at once.
    for (const signal of STOP_SIGNALS) source.on(signal, onSignal);
    return this;
  }

  /** The steps of the stop, for a process that has them only part way through its start (the primary: once it has workers). */
  setSteps(steps: () => Promise<void>): void {
    this.#steps = steps;
  }

  /**
   * Begins the stop, unless one is under way; `reason` is the signal or what else asked for it.
   * Resolves once the process was told to exit (in a real process, never).
   */
  async stop(reason: string, exitCode = 0): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#log.info({ signal: reason }, 'stopping');
    const steps = this.#steps;
    if (!steps) return;
    const force = setTimeout(() => {
      this.#log.error('graceful stop took too long; exiting');
      this.#exit(1);
    }, this.#limitMs);
    force.unref();
    try {
      await steps();
      clearTimeout(force);
      this.#log.info('stopped');
      this.#exit(exitCode);
    } catch (err) {
      clearTimeout(force);
      this.#log.error({ err }, 'error while stopping');
      this.#exit(1);
    }
  }
}
