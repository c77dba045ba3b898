// What a background job logs while the database cannot be reached (C48): once, not at every run.
import { isStorageUnavailable } from '../errors/storage.ts';

/** The part of a pino logger an outage log writes to. */
export interface OutageLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/**
 * C48: what a background job says while the database cannot be reached. A job that
 * runs every second (the webhook outbox, a follower's lease, a sweep) would otherwise write a
 * warning at each run for as long as the outage lasts: here it writes one warning when the job
 * starts failing on storage, debug lines while it goes on, and one info line when a run succeeds
 * again, with how long it failed and how many runs did. Other errors are not its business:
 * {@link failed} returns false and the caller logs them as before.
 */
export class StorageOutageLog {
  readonly #log: OutageLogger;
  readonly #job: string;
  readonly #fields: object;
  #since: number | null = null;
  #failures = 0;

  /**
   * @param job the job in words, as the log lines name it ("webhook outbox", "faucet recheck").
   * @param fields added to each line (a network, a component); nothing secret.
   */
  constructor(log: OutageLogger, job: string, fields: object = {}) {
    this.#log = log;
    this.#job = job;
    this.#fields = fields;
  }

  /** True from the first storage failure until the next success. */
  get failing(): boolean {
    return this.#since !== null;
  }

  /**
   * A run failed with `err`: when the database cannot be reached, logs it (a warning only for the
   * first failure of an outage) and returns true; otherwise returns false and logs nothing.
   */
  failed(err: unknown): boolean {
    if (!isStorageUnavailable(err)) return false;
    this.#failures++;
    // No SQL, parameters or connection string: the error's class and code are enough.
    const e = err as { name?: unknown; code?: unknown; cause?: { code?: unknown } };
    const line = { ...this.#fields, job: this.#job, error: e.name, code: e.cause?.code ?? e.code, failures: this.#failures };
    if (this.#since === null) {
      this.#since = Date.now();
      this.#log.warn(line, `${this.#job}: the database cannot be reached; retried quietly until it answers`);
    } else {
      this.#log.debug(line, `${this.#job}: the database still cannot be reached`);
    }
    return true;
  }

  /** A run succeeded: after an outage, says so once. */
  ok(): void {
    if (this.#since === null) return;
    const seconds = Math.round((Date.now() - this.#since) / 1000);
    this.#log.info({ ...this.#fields, job: this.#job, seconds, failures: this.#failures }, `${this.#job}: the database answers again after ${seconds} s`);
    this.#since = null;
    this.#failures = 0;
  }
}
