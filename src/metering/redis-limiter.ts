import { isCluster, type RedisClient, type RedisLink } from '../storage/redis.ts';
import { type Check, type CheckState, type ConsumeResult, type CounterSeed, type Limiter, MemoryLimiter } from './limiter.ts';

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

// C48: writes back, when Redis answers again, the counters counted meanwhile. Each key becomes
// max(its value + what this instance counted in memory, the floor this instance knows): Redis that
// kept its data gets the outage's requests added; Redis that lost them gets the last count known
// plus those requests. Never lowered, so instances writing back one after the other add up.
const RESTORE = `
for i = 1, #KEYS do
  local b = (i - 1) * 3
  local owed, floor, expireAt = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local v = tonumber(redis.call('GET', KEYS[i]) or '0') + owed
  if v < floor then v = floor end
  redis.call('SET', KEYS[i], v)
  redis.call('PEXPIREAT', KEYS[i], expireAt)
end
return 1
`;

/** A counter's value, epoch ms when its period ends. */
interface Count {
  value: number;
  resetAt: number;
  shard?: string | undefined;
}

const RESTORE_CHUNK = 200;
/** Scripts of a write-back in flight at once (a Redis Cluster: one per shard). */
const RESTORE_PARALLEL = 16;

interface Row {
  key: string;
  shard: string | undefined;
  owed: number;
  floor: number;
  resetAt: number;
}

function chunks<T>(rows: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}

function groupBy<T>(rows: readonly T[], by: (row: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const r of rows) {
    const k = by(r);
    const g = out.get(k);
    if (g) g.push(r);
    else out.set(k, [r]);
  }
  return out;
}

/**
 * Limits shared by every instance through Redis (REDIS_URL). Counter keys carry their period in
 * the name (e.g. the UTC day), so `resetAt` only sets when Redis may forget them.
 *
 * With a `link` (C48), a call that fails or times out marks Redis as away, and from then on every
 * limit is enforced in this process (a `MemoryLimiter`: a key gets at most its limit per instance,
 * never unlimited) until the link's probe finds Redis again. The daily and monthly counters do not
 * start from zero in memory: they start from the last count Redis gave for each (noted on every
 * answer, in place) or from stored usage, whichever is higher, and what was counted in memory is
 * written back before shared limits resume. Per-minute windows start empty in memory.
 */
export class RedisLimiter implements Limiter {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  /** A Redis Cluster: each key carries its shard as a hash tag, so one call's keys share a slot. */
  readonly #tagged: boolean;
  readonly #link: RedisLink | undefined;
  #local = new MemoryLimiter();
  /** The last value Redis (or stored usage) gave for each counter: where memory starts from. */
  readonly #known = new Map<string, Count>();
  /** What memory admitted on counters while Redis was away: written back when it answers. */
  #owed = new Map<string, Count>();
  #sweep: NodeJS.Timeout | undefined;
  /** Calls whose limits were enforced in memory because Redis did not answer (metrics). */
  memoryCalls = 0;

  constructor(redis: RedisClient, opts: { prefix?: string; link?: RedisLink } = {}) {
    this.#redis = redis;
    this.#prefix = opts.prefix ?? 'junction:rl:';
    this.#tagged = isCluster(redis);
    this.#link = opts.link;
    if (!('junctionLimit' in redis)) {
      redis.defineCommand('junctionLimit', { lua: SCRIPT });
    }
    if (!('junctionRefund' in redis)) {
      redis.defineCommand('junctionRefund', { lua: REFUND });
    }
    if (!('junctionRestore' in redis)) {
      redis.defineCommand('junctionRestore', { lua: RESTORE });
    }
    opts.link?.onChange((up) => (up ? this.#resumed() : this.#degraded()));
    opts.link?.onRecover(() => this.#writeBack());
  }

  async refund(checks: readonly Check[]): Promise<void> {
    if (checks.length === 0) return;
    if (this.#link && !this.#link.up) return this.#refundLocal(checks);
    const argv = checks.flatMap((c) => [c.kind === 'window' ? 'w' : 'c', c.cost]);
    try {
      await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).junctionRefund?.(
        checks.length,
        ...checks.map((c) => this.#name(c.key, c.shard)),
        ...argv,
      );
    } catch (err) {
      if (!this.#link) throw err;
      // The reservation was made in Redis: nothing to give back in memory.
      this.#link.failed(err);
    }
  }

  async consume(checks: readonly Check[]): Promise<ConsumeResult> {
    if (checks.length === 0) return { allowed: true, states: [] };
    // C48: while Redis is away no call waits for it.
    if (this.#link && !this.#link.up) return this.#consumeLocal(checks);
    const keys = checks.map((c) => this.#name(c.key, c.shard));
    const argv: Array<string | number> = [];
    for (const c of checks) {
      argv.push(c.kind === 'window' ? 'w' : 'c', c.limit, c.kind === 'window' ? c.windowMs : c.resetAt, c.cost);
    }
    let raw: number[];
    try {
      raw = (await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<number[]>>).junctionLimit?.(
        keys.length,
        ...keys,
        ...argv,
      )) as number[];
    } catch (err) {
      // No answer within redis.commandTimeoutMs, or none at all: this call and the next ones in memory.
      if (!this.#link) throw err;
      this.#link.failed(err);
      return this.#consumeLocal(checks);
    }
    const states: CheckState[] = checks.map((c, i) => {
      const remaining = Number(raw[3 + i * 4]);
      // Where memory would start this counter from (C48): updated in place, no allocation once known.
      if (c.kind === 'counter') this.#note(c.key, c.limit - remaining, c.resetAt, c.shard);
      return { allowed: raw[2 + i * 4] === 1, remaining, resetAt: Number(raw[4 + i * 4]), retryAfterMs: Number(raw[5 + i * 4]) };
    });
    return { allowed: raw[0] === 1, states };
  }

  /**
   * Redis counters survive a restart of the gateway, so adding stored usage to them would count it
   * twice: stored usage only raises where memory would start from while Redis is away (C48).
   */
  async seed(counters: readonly CounterSeed[]): Promise<void> {
    for (const s of counters) if (s.value > 0) this.#note(s.key, s.value, s.resetAt, s.shard);
    if (this.#link && !this.#link.up) await this.#local.seed(counters);
  }

  /** Forgets counters whose period is over (Redis forgets its keys itself, by their expiry). */
  start(): void {
    if (!this.#link || this.#sweep) return;
    this.#sweep = setInterval(() => {
      const now = Date.now();
      for (const [k, c] of this.#known) if (c.resetAt <= now) this.#known.delete(k);
    }, 60_000);
    this.#sweep.unref();
  }

  async close(): Promise<void> {
    // The connection belongs to the caller.
    clearInterval(this.#sweep);
    this.#sweep = undefined;
    await this.#local.close();
  }

  /**
   * The Redis key of a limiter key. On a Redis Cluster the shard comes first as a hash tag
   * (`junction:rl:{<account>}:d:<account>:<day>`): the checks of one call, and the `:seq` key of a
   * window, hash to one slot, so each script runs on one node (no CROSSSLOT). On a single Redis
   * the names stay as they were, so counters survive an upgrade.
   */
  #name(key: string, shard: string | undefined): string {
    return this.#tagged ? `${this.#prefix}{${shard ?? key}}:${key}` : this.#prefix + key;
  }

  #note(key: string, value: number, resetAt: number, shard?: string): void {
    const k = this.#known.get(key);
    if (!k) this.#known.set(key, { value, resetAt, shard });
    else if (k.resetAt !== resetAt) {
      k.value = value;
      k.resetAt = resetAt;
    } else if (value > k.value) k.value = value;
  }

  #consumeLocal(checks: readonly Check[]): ConsumeResult {
    this.memoryCalls++;
    const result = this.#local.consumeSync(checks);
    if (result.allowed) {
      for (const c of checks) {
        if (c.kind !== 'counter' || c.cost <= 0) continue;
        const o = this.#owed.get(c.key);
        if (o && o.resetAt === c.resetAt) o.value += c.cost;
        else this.#owed.set(c.key, { value: c.cost, resetAt: c.resetAt, shard: c.shard });
      }
    }
    return result;
  }

  async #refundLocal(checks: readonly Check[]): Promise<void> {
    await this.#local.refund(checks);
    for (const c of checks) {
      const o = c.kind === 'counter' ? this.#owed.get(c.key) : undefined;
      if (o) o.value = Math.max(0, o.value - c.cost);
    }
  }

  /** Redis went away: memory starts each counter from the last count known (C48). */
  #degraded(): void {
    const now = Date.now();
    const seeds: CounterSeed[] = [];
    for (const [key, c] of this.#known) if (c.resetAt > now) seeds.push({ key, value: c.value, resetAt: c.resetAt, shard: c.shard });
    void this.#local.seed(seeds);
  }

  /** Shared limits again: memory starts afresh for the next outage; anything counted since the write-back goes to Redis too. */
  #resumed(): void {
    void this.#local.close();
    this.#local = new MemoryLimiter();
    if (this.#owed.size > 0) this.#writeBack().catch((err: unknown) => this.#link?.failed(err));
  }

  /**
   * Raises every counter in Redis to what this instance knows: the last count known plus what
   * memory admitted meanwhile. Counted requests taken out first and put back if Redis fails, so
   * that requests admitted during the write-back are written by the next round.
   */
  async #writeBack(): Promise<void> {
    const now = Date.now();
    const owed = this.#owed;
    this.#owed = new Map();
    const rows: Row[] = [];
    for (const [key, o] of owed) {
      if (o.resetAt <= now) continue;
      const k = this.#known.get(key);
      const base = k && k.resetAt === o.resetAt ? k.value : 0;
      rows.push({ key, shard: o.shard ?? k?.shard, owed: o.value, floor: base + o.value, resetAt: o.resetAt });
    }
    for (const [key, k] of this.#known) {
      if (k.resetAt > now && !owed.has(key)) rows.push({ key, shard: k.shard, owed: 0, floor: k.value, resetAt: k.resetAt });
    }
    try {
      // On a Redis Cluster one script per shard (its keys share a slot), a few at a time; a
      // failed one (its primary away) keeps its rows owed for the next round.
      const batches = this.#tagged ? [...groupBy(rows, (r) => r.shard ?? r.key).values()] : chunks(rows, RESTORE_CHUNK);
      let failure: Error | undefined;
      for (let i = 0; i < batches.length; i += RESTORE_PARALLEL) {
        await Promise.all(
          batches.slice(i, i + RESTORE_PARALLEL).map(async (batch) => {
            for (const chunk of chunks(batch, RESTORE_CHUNK)) {
              try {
                await this.#restore(chunk);
              } catch (err) {
                failure ??= err instanceof Error ? err : new Error(String(err));
                return;
              }
              // Written: those requests are part of the last count known now.
              for (const r of chunk) this.#note(r.key, r.floor, r.resetAt, r.shard);
              for (const r of chunk) owed.delete(r.key);
            }
          }),
        );
      }
      if (failure !== undefined) throw failure;
    } catch (err) {
      for (const [key, o] of owed) {
        const now2 = this.#owed.get(key);
        if (now2 && now2.resetAt === o.resetAt) now2.value += o.value;
        else this.#owed.set(key, o);
      }
      throw err;
    }
  }

  async #restore(chunk: readonly Row[]): Promise<void> {
    await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).junctionRestore?.(
      chunk.length,
      ...chunk.map((r) => this.#name(r.key, r.shard)),
      // Kept an hour past the period's end, as the limit script does.
      ...chunk.flatMap((r) => [r.owed, r.floor, r.resetAt + 3_600_000]),
    );
  }
}
