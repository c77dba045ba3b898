/**
 * A job run once at `start` and then every `everyMs` (a retention sweep, a reconciliation): a tick
 * that comes while a run is still going is skipped, never queued. The timer does not keep the
 * process alive; `stop` clears it and waits for the run in progress. Nothing runs before `start`.
 */
export class PeriodicJob {
  readonly #run: (first: boolean) => Promise<unknown>;
  readonly #everyMs: number;
  readonly #onError: (err: unknown) => void;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  /**
   * @param opts.run one run; `first` is true for the run at `start`.
   * @param opts.everyMs milliseconds between two ticks.
   * @param opts.onError takes a run's error (a run never rejects).
   */
  constructor(opts: { run: (first: boolean) => Promise<unknown>; everyMs: number; onError: (err: unknown) => void }) {
    this.#run = opts.run;
    this.#everyMs = opts.everyMs;
    this.#onError = opts.onError;
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
      .then(() => {})
      .catch((err: unknown) => this.#onError(err))
      .finally(() => {
        this.#running = undefined;
      });
  }
}
