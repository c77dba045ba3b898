import type { Redis } from 'ioredis';

/**
 * The Redis connection for shared state (limits, key-change events) when REDIS_URL is set.
 * Commands fail fast while Redis is away instead of queueing without bound.
 */
export async function openRedis(url: string): Promise<Redis> {
  // Loaded only when configured: an embedded start does not pay for the client.
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 5_000,
  });
  // Reconnects are automatic; the error is reported by the commands that fail meanwhile.
  let firstError: unknown;
  redis.on('error', (err) => {
    firstError ??= err;
  });
  try {
    await redis.connect();
  } catch (err) {
    // The first connection failed: its cause (ECONNREFUSED, ENOTFOUND) rather than "Connection is closed".
    redis.disconnect();
    throw firstError ?? err;
  }
  return redis;
}
