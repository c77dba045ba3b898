/**
 * A background job that runs one pass at a time: asked while idle, it starts a pass at once; asked
 * while a pass is running, it runs exactly one more pass right after (however often it was asked
 * meanwhile). Passes never overlap, and no request made during a pass is lost.
 */
export class SerialJob {
  readonly #pass: () => Promise<void>;
  readonly #onError: ((err: unknown) => void) | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  /**
   * @param pass one pass of the work; it may call `request()` itself to ask for another pass.
   * @param opts.onError takes the error that ends a pass (the passes asked for meanwhile are
   *   dropped until the next request); without it, the promise of the run rejects.
   */
  constructor(pass: () => Promise<void>, opts: { onError?: (err: unknown) => void } = {}) {
    this.#pass = pass;
    this.#onError = opts.onError;
  }

  /** True while a pass is running. */
  get busy(): boolean {
    return this.#running !== undefined;
  }

  /**
   * Runs a pass now, or once more right after the one running. Returns the run: it settles when
   * the last pass of this run ends. After `stop()`, nothing runs and it resolves at once.
   */
  request(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    // Set before the first pass starts, so a pass that asks again synchronously sees it running.
    let settle!: { resolve: () => void; reject: (err: unknown) => void };
    this.#running = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    const running = this.#running;
    this.#loop().then(settle.resolve, settle.reject);
    return running;
  }

  /** Waits until no pass is running (a run started meanwhile included). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** No pass starts any more; returns the run in progress (if any), which ends after its current pass. */
  stop(): Promise<void> {
    this.#stopped = true;
    return this.#running ?? Promise.resolve();
  }

  async #loop(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#pass();
      } while (this.#again && !this.#stopped);
    } catch (err) {
      if (!this.#onError) throw err;
      this.#onError(err);
    } finally {
      this.#running = undefined;
    }
  }
}
