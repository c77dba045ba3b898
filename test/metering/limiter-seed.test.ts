// C10, C11: after a restart the in-process quota counters start from stored usage
// (MemoryLimiter.seed, src/metering/limiter.ts), on a clock of the test's own. The quotas across a
// real restart of the gateway: test/metering/quota-restart.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryLimiter } from '../../src/metering/limiter.ts';
import { manualClock } from '../support/clock.ts';

test('seeding raises an in-process counter to the stored value, never lowers it, and seeding twice counts once', async () => {
  const clock = manualClock();
  const limiter = new MemoryLimiter({ now: clock.now });
  const resetAt = clock.now() + 60_000;
  const check = { kind: 'counter' as const, key: 'd:u', limit: 10, resetAt, cost: 1 };
  try {
    await limiter.seed([{ key: 'd:u', value: 4, resetAt }]);
    await limiter.seed([{ key: 'd:u', value: 4, resetAt }]);
    assert.equal((await limiter.consume([check])).states[0]?.remaining, 5);
    await limiter.seed([{ key: 'd:u', value: 2, resetAt }]);
    assert.equal((await limiter.consume([check])).states[0]?.remaining, 4, 'not lowered');
    await limiter.seed([{ key: 'd:old', value: 9, resetAt: clock.now() - 1 }]);
    assert.equal((await limiter.consume([{ ...check, key: 'd:old' }])).states[0]?.remaining, 9, 'a period already over is not seeded');
  } finally {
    await limiter.close();
  }
});
