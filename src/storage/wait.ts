// Opening storage at start while the database cannot be reached yet (C48): retries with backoff.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { isStorageUnavailable } from '../errors/storage.ts';
import type { EmbeddedOpenStep, Storage } from './db.ts';

/** First pause between start-up attempts, and the longest (milliseconds). */
const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 5000;

// A name that does not resolve is a mistake in DATABASE_URL, not a database still starting: the
// start fails at once with one line naming the setting (config/start-errors.ts).
const NOT_WORTH_WAITING = new Set(['ENOTFOUND']);

/**
 * C48: opens storage, and while the database cannot be reached (refused, reset, timed out,
 * starting up) tries again with a growing pause (1 s doubling to 5 s), one log line per attempt,
 * until it answers or `stopped()` says the process is stopping (then rejects with the last error).
 * Any other failure (authentication, a database that does not exist, a failed migration) rejects
 * at once. The listener is not open meanwhile: the process says it waits and for what.
 */
export async function openWhenReachable(open: () => Promise<Storage>, opts: { log: Logger; where: string; stopped?: () => boolean }): Promise<Storage> {
  let delay = FIRST_DELAY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      const storage = await open();
      if (attempt > 1) opts.log.info({ attempts: attempt }, `the database at ${opts.where} answers after ${attempt} attempts`);
      return storage;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (!isStorageUnavailable(err) || (typeof code === 'string' && NOT_WORTH_WAITING.has(code)) || opts.stopped?.()) throw err;
      opts.log.warn({ attempt, retryInMs: delay, code }, `waiting for the database at ${opts.where}: ${(err as Error).message.slice(0, 120)}; attempt ${attempt}, next in ${delay / 1000} s`);
      await sleep(delay);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}

/** `onSlowOpen` of openStorage: a start that waits long on embedded storage says, every 30 s, on which step. */
export const warnSlowOpen =
  (log: Logger) =>
  (step: EmbeddedOpenStep, ms: number): void =>
    log.warn({ step, ms }, `the embedded database is still opening after ${Math.round(ms / 1000)} s: ${step}`);
