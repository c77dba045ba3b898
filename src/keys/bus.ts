import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { KeyCache } from './cache.ts';
import type { KeyChange, KeyService } from './service.ts';

const CHANNEL = 'junction:key-changes';

/**
 * Carries key changes between instances over Redis pub/sub (C20: honoured by every instance
 * within 1 s). Local changes are published; changes from other instances are replayed locally,
 * which evicts them from this instance's key cache. After a lost connection the whole cache is
 * dropped, since changes may have been missed meanwhile.
 */
export class KeyChangeBus {
  readonly #sub: Redis;
  readonly #pub: Redis;
  readonly #keys: KeyService;
  readonly #log: Logger;
  readonly #origin = randomUUID();
  #off: (() => void) | undefined;

  /** Opens nothing: the subscription is made by `start` (C20 holds from the app's start on). */
  constructor(redis: Redis, keys: KeyService, cache: KeyCache, log: Logger) {
    this.#pub = redis;
    this.#keys = keys;
    this.#log = log;
    // A subscribed connection can do nothing else: a dedicated one (with its offline queue, so the
    // subscription is restored after a reconnect), made lazily: it connects in `start`.
    const sub = redis.duplicate({ enableOfflineQueue: true, lazyConnect: true });
    this.#sub = sub;
    sub.on('error', () => {});
    sub.on('message', (_channel: string, message: string) => {
      try {
        const { origin, change } = JSON.parse(message) as { origin: string; change: KeyChange };
        if (origin !== this.#origin) keys.emit(change, true);
      } catch {
        log.warn('ignored a malformed key-change message');
      }
    });
    let connectedOnce = false;
    sub.on('ready', () => {
      if (connectedOnce) cache.clear();
      connectedOnce = true;
    });
  }

  /** Subscribes, then publishes this instance's key changes. */
  async start(): Promise<void> {
    if (this.#off) return;
    await this.#sub.connect();
    await this.#sub.subscribe(CHANNEL);
    this.#off = this.#keys.onChange((change, remote) => {
      if (remote) return;
      this.#pub.publish(CHANNEL, JSON.stringify({ origin: this.#origin, change })).catch((err: Error) => {
        this.#log.warn({ error: err.message }, 'could not publish a key change; other instances see it when their cache entry expires');
      });
    });
  }

  async close(): Promise<void> {
    this.#off?.();
    this.#off = undefined;
    this.#sub.disconnect();
  }
}
