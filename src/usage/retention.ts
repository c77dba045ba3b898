// Retention of stored usage: rows past `usage.retentionDays` swept in bounded batches.
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { PeriodicJob } from '../jobs/periodic.ts';
import { deleteInBatches } from '../storage/batched-delete.ts';
import type { Db } from '../storage/db.ts';

const DAY_MS = 86_400_000;
/** Hours between two sweeps (also one at start, after the gateway is ready). */
const SWEEP_INTERVAL_MS = 3_600_000;

/**
 * For scale (docs/scaling.md): usage rows are kept `usage.retentionDays` UTC days (today counts as one; 400 by default,
 * past the 366 days GET /usage/stats can show at once (C27) and as long as the daily analytics
 * (C46)); older rows are deleted in bounded batches, once at start and then every hour.
 */
export class UsageRetention {
  readonly #db: Db;
  readonly #log: Logger;
  readonly #days: number;
  readonly #sweeps = new PeriodicJob({
    run: () => this.sweep(),
    everyMs: SWEEP_INTERVAL_MS,
    onError: (err) => this.#log.warn({ error: (err as Error).name }, 'usage retention sweep failed'),
  });

  constructor(deps: { db: Db; logger: Logger; retentionDays: number }) {
    this.#db = deps.db;
    this.#log = deps.logger;
    this.#days = deps.retentionDays;
  }

  /** The first UTC day whose rows are kept, given `now`. */
  oldestDay(now = Date.now()): string {
    const today = Date.parse(`${new Date(now).toISOString().slice(0, 10)}T00:00:00Z`);
    return new Date(today - (this.#days - 1) * DAY_MS).toISOString().slice(0, 10);
  }

  /** Deletes the usage rows of days before {@link oldestDay}; returns how many. */
  async sweep(now = Date.now()): Promise<{ usage: number }> {
    const before = sql`day < ${this.oldestDay(now)}::date`;
    const usage = await deleteInBatches(this.#db, 'usage_daily', before);
    // For scale (docs/scaling.md): the account-wide sums of the same days (not counted: they are the same requests).
    await deleteInBatches(this.#db, 'usage_account_daily', before);
    if (usage) this.#log.info({ usage }, 'usage rows past retention deleted');
    return { usage };
  }

  start(): void {
    this.#sweeps.start();
  }

  async close(): Promise<void> {
    await this.#sweeps.stop();
  }
}
