import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { type Check, type Limiter, MemoryLimiter, TimeLog } from '../../src/metering/limiter.ts';
import { RedisLimiter } from '../../src/metering/redis-limiter.ts';
import { RedisLink } from '../../src/storage/redis.ts';
import { pino } from 'pino';
import { REDIS_URL, serviceSkip } from '../support/services.ts';
import { manualClock } from '../support/clock.ts';
import { hasRedisServer, type OwnRedis, startOwnRedis } from '../support/redis-server.ts';
import { setTimeout as sleep } from 'node:timers/promises';

const redisSkip = await serviceSkip('Redis');

const win = (key: string, limit: number, windowMs: number, cost = 1): Check => ({ kind: 'window', key, limit, windowMs, cost });
const ctr = (key: string, limit: number, cost = 1, resetAt = Date.now() + 60_000): Check => ({ kind: 'counter', key, limit, resetAt, cost });

/**
 * One contract, two stores (C12): the same cases run on both. `clock` is the store's time: the
 * in-process store runs on a manual clock that the window tests advance; the Redis one takes its
 * time from Redis (TIME), so there time passes for real.
 */
interface Made {
  limiter: Limiter;
  done: () => Promise<void>;
  /** Now, on the store's clock (epoch ms). */
  now: () => number;
  /** Lets `ms` pass on the store's clock. */
  pass: (ms: number) => Promise<void>;
}
const stores: Array<{ name: string; skip: false | string; make: () => Promise<Made> }> = [
  {
    name: 'in-process',
    skip: false,
    make: async () => {
      const clock = manualClock();
      const limiter = new MemoryLimiter({ now: clock.now });
      return { limiter, done: () => limiter.close(), now: clock.now, pass: async (ms) => clock.advance(ms) };
    },
  },
  {
    name: 'Redis',
    skip: redisSkip,
    make: async () => {
      const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
      await redis.connect();
      const limiter = new RedisLimiter(redis, { prefix: `test:${randomUUID()}:` });
      return {
        limiter,
        done: async () => {
          await limiter.close();
          redis.disconnect();
        },
        now: Date.now,
        // Redis' own clock: waiting is the only way to move it.
        pass: (ms) => sleep(ms),
      };
    },
  },
];

for (const store of stores) {
  describe(`limiter contract on ${store.name} (C12)`, { skip: store.skip }, () => {
    let limiter: Limiter;
    let done: () => Promise<void>;
    let now: () => number;
    let pass: (ms: number) => Promise<void>;
    before(async () => {
      ({ limiter, done, now, pass } = await store.make());
    });
    after(() => done?.());

    test('a window admits exactly its limit, then refuses with a retry time within the window', async () => {
      const k = randomUUID();
      for (let i = 0; i < 5; i++) {
        const r = await limiter.consume([win(k, 5, 60_000)]);
        assert.equal(r.allowed, true);
        assert.equal(r.states[0]?.remaining, 4 - i);
      }
      const r = await limiter.consume([win(k, 5, 60_000)]);
      assert.equal(r.allowed, false);
      assert.equal(r.states[0]?.remaining, 0);
      assert.ok((r.states[0]?.retryAfterMs ?? 0) > 59_000 && (r.states[0]?.retryAfterMs ?? 0) <= 60_000);
      assert.ok((r.states[0]?.resetAt ?? 0) > now() + 59_000);
    });

    test('the window slides: requests leave one by one as they age, never a 2x burst at an edge', async () => {
      // The window's own timing is under test here. On Redis time passes for real: each step says
      // when it must happen, and a step that a busy machine delayed past its time (seen under load:
      // a 350 ms sleep ending after 600) proves nothing, so the run is redone.
      const W = 2_000;
      for (let attempt = 1; ; attempt++) {
        const k = randomUUID();
        const consume = async () => (await limiter.consume([win(k, 2, W)])).allowed;
        const t0 = now();
        assert.equal(await consume(), true);
        await pass(W / 2);
        const t1 = now();
        const second = await consume();
        const third = await consume();
        // The first request is still in the window at the third call.
        const inTime = now() - t0 < W - 100;
        await pass(Math.max(0, t0 + W + 100 - now())); // the first has left the window
        const fourth = await consume();
        const fifth = await consume();
        // ... and the second has not, at the fifth call.
        const onTime = inTime && now() - t1 < W - 100;
        if (!onTime && attempt < 3) continue;
        assert.ok(onTime, 'the machine was too busy three times to keep the steps in time');
        assert.deepEqual([second, third, fourth, fifth], [true, false, true, false]);
        return;
      }
    });

    test('a cost (a batch) is admitted whole or not at all, and a refusal consumes nothing', async () => {
      const k = randomUUID();
      assert.equal((await limiter.consume([win(k, 10, 60_000, 7)])).allowed, true);
      const refused = await limiter.consume([win(k, 10, 60_000, 4)]);
      assert.equal(refused.allowed, false);
      assert.equal(refused.states[0]?.remaining, 3, 'nothing consumed by the refused batch');
      assert.equal((await limiter.consume([win(k, 10, 60_000, 3)])).allowed, true);
    });

    test('several checks: one refusing means none is consumed', async () => {
      const a = randomUUID();
      const b = randomUUID();
      await limiter.consume([ctr(b, 3, 3)]);
      const r = await limiter.consume([win(a, 100, 60_000), ctr(b, 3)]);
      assert.equal(r.allowed, false);
      assert.equal(r.states[0]?.allowed, true, 'the window alone would admit');
      assert.equal(r.states[1]?.allowed, false);
      const again = await limiter.consume([win(a, 100, 60_000, 0)]);
      assert.equal(again.states[0]?.remaining, 100, 'the window was not consumed');
    });

    test('a counter counts up to its limit and reports its reset time', async () => {
      const k = randomUUID();
      const resetAt = Date.now() + 3_600_000;
      const r1 = await limiter.consume([ctr(k, 10, 6, resetAt)]);
      assert.equal(r1.states[0]?.remaining, 4);
      assert.equal(r1.states[0]?.resetAt, resetAt);
      const r2 = await limiter.consume([ctr(k, 10, 5, resetAt)]);
      assert.equal(r2.allowed, false);
      assert.ok((r2.states[0]?.retryAfterMs ?? 0) > 3_500_000);
    });

    test('cost 0 reads the state without consuming', async () => {
      const k = randomUUID();
      await limiter.consume([win(k, 5, 60_000, 2)]);
      const r = await limiter.consume([win(k, 5, 60_000, 0)]);
      assert.equal(r.allowed, true);
      assert.equal(r.states[0]?.remaining, 3);
      assert.equal((await limiter.consume([win(k, 5, 60_000, 0)])).states[0]?.remaining, 3);
    });

    test('50 concurrent requests against a limit of 10 admit exactly 10', async () => {
      const k = randomUUID();
      const d = randomUUID();
      const results = await Promise.all(Array.from({ length: 50 }, () => limiter.consume([win(k, 10, 60_000), ctr(d, 1000)])));
      assert.equal(results.filter((r) => r.allowed).length, 10);
      const state = await limiter.consume([ctr(d, 1000, 0)]);
      assert.equal(state.states[0]?.remaining, 990, 'only admitted requests were counted');
    });
  });
}

describe('a window log holds one run per millisecond, not one entry per request (C12)', () => {
  test('requests of one millisecond are one run; age, removal and pruning still go request by request', () => {
    const log = new TimeLog();
    for (let i = 0; i < 1000; i++) log.add(1_000, 1);
    log.add(1_001, 3);
    log.add(1_002, 0); // a cost of 0 adds nothing
    assert.equal(log.size, 1003);
    assert.equal(log.runs, 2, 'two milliseconds, two runs');
    assert.equal(log.at(0), 1_000);
    assert.equal(log.at(999), 1_000);
    assert.equal(log.at(1000), 1_001);
    assert.equal(log.at(1002), 1_001);
    assert.equal(log.newest(), 1_001);
    // The newest requests given back: across the boundary of two runs.
    log.removeNewest(5);
    assert.equal(log.size, 998);
    assert.equal(log.runs, 1);
    assert.equal(log.newest(), 1_000);
    log.add(1_003, 2);
    assert.deepEqual(log.values().slice(-3), [1_000, 1_003, 1_003]);
    log.prune(1_000); // everything at or before 1,000 leaves the window
    assert.equal(log.size, 2);
    assert.equal(log.at(0), 1_003);
    log.merge([1_002, 1_004]);
    assert.deepEqual(log.values(), [1_002, 1_003, 1_003, 1_004]);
    assert.equal(log.runs, 3);
  });

  test('a full window of many requests per millisecond admits exactly its limit and says when the oldest leaves', () => {
    const clock = manualClock(10_000);
    const limiter = new MemoryLimiter({ now: clock.now });
    // 50 requests in each of 100 milliseconds: 5,000 of a limit of 5,000.
    for (let ms = 0; ms < 100; ms++) {
      for (let i = 0; i < 50; i++) assert.equal(limiter.consumeSync([win('k', 5_000, 60_000)]).allowed, true);
      clock.advance(1);
    }
    const refused = limiter.consumeSync([win('k', 5_000, 60_000, 60)]);
    assert.equal(refused.allowed, false);
    // 60 must leave: the first millisecond's 50 and 10 of the second's, which leave 60 s after it.
    assert.equal(refused.states[0]?.retryAfterMs, 10_001 + 60_000 - clock.now());
    assert.equal(refused.states[0]?.resetAt, 10_000 + 60_000);
  });
});

describe('Redis limiter across an outage: windows carried into memory and back (C48)', { skip: redisSkip }, () => {
  let redis: Redis;
  const prefix = `test:${randomUUID()}:`;
  /** One instance: its own link to Redis, probed by the test (no timer). */
  const instance = () => {
    const link = new RedisLink(redis, { log: pino({ level: 'silent' }), probeMs: 3_600_000 });
    return { link, limiter: new RedisLimiter(redis, { prefix, link }) };
  };
  const fire = async (limiter: Limiter, key: string, n: number) =>
    (await Promise.all(Array.from({ length: n }, () => limiter.consume([win(key, 10, 60_000)])))).filter((r) => r.allowed).length;
  before(async () => {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  after(() => redis?.disconnect());

  test('Redis kept its data: the requests admitted in memory are added, the ones admitted through it are not counted twice', async () => {
    const { link, limiter } = instance();
    const k = randomUUID();
    assert.equal(await fire(limiter, k, 6), 6);
    link.failed(new Error('taken for away by the test'));
    assert.equal(await fire(limiter, k, 10), 4, 'memory starts from the 6 admitted through Redis');
    assert.equal(await link.probe(), true);
    assert.equal(await redis.zcard(prefix + k), 10);
    assert.equal(await fire(limiter, k, 5), 0);
    link.close();
    await limiter.close();
  });

  test('Redis came back empty: two instances put back what each admitted, through Redis and in memory; none admits more in the window', async () => {
    const a = instance();
    const b = instance();
    const k = randomUUID();
    assert.equal(await fire(a.limiter, k, 6), 6);
    a.link.failed(new Error('taken for away by the test'));
    b.link.failed(new Error('taken for away by the test'));
    // N instances: at most N x the limit while Redis is away; a only the rest of its own 10.
    assert.equal(await fire(a.limiter, k, 14), 4);
    assert.equal(await fire(b.limiter, k, 14), 10);
    await redis.del(prefix + k, `${prefix + k}:seq`);
    assert.equal(await a.link.probe(), true);
    assert.equal(await redis.zcard(prefix + k), 10, "a's 6 through Redis and 4 in memory");
    assert.equal(await b.link.probe(), true);
    assert.equal(await redis.zcard(prefix + k), 20, "b's 10 in memory added");
    assert.equal(await fire(a.limiter, k, 5), 0);
    assert.equal(await fire(b.limiter, k, 5), 0);
    for (const i of [a, b]) {
      i.link.close();
      await i.limiter.close();
    }
  });
});

describe('the in-process limiter answers into states its caller keeps (the meter, per key)', () => {
  test('consumeInto writes each check\'s state into the objects given, call after call, as consumeSync answers them', () => {
    const clock = manualClock(50_000);
    const a = new MemoryLimiter({ now: clock.now });
    const b = new MemoryLimiter({ now: clock.now });
    const resetAt = 50_000 + 3_600_000;
    const checks = [win('k', 3, 60_000), ctr('d', 4, 1, resetAt)];
    const states = checks.map(() => ({ allowed: false, remaining: -1, resetAt: -1, retryAfterMs: -1 }));
    const kept = [...states];
    for (let i = 0; i < 5; i++) {
      const allowed = a.consumeInto(checks, states);
      const expected = b.consumeSync(checks);
      assert.equal(allowed, expected.allowed, `call ${i}`);
      assert.deepEqual(states, expected.states, `call ${i}: the same states`);
      assert.ok(states.every((s, j) => s === kept[j]), 'the same objects, written anew');
      clock.advance(10);
    }
    // The fourth and fifth calls passed the window's 3: refused whole, the day's counter untouched.
    assert.deepEqual(states[0], { allowed: false, remaining: 0, resetAt: 50_000 + 60_000, retryAfterMs: 50_000 + 60_000 - clock.now() + 10 });
    assert.deepEqual(states[1], { allowed: true, remaining: 1, resetAt, retryAfterMs: 0 });
  });
});

describe('the limit script on Redis: its entries, its counters, the commands it runs (C12)', { skip: redisSkip || (hasRedisServer() ? false : 'no redis-server binary') }, () => {
  let own: OwnRedis;
  let redis: Redis;
  const prefix = 'junction:rl:';
  const checks = (k: string, windowLimit: number, counterLimit: number, resetAt: number): Check[] => [
    win(`k:${k}`, windowLimit, 60_000),
    win(`a:${k}`, 1_000, 60_000),
    ctr(`d:${k}`, counterLimit, 1, resetAt),
    ctr(`cu:${k}`, 1_000, 1, resetAt),
  ];
  /** Commands Redis ran since the last call, by name (the ones inside scripts included). */
  const commands = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_(\w+):calls=(\d+)/g)) out[m[1] as string] = Number(m[2]);
    await redis.config('RESETSTAT');
    return out;
  };
  const inside = (c: Record<string, number>) => Object.entries(c).filter(([name]) => name !== 'evalsha' && name !== 'eval' && name !== 'info' && name !== 'config' && name !== 'script').reduce((s, [, n]) => s + n, 0);
  before(async () => {
    // A Redis of its own: the command counts are this test's alone.
    own = await startOwnRedis();
    redis = new Redis(own.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  after(async () => {
    redis?.disconnect();
    await own?.close();
  });

  test('two instances at once on one window: every admitted call is one entry, exactly the limit', async () => {
    const a = new RedisLimiter(redis, { prefix });
    const b = new RedisLimiter(redis, { prefix });
    const resetAt = Date.now() + 3_600_000;
    // Many calls in the same millisecond from both: entries are named by each call, never by time.
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).consume(checks('both', 30, 1_000, resetAt))));
    assert.equal(results.filter((r) => r.allowed).length, 30);
    assert.equal(await redis.zcard(`${prefix}k:both`), 30);
    assert.equal(await redis.zcard(`${prefix}a:both`), 30, 'the looser window counts only what was admitted');
    assert.equal(await redis.get(`${prefix}d:both`), '30', 'the counters count only what was admitted');
    // A batch of 3 is 3 entries of one call.
    const batch = await a.consume([win('k:batch', 10, 60_000, 3)]);
    assert.equal(batch.allowed, true);
    assert.equal(await redis.zcard(`${prefix}k:batch`), 3);
    await a.close();
    await b.close();
  });

  test('a counter counted up at once is given back when another check refuses, and keeps its expiry', async () => {
    const l = new RedisLimiter(redis, { prefix });
    const resetAt = Date.now() + 3_600_000;
    assert.equal((await l.consume(checks('give-back', 1, 1_000, resetAt))).allowed, true);
    const ttl = await redis.pttl(`${prefix}d:give-back`);
    assert.ok(ttl > 3_600_000 && ttl <= 7_200_000, `an hour past the period's end, once (${ttl} ms)`);
    const refused = await l.consume(checks('give-back', 1, 1_000, resetAt));
    assert.equal(refused.allowed, false);
    assert.equal(refused.states[0]?.allowed, false, 'the window of 1 refused');
    assert.equal(refused.states[2]?.allowed, true, 'the counter alone would have admitted');
    assert.equal(refused.states[2]?.remaining, 999);
    assert.equal(await redis.get(`${prefix}d:give-back`), '1');
    assert.equal(await redis.get(`${prefix}cu:give-back`), '1');
    assert.ok((await redis.pttl(`${prefix}d:give-back`)) > 3_600_000, 'still expires');
    await l.close();
  });

  test('a call of two windows and two counters runs 13 Redis commands inside its script (21 before they were cut)', async () => {
    const l = new RedisLimiter(redis, { prefix });
    const resetAt = Date.now() + 3_600_000;
    await commands();
    await l.consume(checks('count', 1_000, 1_000, resetAt));
    // TIME; per window ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE (and ZRANGE for the oldest entry
    // when the window held one before); per counter INCRBY (and PEXPIREAT when it is new).
    const first = await commands();
    assert.equal(first.evalsha ?? first.eval, 1);
    assert.equal(inside(first), 13, JSON.stringify(first));
    assert.equal(first.pexpireat, 2, 'new counters get their expiry');
    await l.consume(checks('count', 1_000, 1_000, resetAt));
    const next = await commands();
    assert.equal(inside(next), 13, JSON.stringify(next));
    assert.equal(next.zrange, 2, 'the oldest entry of each window, now that there is one');
    assert.equal(next.pexpireat ?? 0, 0, 'a counter keeps the expiry it got');
    assert.equal(next.get ?? 0, 0, 'a counter is counted up, not read first');
    await l.close();
  });
});
