import type { Redis } from 'ioredis';
import type { Check, CheckState, ConsumeResult, CounterSeed, Limiter } from './limiter.ts';

// All checks of one request in one script: atomic under concurrency, one round trip (C12).
// Time comes from Redis (TIME), so instances with skewed clocks share one notion of "now".
// Windows are sorted sets of request timestamps (a sliding log); counters are plain integers.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local used = {}
local ok = 1
for i = 1, n do
  local b = (i - 1) * 4
  local kind, limit, p, cost = ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local c
  if kind == 'w' then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - p)
    c = redis.call('ZCARD', KEYS[i])
  else
    c = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
  used[i] = c
  if c + cost > limit then ok = 0 end
end
local out = { ok, now }
for i = 1, n do
  local b = (i - 1) * 4
  local kind, limit, p, cost = ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local key = KEYS[i]
  local c = used[i]
  local fits = (c + cost <= limit) and 1 or 0
  local after = c
  if ok == 1 then after = c + cost end
  local reset, retry = 0, 0
  if kind == 'w' then
    if ok == 1 and cost > 0 then
      local seq = redis.call('INCRBY', key .. ':seq', cost)
      local args = {}
      for j = 1, cost do
        args[#args + 1] = now
        args[#args + 1] = seq - cost + j
      end
      redis.call('ZADD', key, unpack(args))
      redis.call('PEXPIRE', key, p)
      redis.call('PEXPIRE', key .. ':seq', p)
    end
    reset = now
    if after > 0 then
      local o = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      if o[2] then reset = tonumber(o[2]) + p end
    end
    if fits == 0 then
      if cost > limit then retry = p else
        local e = redis.call('ZRANGE', key, c + cost - limit - 1, c + cost - limit - 1, 'WITHSCORES')
        retry = math.max(1, tonumber(e[2]) + p - now)
      end
    end
  else
    if ok == 1 and cost > 0 then
      redis.call('INCRBY', key, cost)
      redis.call('PEXPIREAT', key, p + 3600000)
    end
    reset = p
    if fits == 0 then retry = math.max(1, p - now) end
  end
  out[#out + 1] = fits
  out[#out + 1] = math.max(0, limit - after)
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
`;

// Gives back an admitted reservation: the newest entries of a window, or part of a counter.
const REFUND = `
for i = 1, #KEYS do
  local kind, cost = ARGV[(i - 1) * 2 + 1], tonumber(ARGV[(i - 1) * 2 + 2])
  if cost > 0 then
    if kind == 'w' then
      redis.call('ZPOPMAX', KEYS[i], cost)
    else
      local v = tonumber(redis.call('GET', KEYS[i]) or '0')
      if v > 0 then redis.call('DECRBY', KEYS[i], math.min(v, cost)) end
    end
  end
end
return 1
`;

/**
 * Limits shared by every instance through Redis (REDIS_URL). Counter keys carry their period in
 * the name (e.g. the UTC day), so `resetAt` only sets when Redis may forget them.
 */
export class RedisLimiter implements Limiter {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(redis: Redis, opts: { prefix?: string } = {}) {
    this.#redis = redis;
    this.#prefix = opts.prefix ?? 'junction:rl:';
    if (!('junctionLimit' in redis)) {
      redis.defineCommand('junctionLimit', { lua: SCRIPT });
    }
    if (!('junctionRefund' in redis)) {
      redis.defineCommand('junctionRefund', { lua: REFUND });
    }
  }

  async refund(checks: readonly Check[]): Promise<void> {
    if (checks.length === 0) return;
    const argv = checks.flatMap((c) => [c.kind === 'window' ? 'w' : 'c', c.cost]);
    await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).junctionRefund?.(
      checks.length,
      ...checks.map((c) => this.#prefix + c.key),
      ...argv,
    );
  }

  async consume(checks: readonly Check[]): Promise<ConsumeResult> {
    if (checks.length === 0) return { allowed: true, states: [] };
    const keys = checks.map((c) => this.#prefix + c.key);
    const argv: Array<string | number> = [];
    for (const c of checks) {
      argv.push(c.kind === 'window' ? 'w' : 'c', c.limit, c.kind === 'window' ? c.windowMs : c.resetAt, c.cost);
    }
    const raw = (await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<number[]>>).junctionLimit?.(
      keys.length,
      ...keys,
      ...argv,
    )) as number[];
    const states: CheckState[] = checks.map((_, i) => ({
      allowed: raw[2 + i * 4] === 1,
      remaining: Number(raw[3 + i * 4]),
      resetAt: Number(raw[4 + i * 4]),
      retryAfterMs: Number(raw[5 + i * 4]),
    }));
    return { allowed: raw[0] === 1, states };
  }

  /**
   * Nothing to do: these counters live in Redis and survive a restart of the gateway; adding
   * stored usage to them would count it twice.
   */
  async seed(_counters: readonly CounterSeed[]): Promise<void> {}

  /** Nothing runs in the background: Redis forgets idle keys itself (their expiry). */
  start(): void {}

  async close(): Promise<void> {
    // The connection belongs to the caller.
  }
}
