// Carries key changes between instances over Redis pub/sub (C20), so every instance's cache follows.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { isCluster, type RedisClient, type RedisLink } from '../storage/redis.ts';
import type { KeyCache } from './cache.ts';
import type { KeyChange } from './changes.ts';
import type { KeyService } from './service.ts';

const CHANNEL = 'junction:key-changes';
/** Changes kept while Redis is away; past this, one message that clears every instance's cache. */
const MAX_PENDING = 1_000;

/**
 * Carries key changes between instances over Redis pub/sub (C20: honoured by every instance
 * within 1 s). Local changes are published; changes from other instances are replayed locally,
 * which evicts them from this instance's key cache. After a lost connection the whole cache is
 * dropped, since changes may have been missed meanwhile.
 *
 * C48: a change that could not be published (Redis away) is kept and published when Redis answers
 * again, so other instances are not left with a stale key until their cache entry expires; and
 * when Redis answers again after an outage this instance drops its own cache too (an outage that
 * left the subscription's connection open, a hung Redis, misses messages all the same).
 */
export class KeyChangeBus {
  readonly #sub: RedisClient;
  readonly #pub: RedisClient;
  readonly #keys: KeyService;
  readonly #log: Logger;
  readonly #origin = randomUUID();
  readonly #link: RedisLink | undefined;
  readonly #cache: KeyCache;
  /** Changes not published yet; `all`: more than MAX_PENDING were missed. */
  #pending: KeyChange[] = [];
  #pendingAll = false;
  #off: (() => void) | undefined;
  /** The channel is not subscribed yet: the first connection has not been made (C48). */
  #subscribeWhenReady = false;

  /** Opens nothing: the subscription is made by `start` (C20 holds from the app's start on). */
  constructor(redis: RedisClient, keys: KeyService, cache: KeyCache, log: Logger, link?: RedisLink) {
    this.#pub = redis;
    this.#cache = cache;
    this.#link = link;
    this.#keys = keys;
    this.#log = log;
    // A subscribed connection can do nothing else: a dedicated one (with its offline queue, so the
    // subscription is restored after a reconnect), made lazily: it connects in `start`.
    // On a Redis Cluster, classic pub/sub (not sharded SSUBSCRIBE): a message published on any
    // node reaches every node, so the subscription lives on whichever node answers, and the client
    // moves it to another when that one fails; sharded channels live on one primary and would be
    // lost with it.
    const sub: RedisClient = isCluster(redis)
      ? redis.duplicate([], { enableOfflineQueue: true, lazyConnect: true })
      : redis.duplicate({ enableOfflineQueue: true, lazyConnect: true });
    this.#sub = sub;
    sub.on('error', () => {});
    sub.on('message', (_channel: string, message: string) => {
      try {
        const { origin, change, all } = JSON.parse(message) as { origin: string; change?: KeyChange; all?: boolean };
        if (origin === this.#origin) return;
        if (all) cache.clear();
        else if (change) keys.changes.emit(change, true);
      } catch {
        log.warn('ignored a malformed key-change message');
      }
    });
    let connectedOnce = false;
    sub.on('ready', () => {
      if (connectedOnce) cache.clear();
      connectedOnce = true;
      // A start without Redis (C48): the first connection that succeeds subscribes (ioredis
      // itself subscribes again after later reconnects, to channels it once subscribed to).
      if (this.#subscribeWhenReady) void this.#subscribe();
    });
  }

  async #subscribe(): Promise<void> {
    this.#subscribeWhenReady = false;
    try {
      await this.#sub.subscribe(CHANNEL);
    } catch (err) {
      // Lost again before the subscription was made: the next connection tries again.
      this.#subscribeWhenReady = true;
      this.#log.warn({ error: (err as Error).message }, 'could not subscribe to key changes; trying again when Redis answers');
    }
  }

  /**
   * Subscribes, then publishes this instance's key changes. C48: with Redis unreachable (a start
   * during an outage) the start goes on; the subscription is made when Redis answers, and the link's
   * recovery drops this instance's cache then, so nothing missed meanwhile is kept.
   */
  async start(): Promise<void> {
    if (this.#off) return;
    try {
      await this.#sub.connect();
      await this.#sub.subscribe(CHANNEL);
    } catch (err) {
      if (!this.#link) throw err;
      this.#link.failed(err);
      this.#subscribeWhenReady = true;
    }
    this.#link?.onChange((up) => {
      if (!up) return;
      this.#cache.clear();
      this.#flushPending();
    });
    this.#off = this.#keys.changes.on((change, remote) => {
      if (remote) return;
      if (this.#link && !this.#link.up) return this.#keep(change);
      this.#publish({ origin: this.#origin, change }, change);
    });
  }

  #publish(message: { origin: string; change?: KeyChange; all?: boolean }, change: KeyChange | undefined): void {
    this.#pub.publish(CHANNEL, JSON.stringify(message)).catch((err: Error) => {
      if (this.#link) {
        this.#link.failed(err);
        if (change) this.#keep(change);
        else this.#pendingAll = true;
        return;
      }
      this.#log.warn({ error: err.message }, 'could not publish a key change; other instances see it when their cache entry expires');
    });
  }

  #keep(change: KeyChange): void {
    if (this.#pendingAll) return;
    if (this.#pending.length >= MAX_PENDING) {
      this.#pending = [];
      this.#pendingAll = true;
    } else this.#pending.push(change);
  }

  /** C48: what was changed while Redis was away reaches the other instances now. */
  #flushPending(): void {
    const pending = this.#pending;
    const all = this.#pendingAll;
    this.#pending = [];
    this.#pendingAll = false;
    if (all) this.#publish({ origin: this.#origin, all: true }, undefined);
    else for (const change of pending) this.#publish({ origin: this.#origin, change }, change);
    if (all || pending.length) this.#log.info({ changes: all ? 'all' : pending.length }, 'published the key changes made while Redis was away');
  }

  async close(): Promise<void> {
    this.#off?.();
    this.#off = undefined;
    this.#sub.disconnect();
  }
}
