import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import type { PlanLimits } from '../../src/config/schema.ts';
import { type Check, MemoryLimiter } from '../../src/metering/limiter.ts';
import { Meter, type MeteredKey } from '../../src/metering/meter.ts';

/** The in-process limiter, counting the checks it is asked about. */
class CountingLimiter extends MemoryLimiter {
  asked = 0;
  override consumeSync(checks: readonly Check[]) {
    this.asked++;
    return super.consumeSync(checks);
  }
}

const NO_LIMITS = { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } as unknown as PlanLimits;
const key = (limits: Partial<PlanLimits>, rateLimit: number | null = null): MeteredKey => ({
  keyId: 'k1',
  userId: 'u1',
  rateLimit,
  limits: { ...NO_LIMITS, ...limits },
});
const C13_UNLIMITED = { 'x-ratelimit-limit': '-1', 'x-ratelimit-remaining': '-1', 'x-ratelimit-reset': '-1', 'x-cu-remaining': '-1' };

test('C13: a key without any limit is admitted with every header -1, and the limiter is not asked per call', async () => {
  const limiter = new CountingLimiter();
  const meter = new Meter(loadConfig({ env: {} }).limits, limiter);
  const unlimited = key({});
  for (let i = 0; i < 3; i++) {
    const now = meter.rpcNow({ key: unlimited }, 1, 10);
    assert.equal(now?.error, null);
    assert.deepEqual({ ...now?.headers }, C13_UNLIMITED);
    const later = await meter.rpc({ key: unlimited }, 1, 10);
    assert.equal(later.error, null);
    assert.deepEqual({ ...later.headers }, C13_UNLIMITED);
  }
  assert.equal(limiter.asked, 0);
});

test('C13: one limit, of the key or of its plan, and the limiter counts every call again', () => {
  for (const limited of [key({}, 5), key({ requestsPerMinute: 5 }), key({ dailyLimit: 5 }), key({ monthlyComputeUnits: 50 })]) {
    const limiter = new CountingLimiter();
    const meter = new Meter(loadConfig({ env: {} }).limits, limiter);
    const out = meter.rpcNow({ key: limited }, 1, 10);
    assert.equal(out?.error, null);
    assert.equal(limiter.asked, 1);
  }
});
