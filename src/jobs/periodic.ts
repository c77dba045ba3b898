// Background jobs run at a fixed interval, never overlapping, stopped cleanly.
import type { StorageOutageLog } from './storage-outage.ts';

/**
 * A job run once at `start` and then every `everyMs` (a retention sweep, a reconciliation): a tick
 * that comes while a run is still going is skipped, never queued. The timer does not keep the
 * process alive; `stop` clears it and waits for the run in progress. Nothing runs before `start`.
 * With an `outage` log, a run failing because the database cannot be reached is said once per
 * outage (C48), not handed to `onError` at each tick.
 */
export class PeriodicJob {
  readonly #run: (first: boolean) => Promise<unknown>;
  readonly #everyMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #outage: StorageOutageLog | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  /**
   * @param opts.run one run; `first` is true for the run at `start`.
   * @param opts.everyMs milliseconds between two ticks.
   * @param opts.onError takes a run's error (a run never rejects), but a storage outage's when `outage` is given.
   * @param opts.outage says once that the database cannot be reached, and once that it answers again.
   */
  constructor(opts: { run: (first: boolean) => Promise<unknown>; everyMs: number; onError: (err: unknown) => void; outage?: StorageOutageLog }) {
    this.#run = opts.run;
    this.#everyMs = opts.everyMs;
    this.#onError = opts.onError;
    this.#outage = opts.outage;
  }

  /** True between `start` and `stop`. */
  get started(): boolean {
    return this.#timer !== undefined;
  }

  /** Runs now, then every `everyMs`; a second call while started does nothing. */
  start(): void {
    if (this.#timer) return;
    this.#tick(true);
    this.#timer = setInterval(() => this.#tick(false), this.#everyMs);
    this.#timer.unref();
  }

  /** Clears the timer and waits for the run in progress; `start` may be called again after. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  #tick(first: boolean): void {
    if (this.#running) return;
    this.#running = this.#run(first)
      .then(() => this.#outage?.ok())
      .catch((err: unknown) => {
        if (!this.#outage?.failed(err)) this.#onError(err);
      })
      .finally(() => {
        this.#running = undefined;
      });
  }
}
