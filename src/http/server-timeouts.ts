// Timeouts of the HTTP server: what a slow or silent client may hold (config `server.*`).
import type http from 'node:http';
import type { ServerConfig } from '../config/schema.ts';

/** Node reads this property when listening starts (`http.createServer`'s option of the same name); @types/node omits it. */
export type CheckedServer = http.Server & { connectionsCheckingInterval: number };

/** How often Node looks for requests past their deadline, at most: a slow client is cut within this after its timeout. */
const MAX_CHECK_INTERVAL_MS = 1000;

/**
 * Bounds what a slow or silent client can hold on the gateway's HTTP server (config `server.*`):
 * - `headersTimeoutMs`: a request's headers (from the first byte, or from the connection for a
 *   new one) must be complete within this; else 408 and the connection closes;
 * - `requestTimeoutMs`: the whole request, headers and body, must be received within this; a
 *   stalled or trickled body is cut the same way. Time spent answering does not count;
 * - `keepAliveTimeoutMs`: a keep-alive connection with no request for this long is closed
 *   (announced in the `Keep-Alive: timeout=` header; Node closes it a second after that).
 * Node enforces the first two from a periodic check, set here to run at least every second.
 *
 * Call it before the server listens (the check interval is read when listening starts). It
 * overrides whatever the server was created with (Fastify's `requestTimeout: 0`, for one).
 */
export function applyServerTimeouts(server: http.Server, settings: Pick<ServerConfig, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'>): void {
  if (server.listening) throw new Error('applyServerTimeouts: call it before the server listens');
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = settings;
  server.headersTimeout = headersTimeoutMs;
  server.requestTimeout = requestTimeoutMs;
  server.keepAliveTimeout = keepAliveTimeoutMs;
  const shortest = Math.min(...[headersTimeoutMs, requestTimeoutMs].filter((ms) => ms > 0));
  (server as CheckedServer).connectionsCheckingInterval = Number.isFinite(shortest)
    ? Math.max(1, Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(shortest / 4)))
    : MAX_CHECK_INTERVAL_MS;
}
