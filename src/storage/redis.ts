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
  redis.on('error', () => {});
  await redis.connect();
  return redis;
}
