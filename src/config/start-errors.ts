// Start failures in words: a database, Redis or port the start cannot reach, as one plain line.
import type { Config } from './schema.ts';
import { StartError } from '../errors/config.ts';
import { maskUrl } from './describe.ts';

// Re-exported for main.ts, which imports it with the functions below.
export { StartError } from '../errors/config.ts';

/** System and PostgreSQL error codes in words. */
const REASONS: Record<string, string> = {
  EADDRINUSE: 'the address is already in use by another process',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'no such address on this machine',
  ECONNREFUSED: 'connection refused (nothing listens there)',
  ECONNRESET: 'the connection was reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (name lookup failed)',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  '28P01': 'password authentication failed',
  '28000': 'the server refused this user',
  '3D000': 'the database does not exist',
  '57P03': 'the server is starting up or shutting down',
  '53300': 'too many connections',
};

interface Coded {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
}

/** The code of an error, or of the first one an AggregateError holds (a host with several addresses). */
function codeOf(err: unknown): string | undefined {
  const e = err as Coded | undefined;
  if (typeof e?.code === 'string') return e.code;
  if (Array.isArray(e?.errors)) return codeOf(e.errors[0]);
  return undefined;
}

function reason(err: unknown): string {
  const code = codeOf(err);
  if (code && REASONS[code]) return `${REASONS[code]}${/^E/.test(code) ? ` (${code})` : ''}`;
  const message = err instanceof Error ? err.message : String(err);
  // ioredis rejects a first connection that failed with this alone.
  if (message === 'Connection is closed.') return 'no answer (connection refused or closed)';
  const line = maskUrl(message.split('\n')[0] ?? '').trim();
  return line || (code ?? 'unknown error');
}

/** True when the error is about reaching something (network, file system, PostgreSQL login), not a bug. */
function outsideProblem(err: unknown): boolean {
  const code = codeOf(err);
  if (code && (/^E[A-Z_]+$/.test(code) || /^(08|28|3D|57P|53)/.test(code))) return true;
  const message = err instanceof Error ? err.message : '';
  return /timeout|timed out|connect|Connection is closed|getaddrinfo|Invalid URL|^(WRONGPASS|NOAUTH|ERR AUTH)/i.test(message);
}

/** The storage did not open: the database (DATABASE_URL) or the data folder (DATA_DIR). */
export function storageStartError(err: unknown, cfg: Config): unknown {
  if (!outsideProblem(err)) return err;
  if (cfg.storage.databaseUrl) return new StartError(`DATABASE_URL: cannot reach the database at ${maskUrl(cfg.storage.databaseUrl)}: ${reason(err)}`);
  return new StartError(`DATA_DIR: cannot open the embedded database in ${cfg.storage.dataDir}: ${reason(err)}`);
}

/** Redis (REDIS_URL, or the Redis Cluster of REDIS_CLUSTER_NODES) did not answer. */
export function redisStartError(err: unknown, url: string, setting = 'REDIS_URL'): unknown {
  if (!outsideProblem(err)) return err;
  return new StartError(redisUnreachable(err, url, setting));
}

/** The words of a Redis that did not answer: a refused start, or (C48) a start that goes on without it. */
export function redisUnreachable(err: unknown, url: string, setting = 'REDIS_URL'): string {
  return `${setting}: cannot reach Redis at ${maskUrl(url)}: ${reason(err)}`;
}

/** The listener could not open (a port in use, an address not of this machine, a privileged port). */
export function listenStartError(err: unknown, cfg: Config): unknown {
  if (!outsideProblem(err)) return err;
  const { host, port } = cfg.server;
  return new StartError(`PORT=${port}, HOST=${host}: cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port}: ${reason(err)}`);
}
