// The meter (C10-C13): limits checked per key or address, costs per call, the headers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import type { PlanLimits } from '../../src/config/schema.ts';
import { type Check, type CheckState, MemoryLimiter } from '../../src/metering/limiter.ts';
import { Meter, type MeteredKey } from '../../src/metering/meter.ts';

/** The in-process limiter, counting the times it is asked (`consumeSync` asks through `consumeInto`). */
class CountingLimiter extends MemoryLimiter {
  asked = 0;
  override consumeInto(checks: readonly Check[], states: CheckState[]) {
    this.asked++;
    return super.consumeInto(checks, states);
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

test('C10, C11: a key\'s checks are made once and each call given its own cost: requests to the rates and the day, compute units to the month', async () => {
  const meter = new Meter(loadConfig({ env: {} }).limits, new MemoryLimiter());
  const limited = key({ requestsPerMinute: 100, dailyLimit: 5, monthlyComputeUnits: 100 }, 50);
  // A batch of 2 calls costing 30 units, then single calls of other costs, in process and awaited in turns.
  const a = meter.rpcNow({ key: limited }, 2, 30);
  assert.equal(a?.error, null);
  assert.equal(a?.headers['x-ratelimit-remaining'], '48', 'the key\'s own 50 a minute, less the batch\'s 2');
  assert.equal(a?.headers['x-cu-remaining'], '70');
  const b = await meter.rpc({ key: limited }, 1, 45);
  assert.equal(b.error, null);
  assert.equal(b.headers['x-cu-remaining'], '25');
  const c = meter.rpcNow({ key: limited }, 1, 20);
  assert.equal(c?.error, null);
  assert.equal(c?.headers['x-ratelimit-remaining'], '46');
  assert.equal(c?.headers['x-cu-remaining'], '5');
  // 10 units do not fit the month's 5 left: refused whole, nothing consumed.
  const d = meter.rpcNow({ key: limited }, 1, 10);
  assert.equal(d?.error?.message, 'Monthly compute unit limit exceeded');
  assert.equal(d?.headers['x-cu-remaining'], '5');
  // The day's 5 requests: 4 used; one more fits, a second does not.
  assert.equal(meter.rpcNow({ key: limited }, 1, 0)?.error, null);
  assert.equal(meter.rpcNow({ key: limited }, 1, 0)?.error?.message, 'Daily request limit exceeded');
  // Another key of the account has checks of its own: its rate is its own, the account's day is shared.
  const other = { ...limited, keyId: 'k2' };
  assert.equal(meter.rpcNow({ key: other }, 1, 0)?.error?.message, 'Daily request limit exceeded');
});
