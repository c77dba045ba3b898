// The shared rate and quota limiter on Redis (C12): one atomic script per request, and the
// counts kept while Redis is away (C48).
import { randomBytes } from 'node:crypto';
import { isCluster, type RedisClient, type RedisLink } from '../storage/redis.ts';
import { type Check, type CheckState, type ConsumeResult, type CounterSeed, type Limiter, MemoryLimiter, TimeLog, type WindowCheck } from './limiter.ts';

// All checks of one request in one script: atomic under concurrency, one round trip (C12).
// Time comes from Redis (TIME), so instances with skewed clocks share one notion of "now".
// Windows are sorted sets of request timestamps (a sliding log), each entry named by the call's
// token (ARGV after the checks: unique per limiter instance and call) and its place in the call's
// cost; counters are plain integers, counted up at once and given back when another check refuses.
// Redis runs Lua slowly next to its commands (a `tonumber` or a `redis.call` each cost about as
// much as a small command), so the script reads each argument once and calls Redis only for
// what it needs: 13 calls for two windows and two counters where there were 21 (bench/README.md,
// "The limit script on Redis").
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local token = ARGV[n * 4 + 1]
local used, L, P, C = {}, {}, {}, {}
local ok = 1
for i = 1, n do
  local b = (i - 1) * 4
  local key, kind, limit, p, cost = KEYS[i], ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  L[i], P[i], C[i] = limit, p, cost
  local c
  if kind == 'w' then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - p)
    c = redis.call('ZCARD', key)
  elseif cost > 0 then
    local after = redis.call('INCRBY', key, cost)
    if after == cost then redis.call('PEXPIREAT', key, p + 3600000) end
    c = after - cost
  else
    c = tonumber(redis.call('GET', key) or '0')
  end
  used[i] = c
  if c + cost > limit then ok = 0 end
end
local out = { ok, now }
for i = 1, n do
  local key, kind, limit, p, cost = KEYS[i], ARGV[(i - 1) * 4 + 1], L[i], P[i], C[i]
  local c = used[i]
  local fits = (c + cost <= limit) and 1 or 0
  local after = c
  if ok == 1 then after = c + cost end
  local reset, retry = 0, 0
  if kind == 'w' then
    if ok == 1 and cost > 0 then
      local args = {}
      for j = 1, cost do
        args[#args + 1] = now
        args[#args + 1] = token .. ':' .. j
      end
      redis.call('ZADD', key, unpack(args))
      redis.call('PEXPIRE', key, p)
    end
    reset = now
    if after > 0 and c == 0 then
      reset = now + p
    elseif after > 0 then
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
    if ok == 0 and cost > 0 then redis.call('DECRBY', key, cost) end
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

// C48: puts back, when Redis answers again, what this instance admitted on each window. Per key:
// the window's length, then the requests admitted in memory meanwhile (always added), then the
// ones admitted through Redis before (added only as far as the window holds fewer than they are:
// a Redis that kept its data has them already, one that came back empty gets them back, newest
// first). So the window holds at least this instance's own count of it, and instances writing
// back one after the other add up what each admitted in memory.
const RESTORE_WINDOWS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local a = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local p, owed, sent = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - p)
  local add = {}
  for j = 0, owed - 1 do
    local ts = tonumber(ARGV[a + j])
    if ts > now - p then add[#add + 1] = ts end
  end
  a = a + owed
  local before = {}
  for j = 0, sent - 1 do
    local ts = tonumber(ARGV[a + j])
    if ts > now - p then before[#before + 1] = ts end
  end
  a = a + sent
  local have, need = redis.call('ZCARD', key) + #add, #before + #add
  local k = #before
  while have < need and k >= 1 do
    add[#add + 1] = before[k]
    have = have + 1
    k = k - 1
  end
  if #add > 0 then
    local seq = redis.call('INCRBY', key .. ':seq', #add)
    for from = 1, #add, 1000 do
      local args = {}
      for j = from, math.min(#add, from + 999) do
        args[#args + 1] = add[j]
        args[#args + 1] = seq - #add + j
      end
      redis.call('ZADD', key, unpack(args))
    end
    redis.call('PEXPIRE', key, p)
    redis.call('PEXPIRE', key .. ':seq', p)
  end
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
/** Arguments of one window write-back script at most (a window of a large limit goes alone). */
const RESTORE_WINDOW_ARGS = 8_000;
/** Scripts of a write-back in flight at once (a Redis Cluster: one per shard). */
const RESTORE_PARALLEL = 16;

interface Row {
  key: string;
  shard: string | undefined;
  owed: number;
  floor: number;
  resetAt: number;
}

/**
 * What this instance admitted on one window (C48), in Redis' clock: through Redis (`sent`), and
 * in memory while Redis was away, not written back yet (`owed`).
 */
interface Mine {
  windowMs: number;
  shard: string | undefined;
  sent: TimeLog;
  owed: TimeLog;
}

interface WindowRow {
  key: string;
  shard: string | undefined;
  windowMs: number;
  owed: number[];
  sent: number[];
}

/** Rows in chunks of at most `budget` weight (a row heavier than that alone). */
function chunks<T>(rows: readonly T[], budget: number, weight: (row: T) => number = () => 1): T[][] {
  const out: T[][] = [];
  let chunk: T[] = [];
  let used = 0;
  for (const r of rows) {
    const w = weight(r);
    if (chunk.length > 0 && used + w > budget) {
      out.push(chunk);
      chunk = [];
      used = 0;
    }
    chunk.push(r);
    used += w;
  }
  if (chunk.length > 0) out.push(chunk);
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
 * Where a RedisLimiter enforces limits while Redis is away (C48): this process' memory, or with
 * WORKERS the primary's (`SharedLimiter`), so that the workers of one machine share one count.
 */
export interface Fallback {
  consume(checks: readonly Check[]): ConsumeResult | Promise<ConsumeResult>;
  refund(checks: readonly Check[]): Promise<void>;
  seed(counters: readonly CounterSeed[]): Promise<void>;
  /** As `MemoryLimiter.seedWindow`: requests this process admitted through Redis. */
  seedWindow(key: string, at: readonly number[]): void;
  /** Redis went away for this process: memory is in charge from now on (seeded next). */
  away(): void;
  /** Redis answers again: memory starts afresh for the next outage (once no other worker counts on it). */
  back(): void;
  close(): Promise<void>;
}

/** A seed the fallback did not take: only a worker's, when its primary is gone (the worker is stopping). */
const unseeded = (): void => {};

/** The fallback of one process: its own memory. */
class MemoryFallback implements Fallback {
  #memory = new MemoryLimiter();

  consume(checks: readonly Check[]): ConsumeResult {
    return this.#memory.consumeSync(checks);
  }

  refund(checks: readonly Check[]): Promise<void> {
    return this.#memory.refund(checks);
  }

  seed(counters: readonly CounterSeed[]): Promise<void> {
    return this.#memory.seed(counters);
  }

  seedWindow(key: string, at: readonly number[]): void {
    this.#memory.seedWindow(key, at);
  }

  away(): void {}

  back(): void {
    void this.#memory.close();
    this.#memory = new MemoryLimiter();
  }

  close(): Promise<void> {
    return this.#memory.close();
  }
}

/**
 * Limits shared by every instance through Redis (REDIS_URL). Counter keys carry their period in
 * the name (e.g. the UTC day), so `resetAt` only sets when Redis may forget them.
 *
 * With a `link` (C48), a call that fails or times out marks Redis as away, and from then on every
 * limit is enforced in memory (a `Fallback`: this process' own, or with WORKERS the primary's, one
 * for the machine: a key gets at most its limit per instance, never unlimited) until the link's
 * probe finds Redis again. The daily and monthly counters do not
 * start from zero in memory: they start from the last count Redis gave for each (noted on every
 * answer, in place) or from stored usage, whichever is higher, and what was counted in memory is
 * written back before shared limits resume. Windows (per minute, per hour) start in memory from
 * what this instance admitted in them through Redis, and go back to Redis with what it admitted
 * in memory, so one instance never admits more than a window's limit across the loss and the
 * return of Redis, even when Redis comes back empty.
 */
export class RedisLimiter implements Limiter {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  /** A Redis Cluster: each key carries its shard as a hash tag, so one call's keys share a slot. */
  readonly #tagged: boolean;
  readonly #link: RedisLink | undefined;
  readonly #local: Fallback;
  /** The last value Redis (or stored usage) gave for each counter: where memory starts from. */
  readonly #known = new Map<string, Count>();
  /** What memory admitted on counters while Redis was away: written back when it answers. */
  #owed = new Map<string, Count>();
  /** What this instance admitted on each window (only with a `link`: carried both ways, C48). */
  readonly #mine = new Map<string, Mine>();
  /** Redis' clock minus this process' (ms), from the latest answer: windows carried across are in Redis' time. */
  #skew = 0;
  #sweep: NodeJS.Timeout | undefined;
  /** Calls whose limits were enforced in memory because Redis did not answer (metrics). */
  memoryCalls = 0;
  /** With `#calls`, the token that names a call's entries in its windows: unique across instances and calls. */
  readonly #id = `${randomBytes(6).toString('base64url')}.`;
  #calls = 0;

  constructor(redis: RedisClient, opts: { prefix?: string; link?: RedisLink; fallback?: Fallback } = {}) {
    this.#redis = redis;
    this.#local = opts.fallback ?? new MemoryFallback();
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
    if (!('junctionRestoreWindows' in redis)) {
      redis.defineCommand('junctionRestoreWindows', { lua: RESTORE_WINDOWS });
    }
    opts.link?.onChange((up) => (up ? this.#resumed() : this.#degraded()));
    opts.link?.onRecover(() => this.#writeBack());
    // Away from the start (C48): memory is in charge before any change is heard.
    if (opts.link && !opts.link.up) this.#local.away();
  }

  async refund(checks: readonly Check[]): Promise<void> {
    if (checks.length === 0) return;
    if (this.#link && !this.#link.up) return this.#refundLocal(checks);
    if (this.#link) for (const c of checks) if (c.kind === 'window' && c.cost > 0) this.#mine.get(c.key)?.sent.removeNewest(c.cost);
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
    // The names of the call's entries in its windows: this instance's id and a count of its calls.
    argv.push(`${this.#id}${(++this.#calls).toString(36)}`);
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
    // An answer that arrived after Redis was taken for away: memory, already in charge, learns it too.
    const late = this.#link !== undefined && !this.#link.up;
    const states: CheckState[] = checks.map((c, i) => {
      const remaining = Number(raw[3 + i * 4]);
      // Where memory would start this counter from (C48): updated in place, no allocation once known.
      if (c.kind === 'counter') {
        this.#note(c.key, c.limit - remaining, c.resetAt, c.shard);
        if (late) this.#local.seed([{ key: c.key, shard: c.shard, value: c.limit - remaining, resetAt: c.resetAt }]).catch(unseeded);
      }
      return { allowed: raw[2 + i * 4] === 1, remaining, resetAt: Number(raw[4 + i * 4]), retryAfterMs: Number(raw[5 + i * 4]) };
    });
    if (this.#link) {
      this.#skew = Number(raw[1]) - Date.now();
      if (raw[0] === 1) this.#keepSent(checks, Number(raw[1]), late);
    }
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
      for (const [k, m] of this.#mine) {
        const from = now + this.#skew - m.windowMs;
        m.sent.prune(from);
        m.owed.prune(from);
        if (m.sent.size === 0 && m.owed.size === 0) this.#mine.delete(k);
      }
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

  /**
   * Notes what Redis admitted on each window, at Redis' `now` (C48): where memory starts from if
   * Redis goes away, what goes back if it returns empty. `late`: memory is in charge already.
   */
  #keepSent(checks: readonly Check[], now: number, late: boolean): void {
    for (const c of checks) {
      if (c.kind !== 'window' || c.cost <= 0) continue;
      const m = this.#mineOf(c);
      m.sent.prune(now - c.windowMs);
      m.sent.add(now, c.cost);
      if (late) this.#local.seedWindow(c.key, new Array<number>(c.cost).fill(now - this.#skew));
    }
  }

  #mineOf(c: WindowCheck): Mine {
    let m = this.#mine.get(c.key);
    if (!m) {
      m = { windowMs: c.windowMs, shard: c.shard, sent: new TimeLog(), owed: new TimeLog() };
      this.#mine.set(c.key, m);
    }
    return m;
  }

  #consumeLocal(checks: readonly Check[]): ConsumeResult | Promise<ConsumeResult> {
    this.memoryCalls++;
    const result = this.#local.consume(checks);
    return result instanceof Promise ? result.then((r) => this.#owe(checks, r)) : this.#owe(checks, result);
  }

  /** What memory admitted while Redis was away: owed to Redis when it answers again. */
  #owe(checks: readonly Check[], result: ConsumeResult): ConsumeResult {
    if (result.allowed) {
      const at = Date.now() + this.#skew;
      for (const c of checks) {
        if (c.cost <= 0) continue;
        if (c.kind === 'window') {
          if (!this.#link) continue;
          const m = this.#mineOf(c);
          m.owed.prune(at - c.windowMs);
          m.owed.add(at, c.cost);
          continue;
        }
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
      if (c.kind === 'window') {
        this.#mine.get(c.key)?.owed.removeNewest(c.cost);
        continue;
      }
      const o = this.#owed.get(c.key);
      if (o) o.value = Math.max(0, o.value - c.cost);
    }
  }

  /**
   * Redis went away: memory starts each counter from the last count known, and each window from
   * what this instance admitted in it, through Redis or in memory not yet written back (C48).
   */
  #degraded(): void {
    this.#local.away();
    const now = Date.now();
    const seeds: CounterSeed[] = [];
    for (const [key, c] of this.#known) if (c.resetAt > now) seeds.push({ key, value: c.value, resetAt: c.resetAt, shard: c.shard });
    this.#local.seed(seeds).catch(unseeded);
    for (const [key, m] of this.#mine) {
      const from = now + this.#skew - m.windowMs;
      m.sent.prune(from);
      m.owed.prune(from);
      this.#local.seedWindow(key, [...m.sent.values(), ...m.owed.values()].map((t) => t - this.#skew));
    }
  }

  /** Shared limits again: memory starts afresh for the next outage; anything counted since the write-back goes to Redis too. */
  #resumed(): void {
    this.#local.back();
    let owedWindows = false;
    for (const m of this.#mine.values()) if (m.owed.size > 0) owedWindows = true;
    if (this.#owed.size > 0 || owedWindows) this.#writeBack().catch((err: unknown) => this.#link?.failed(err));
  }

  /** What this instance counted while Redis was away goes back to it: counters, then windows. */
  async #writeBack(): Promise<void> {
    const failures: unknown[] = [];
    await this.#writeBackCounters().catch((err: unknown) => failures.push(err));
    await this.#writeBackWindows().catch((err: unknown) => failures.push(err));
    if (failures.length > 0) throw failures[0] instanceof Error ? failures[0] : new Error(String(failures[0]));
  }

  /**
   * Runs `restore` over the rows: on a Redis Cluster one script per shard (its keys share a slot),
   * a few at a time, else in chunks; `done` after each chunk written. A failed chunk (its primary
   * away) stops its shard; the first failure is thrown once every batch has run.
   */
  async #inBatches<R extends { key: string; shard: string | undefined }>(
    rows: readonly R[],
    split: (rows: readonly R[]) => R[][],
    restore: (chunk: readonly R[]) => Promise<void>,
    done: (chunk: readonly R[]) => void,
  ): Promise<void> {
    const batches = this.#tagged ? [...groupBy(rows, (r) => r.shard ?? r.key).values()] : split(rows);
    let failure: Error | undefined;
    for (let i = 0; i < batches.length; i += RESTORE_PARALLEL) {
      await Promise.all(
        batches.slice(i, i + RESTORE_PARALLEL).map(async (batch) => {
          for (const chunk of split(batch)) {
            try {
              await restore(chunk);
            } catch (err) {
              failure ??= err instanceof Error ? err : new Error(String(err));
              return;
            }
            done(chunk);
          }
        }),
      );
    }
    if (failure !== undefined) throw failure;
  }

  /**
   * Puts back into Redis, per window, what this instance admitted: in memory meanwhile (taken
   * out, and put back if Redis fails) and through Redis before, as far as Redis lacks it.
   */
  async #writeBackWindows(): Promise<void> {
    const now = Date.now() + this.#skew;
    const rows: WindowRow[] = [];
    for (const [key, m] of this.#mine) {
      m.sent.prune(now - m.windowMs);
      m.owed.prune(now - m.windowMs);
      if (m.sent.size === 0 && m.owed.size === 0) continue;
      rows.push({ key, shard: m.shard, windowMs: m.windowMs, owed: m.owed.values(), sent: m.sent.values() });
      m.owed = new TimeLog();
    }
    try {
      await this.#inBatches(
        rows,
        (r) => chunks(r, RESTORE_WINDOW_ARGS, (w) => 4 + w.owed.length + w.sent.length),
        (chunk) => this.#restoreWindows(chunk),
        (chunk) => {
          // Written: those requests are in Redis now, as if admitted through it.
          for (const r of chunk) {
            this.#mine.get(r.key)?.sent.merge(r.owed);
            r.owed = [];
          }
        },
      );
    } catch (err) {
      for (const r of rows) if (r.owed.length > 0) this.#mine.get(r.key)?.owed.merge(r.owed);
      throw err;
    }
  }

  async #restoreWindows(chunk: readonly WindowRow[]): Promise<void> {
    await (this.#redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).junctionRestoreWindows?.(
      chunk.length,
      ...chunk.map((r) => this.#name(r.key, r.shard)),
      ...chunk.flatMap((r) => [r.windowMs, r.owed.length, r.sent.length, ...r.owed, ...r.sent]),
    );
  }

  /**
   * Raises every counter in Redis to what this instance knows: the last count known plus what
   * memory admitted meanwhile. Counted requests taken out first and put back if Redis fails, so
   * that requests admitted during the write-back are written by the next round.
   */
  async #writeBackCounters(): Promise<void> {
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
      await this.#inBatches(
        rows,
        (r) => chunks(r, RESTORE_CHUNK),
        (chunk) => this.#restore(chunk),
        (chunk) => {
          // Written: those requests are part of the last count known now.
          for (const r of chunk) this.#note(r.key, r.floor, r.resetAt, r.shard);
          for (const r of chunk) owed.delete(r.key);
        },
      );
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
