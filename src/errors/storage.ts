// Errors of storage: a database that misbehaved, and PostgreSQL's errors from the worker thread.
import { BaseError } from './base.ts';

/** The database did something it should not have (a row not written, a stored value of an unknown shape) or could not be created. */
export class StorageError extends BaseError {
  override name = 'StorageError';
  static override readonly code = 'STORAGE_ERROR';
}

/**
 * An error PostgreSQL answered to a query of embedded storage, as it comes back from storage's
 * worker thread (storage/pglite-remote.ts): the class name and fields of the driver's own error
 * (SQLSTATE `code`, `constraint`, `detail`...), so that checks such as a unique violation (23505)
 * and the error log read it as before; the stack is the gateway thread's, where the query was made.
 */
export class DatabaseError extends BaseError {
  override name = 'DatabaseError';
  static override readonly code = 'DATABASE_ERROR';
}

/** Why a call between the processes of one gateway was not answered: the other process went away or is going (C56). */
export class IpcClosedError extends BaseError {
  override name = 'IpcClosedError';
  static override readonly code = 'IPC_CLOSED';
}

/**
 * The unique index or constraint a write broke (SQLSTATE 23505), by name, or undefined when `err`
 * (and each of its causes) is another error. PGlite, node-postgres and the storage channel all
 * keep the driver's `code` and `constraint`; '' when the driver gave no name.
 */
export function uniqueViolation(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 6 && e && typeof e === 'object'; depth++) {
    const o = e as { code?: unknown; constraint?: unknown; cause?: unknown };
    if (o.code === '23505') return typeof o.constraint === 'string' ? o.constraint : '';
    e = o.cause;
  }
  return undefined;
}

/** C48: how long a caller refused while the database is unreachable is told to wait (Retry-After, seconds). */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

// Node's socket errors and pg's own words when the server is gone, refuses, or stops answering.
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
const CONNECTION_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Connection ended|the database system is (starting up|shutting down|in recovery)/i;

/**
 * C48: whether `err` (or one of its causes) says the database cannot be reached, rather than
 * that a query was wrong: a refused or reset connection, a connect or read timeout, or a server
 * shutting down (SQLSTATE class 08, 57P01-57P03).
 */
export function isStorageUnavailable(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 6 && e && typeof e === 'object'; depth++) {
    const o = e as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof o.code === 'string' && (CONNECTION_CODES.has(o.code) || o.code.startsWith('08') || /^57P0[123]$/.test(o.code))) return true;
    if (typeof o.message === 'string' && CONNECTION_MESSAGES.test(o.message)) return true;
    e = o.cause;
  }
  return false;
}

/**
 * C3: why a storage call failed, in words a reader can act on: the innermost cause's message
 * ("connect ECONNREFUSED 127.0.0.1:5432"), not the wrapper's (Drizzle's "Failed query: select 1
 * params:", which names the statement but not the cause). An AggregateError (every address of a
 * name refused) says each of its errors.
 */
export function failureCause(err: unknown): string {
  let e: unknown = err;
  let text = '';
  for (let depth = 0; depth < 6 && e && typeof e === 'object'; depth++) {
    const o = e as { message?: unknown; cause?: unknown; errors?: unknown };
    const own = Array.isArray(o.errors) && o.errors.length > 0 ? o.errors.map((x) => failureCause(x)).filter(Boolean).join('; ') : '';
    const message = own || (typeof o.message === 'string' ? o.message : '');
    if (message) text = message;
    if (own) break;
    e = o.cause;
  }
  return text || String(err);
}
