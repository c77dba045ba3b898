// An account's analytics and usage answers kept in memory a short while, and identical queries
// asked at once shared (C46, C27).
import type { FastifyReply } from 'fastify';
import { type Clock, systemClock } from '../time/clock.ts';

/**
 * C46 (and C27 for `/usage/stats`): an account's answers kept in memory a short while, and one
 * storage query for identical queries asked at the same time.
 *
 * The stored figures change only when a usage flush commits (analytics are flushed in the same
 * transaction, C46), so an answer is as fresh as the last flush anyway. How stale a served answer
 * may be:
 * - the flushes of this instance: not at all more than without the cache. Each committed flush
 *   drops the answers of the accounts it wrote (`invalidate`), and a query under way when it
 *   commits is handed to those already waiting on it but never kept, nor joined by later requests;
 * - everything else (another instance's flushes, a key renamed or deleted, rows swept): at most
 *   `ttlMs` (the usage flush interval, 2 s at most) after the storage read the answer came from.
 * An answer asked for in the second half of its time is read again in the background, the kept one
 * served meanwhile (never past its time): a query polled steadily does not wait on storage.
 */
export class AnswerCache<T> {
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: Clock;
  /** Answers by account and query; Map order is insertion order, so the first is the oldest. */
  readonly #entries = new Map<string, { userId: string; value: T; refreshAt: number; until: number }>();
  /** Queries under way by account and query: identical requests share one. */
  readonly #inflight = new Map<string, { userId: string; promise: Promise<T>; stale: boolean }>();
  /** Storage queries made (tests, the bench). */
  computed = 0;

  constructor(opts: { ttlMs: number; maxEntries?: number; now?: Clock }) {
    this.#ttlMs = opts.ttlMs;
    this.#maxEntries = opts.maxEntries ?? 256;
    this.#now = opts.now ?? systemClock;
  }

  /** The answer to `query` of `userId`: kept, under way, or computed now by `compute`. */
  get(userId: string, query: string, compute: () => Promise<T>): Promise<T> {
    const id = `${userId}\u0000${query}`;
    const now = this.#now();
    const hit = this.#entries.get(id);
    if (hit && hit.until > now) {
      if (hit.refreshAt <= now && !this.#inflight.has(id)) this.#compute(id, userId, compute, now).catch(() => {});
      return Promise.resolve(hit.value);
    }
    return this.#inflight.get(id)?.promise ?? this.#compute(id, userId, compute, now);
  }

  #compute(id: string, userId: string, compute: () => Promise<T>, now: number): Promise<T> {
    // Fresh from the moment storage is read, not from when the answer arrives.
    const refreshAt = now + this.#ttlMs / 2;
    const until = now + this.#ttlMs;
    const flight = { userId, promise: Promise.resolve().then(compute), stale: false };
    this.computed++;
    this.#inflight.set(id, flight);
    const done = () => {
      if (this.#inflight.get(id) === flight) this.#inflight.delete(id);
    };
    flight.promise.then((value) => {
      done();
      if (flight.stale || this.#ttlMs <= 0) return;
      this.#entries.delete(id);
      this.#entries.set(id, { userId, value, refreshAt, until });
      this.#evict();
    }, done);
    return flight.promise;
  }

  /** A flush of these accounts committed: their kept answers and queries under way are stale. */
  invalidate(userIds: ReadonlySet<string>): void {
    if (userIds.size === 0) return;
    for (const [id, e] of this.#entries) if (userIds.has(e.userId)) this.#entries.delete(id);
    for (const [id, f] of this.#inflight) {
      if (!userIds.has(f.userId)) continue;
      f.stale = true;
      this.#inflight.delete(id);
    }
  }

  /** Answers kept (tests). */
  get size(): number {
    return this.#entries.size;
  }

  /** The answers kept, oldest first (tests). */
  *kept(): IterableIterator<T> {
    for (const e of this.#entries.values()) yield e.value;
  }

  #evict(): void {
    if (this.#entries.size <= this.#maxEntries) return;
    const now = this.#now();
    for (const [id, e] of this.#entries) if (e.until <= now) this.#entries.delete(id);
    for (const id of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(id);
    }
  }
}

/**
 * A route's 200 answer `{success: true, data}` through `cache` (C46, C27), kept as the JSON body the
 * route's own response serializer wrote and sent as it is. For scale (docs/scaling.md): a kept
 * answer is one string, not the thousand-odd objects of a 7-day hourly answer that would live on
 * through every young-generation collection of its time and be promoted to the old one; and an
 * answer served again is not serialised again. Without a cache the body is serialised the same way.
 */
export async function sendKept(reply: FastifyReply, cache: AnswerCache<string> | undefined, userId: string, query: string, compute: () => Promise<unknown>): Promise<FastifyReply> {
  const serialise = async () => reply.serializeInput({ success: true, data: await compute() }, '200') as string;
  const body = cache ? await cache.get(userId, query, serialise) : await serialise();
  return reply.type('application/json; charset=utf-8').send(body);
}
