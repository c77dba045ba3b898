// C46, C27: answers of /usage/analytics and /usage/stats kept one flush interval (answer-cache.ts):
// one storage query for identical concurrent ones, never served past their time, dropped by a
// flush of their account. The class on a clock of its own; the routes on real storage:
// test/analytics/kept-answers.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AnswerCache } from '../../src/analytics/answer-cache.ts';
import { manualClock } from '../support/clock.ts';

/** A promise and its resolver: a storage query that answers when the test says so. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('AnswerCache (C46)', () => {
  const TTL = 2000;
  const clock = () => manualClock(1_000_000);

  test('identical queries asked together make one storage query; another query or account makes its own', async () => {
    const cache = new AnswerCache<number>({ ttlMs: TTL });
    const q = deferred<number>();
    let calls = 0;
    const compute = () => (calls++, q.promise);
    const asked = [cache.get('u1', 'a', compute), cache.get('u1', 'a', compute), cache.get('u1', 'a', compute)];
    const other = [cache.get('u1', 'b', async () => (calls++, 2)), cache.get('u2', 'a', async () => (calls++, 3))];
    q.resolve(1);
    assert.deepEqual(await Promise.all(asked), [1, 1, 1]);
    assert.deepEqual(await Promise.all(other), [2, 3]);
    assert.equal(calls, 3);
    assert.equal(cache.computed, 3);
  });

  test('an answer is served until one interval after its storage read, never later; in the second half it is read again behind the scenes', async () => {
    const c = clock();
    const cache = new AnswerCache<string>({ ttlMs: TTL, now: c.now });
    let version = 'v1';
    let reads = 0;
    const compute = async () => (reads++, version);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    // Stored elsewhere meanwhile (another instance's flush): the kept answer is served within the interval.
    version = 'v2';
    c.advance(TTL / 2 - 1);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    assert.equal(reads, 1);
    // Second half: still the kept answer at once, and a read behind it.
    c.advance(1);
    assert.equal(await cache.get('u', 'q', compute), 'v1');
    await new Promise((r) => setImmediate(r));
    assert.equal(reads, 2);
    assert.equal(await cache.get('u', 'q', compute), 'v2');
    // Not asked for a whole interval: never served past its time, read again before answering.
    version = 'v3';
    c.advance(TTL);
    assert.equal(await cache.get('u', 'q', compute), 'v3');
    assert.equal(reads, 3);
  });

  test('a flush of the account drops its answers at once; a query under way then is not kept, nor joined', async () => {
    const c = clock();
    const cache = new AnswerCache<string>({ ttlMs: TTL, now: c.now });
    assert.equal(await cache.get('u', 'q', async () => 'before'), 'before');
    assert.equal(await cache.get('other', 'q', async () => 'other'), 'other');
    // A query reading storage when the flush commits.
    const slow = deferred<string>();
    cache.invalidate(new Set(['u']));
    const racing = cache.get('u', 'q', () => slow.promise);
    cache.invalidate(new Set(['u']));
    // Asked after the flush: its own read, not the one under way.
    assert.equal(await cache.get('u', 'q', async () => 'after'), 'after');
    slow.resolve('racing');
    assert.equal(await racing, 'racing', 'those who asked before the flush get the read they waited for');
    assert.equal(await cache.get('u', 'q', async () => 'never'), 'after', 'the read that raced the flush is not kept over the later one');
    // Another account's answers stay.
    assert.equal(await cache.get('other', 'q', async () => 'never'), 'other');
    assert.equal(cache.size, 2);
  });

  test('a failed storage query is not kept', async () => {
    const cache = new AnswerCache<string>({ ttlMs: TTL });
    await assert.rejects(cache.get('u', 'q', async () => Promise.reject(new Error('storage away'))));
    assert.equal(await cache.get('u', 'q', async () => 'back'), 'back');
  });

  test('at most maxEntries answers are kept, the oldest dropped first', async () => {
    const cache = new AnswerCache<number>({ ttlMs: TTL, maxEntries: 2 });
    for (const q of ['a', 'b', 'c']) await cache.get('u', q, async () => 1);
    assert.equal(cache.size, 2);
    let reads = 0;
    await cache.get('u', 'a', async () => (reads++, 1));
    await cache.get('u', 'c', async () => (reads++, 1));
    assert.equal(reads, 1, 'a was dropped, c kept');
  });
});
