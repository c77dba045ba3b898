/**
 * The limiter contract (C12): a set of checks consumed all together or not at all. One
 * implementation keeps state in process (one instance), the other in Redis (many instances, one
 * Lua script per request). Both are exercised by the same test suite.
 */
import { type Clock, systemClock } from '../time/clock.ts';

/** Requests within any `windowMs` (a sliding log: exact, no 2x at window edges). */
export interface WindowCheck {
  kind: 'window';
  key: string;
  /**
   * What the key belongs to (an account's id): checks of one call with the same shard are kept
   * together on a Redis Cluster (one hash slot). Checks of one call must share it when given;
   * absent, the key is its own shard.
   */
  shard?: string;
  limit: number;
  windowMs: number;
  cost: number;
}

/** A running total that resets at `resetAt` (epoch ms): daily requests, monthly compute units. */
export interface CounterCheck {
  kind: 'counter';
  key: string;
  /**
   * What the key belongs to (an account's id): checks of one call with the same shard are kept
   * together on a Redis Cluster (one hash slot). Checks of one call must share it when given;
   * absent, the key is its own shard.
   */
  shard?: string;
  limit: number;
  resetAt: number;
  cost: number;
}

export type Check = WindowCheck | CounterCheck;

/** A counter's value carried over from storage (after a restart): see `Limiter.seed`. */
export interface CounterSeed {
  key: string;
  /** As `Check.shard`: must be the one the counter's checks give. */
  shard?: string;
  value: number;
  /** Epoch ms when the counter's period ends. */
  resetAt: number;
}

export interface CheckState {
  /** Whether this check alone would have admitted the cost. */
  allowed: boolean;
  /** Left after this request (after consuming, when the whole request was admitted). */
  remaining: number;
  /** Epoch ms: when the oldest counted request leaves the window (window) or the period ends (counter). */
  resetAt: number;
  /** Ms until this check would admit the cost; 0 when it does now. */
  retryAfterMs: number;
}

/**
 * C13's four headers for one window: its limit, what is left in it, when one more request is
 * allowed again (when none is left) or the window ends, in epoch seconds, and `cuLeft` (the
 * compute units left this month; -1: unlimited, or no account known).
 */
export function windowHeaders(limit: number, s: CheckState, cuLeft: number): Record<string, string> {
  // A full window read without a refusal (the last place just taken, or nothing consumed) has no
  // retry time: its oldest request leaving (`resetAt`) is when one more is allowed.
  const resetAt = s.remaining === 0 && s.retryAfterMs > 0 ? Date.now() + s.retryAfterMs : s.resetAt;
  return {
    'x-ratelimit-limit': String(limit),
    'x-ratelimit-remaining': String(s.remaining),
    'x-ratelimit-reset': String(Math.ceil(resetAt / 1000)),
    'x-cu-remaining': String(cuLeft),
  };
}

export interface ConsumeResult {
  /** True when every check admitted its cost and all were consumed; false: nothing was consumed. */
  allowed: boolean;
  states: CheckState[];
}

export interface Limiter {
  consume(checks: readonly Check[]): Promise<ConsumeResult>;
  /** The same without a promise, for a store that answers at once (in process): two microtask hops less per request. */
  consumeSync?(checks: readonly Check[]): ConsumeResult;
  /**
   * `consumeSync` writing each check's state into `states[i]` (objects the caller owns and reads
   * before it next calls this), returning whether all were admitted: nothing made per request.
   */
  consumeInto?(checks: readonly Check[], states: CheckState[]): boolean;
  /**
   * Raises counters to at least these values (never lowers them): quotas counted before a
   * restart, from stored usage. A store whose counters outlive the process ignores it.
   */
  seed(counters: readonly CounterSeed[]): Promise<void>;
  /**
   * Gives back what an admitted `consume` of these checks took, for a reservation that turned out
   * not to count (C17: a login attempt whose password was right): the newest `cost` entries of a
   * window, `cost` of a counter (never below 0).
   */
  refund(checks: readonly Check[]): Promise<void>;
  /** Starts the store's background work, if it has any (the app's start; never the constructor). */
  start(): void;
  close(): Promise<void>;
}

/**
 * The requests of one sliding window, oldest first, as runs: each distinct timestamp (ms) once,
 * with how many requests it holds. A busy key admits dozens of requests per millisecond: one
 * entry per request held millions of numbers per minute and copied them on every compaction;
 * runs hold at most one per millisecond of the window.
 */
export class TimeLog {
  /** The runs' timestamps, ascending, from `head` on. */
  #ts: number[] = [];
  /** The runs' request counts (each > 0), beside `#ts`. */
  #n: number[] = [];
  #head = 0;
  #size = 0;

  /** Requests in the log. */
  get size(): number {
    return this.#size;
  }

  /** Runs held (distinct milliseconds), for memory. */
  get runs(): number {
    return this.#ts.length - this.#head;
  }

  /** The timestamp of the `i`-th oldest request (0: the oldest); `i` < size. */
  at(i: number): number {
    for (let j = this.#head; j < this.#ts.length; j++) {
      const n = this.#n[j] as number;
      if (i < n) return this.#ts[j] as number;
      i -= n;
    }
    return Number.NaN;
  }

  /** The newest request's timestamp; NaN when empty. */
  newest(): number {
    return this.#size === 0 ? Number.NaN : (this.#ts[this.#ts.length - 1] as number);
  }

  prune(before: number): void {
    while (this.#head < this.#ts.length && (this.#ts[this.#head] as number) <= before) {
      this.#size -= this.#n[this.#head] as number;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#ts.length) {
      this.#ts = this.#ts.slice(this.#head);
      this.#n = this.#n.slice(this.#head);
      this.#head = 0;
    }
  }

  add(now: number, n: number): void {
    if (n <= 0) return;
    const last = this.#ts.length - 1;
    if (last >= this.#head && this.#ts[last] === now) this.#n[last] = (this.#n[last] as number) + n;
    else {
      this.#ts.push(now);
      this.#n.push(n);
    }
    this.#size += n;
  }

  removeNewest(n: number): void {
    while (n > 0 && this.#size > 0) {
      const last = this.#ts.length - 1;
      const take = Math.min(n, this.#n[last] as number);
      this.#n[last] = (this.#n[last] as number) - take;
      this.#size -= take;
      n -= take;
      if (this.#n[last] === 0) {
        this.#ts.pop();
        this.#n.pop();
      }
    }
  }

  /** The timestamps in the log, one per request, oldest first. */
  values(): number[] {
    const out: number[] = [];
    for (let j = this.#head; j < this.#ts.length; j++) for (let k = 0; k < (this.#n[j] as number); k++) out.push(this.#ts[j] as number);
    return out;
  }

  /** Adds timestamps of any age, keeping the log in order. */
  merge(at: readonly number[]): void {
    if (at.length === 0) return;
    const all = [...this.values(), ...at].sort((x, y) => x - y);
    this.#ts = [];
    this.#n = [];
    this.#head = 0;
    this.#size = 0;
    for (const t of all) this.add(t, 1);
  }
}

/** State in this process: right for one instance (REDIS_URL unset). Atomic: it never awaits. */
export class MemoryLimiter implements Limiter {
  readonly #logs = new Map<string, TimeLog>();
  readonly #counters = new Map<string, { value: number; resetAt: number }>();
  readonly #now: Clock;
  readonly #sweepMs: number;
  #sweep: NodeJS.Timeout | undefined;

  constructor(opts: { now?: Clock; sweepMs?: number } = {}) {
    this.#now = opts.now ?? systemClock;
    this.#sweepMs = opts.sweepMs ?? 60_000;
  }

  /** Forgets idle keys from now on, so memory follows the active callers, not every caller ever seen. */
  start(): void {
    if (this.#sweep) return;
    this.#sweep = setInterval(() => this.#collect(), this.#sweepMs);
    this.#sweep.unref();
  }

  async consume(checks: readonly Check[]): Promise<ConsumeResult> {
    return this.consumeSync(checks);
  }

  consumeSync(checks: readonly Check[]): ConsumeResult {
    const states = Array.from({ length: checks.length }, (): CheckState => ({ allowed: true, remaining: 0, resetAt: 0, retryAfterMs: 0 }));
    return { allowed: this.consumeInto(checks, states), states };
  }

  consumeInto(checks: readonly Check[], states: CheckState[]): boolean {
    const now = this.#now();
    const n = checks.length;
    let allowed = true;
    // Loops, not map with a closure: this runs for every metered call. Each check's use before
    // this request goes into its state's `remaining` until the second loop sets it.
    for (let i = 0; i < n; i++) {
      const c = checks[i] as Check;
      let used: number;
      if (c.kind === 'window') {
        const log = this.#logs.get(c.key);
        log?.prune(now - c.windowMs);
        used = log?.size ?? 0;
      } else {
        const ctr = this.#counters.get(c.key);
        used = ctr && ctr.resetAt > now ? ctr.value : 0;
      }
      (states[i] as CheckState).remaining = used;
      if (used + c.cost > c.limit) allowed = false;
    }
    for (let i = 0; i < n; i++) {
      const c = checks[i] as Check;
      const state = states[i] as CheckState;
      const used = state.remaining;
      const fits = used + c.cost <= c.limit;
      const after = allowed ? used + c.cost : used;
      state.allowed = fits;
      state.remaining = Math.max(0, c.limit - after);
      if (c.kind === 'window') {
        let log = this.#logs.get(c.key);
        if (allowed && c.cost > 0) {
          if (!log) {
            log = new TimeLog();
            this.#logs.set(c.key, log);
          }
          log.add(now, c.cost);
        }
        state.resetAt = log && log.size > 0 ? log.at(0) + c.windowMs : now;
        let retryAfterMs = 0;
        if (!fits) {
          const mustLeave = used + c.cost - c.limit;
          retryAfterMs = c.cost > c.limit || !log ? c.windowMs : Math.max(1, log.at(mustLeave - 1) + c.windowMs - now);
        }
        state.retryAfterMs = retryAfterMs;
        continue;
      }
      let ctr = this.#counters.get(c.key);
      if (allowed && c.cost > 0) {
        if (!ctr || ctr.resetAt <= now) {
          ctr = { value: 0, resetAt: c.resetAt };
          this.#counters.set(c.key, ctr);
        }
        ctr.value += c.cost;
      }
      state.resetAt = c.resetAt;
      state.retryAfterMs = fits ? 0 : Math.max(1, c.resetAt - now);
    }
    return allowed;
  }

  async refund(checks: readonly Check[]): Promise<void> {
    for (const c of checks) {
      if (c.cost <= 0) continue;
      if (c.kind === 'window') this.#logs.get(c.key)?.removeNewest(c.cost);
      else {
        const ctr = this.#counters.get(c.key);
        if (ctr) ctr.value = Math.max(0, ctr.value - c.cost);
      }
    }
  }

  /** Counters of this process start at zero: take what storage says was already used (max, so never counted twice). */
  async seed(counters: readonly CounterSeed[]): Promise<void> {
    const now = this.#now();
    for (const s of counters) {
      if (s.resetAt <= now || s.value <= 0) continue;
      const ctr = this.#counters.get(s.key);
      if (ctr && ctr.resetAt > now) ctr.value = Math.max(ctr.value, s.value);
      else this.#counters.set(s.key, { value: s.value, resetAt: s.resetAt });
    }
  }

  /**
   * Adds requests admitted elsewhere (epoch ms, this process' clock) to a window: what this
   * instance admitted through Redis before it went away (C48), so memory starts from them.
   */
  seedWindow(key: string, at: readonly number[]): void {
    if (at.length === 0) return;
    let log = this.#logs.get(key);
    if (!log) {
      log = new TimeLog();
      this.#logs.set(key, log);
    }
    log.merge(at);
  }

  #collect(): void {
    const now = this.#now();
    for (const [k, log] of this.#logs) {
      // Windows are at most a day long here; a log whose newest entry is older than that is idle.
      if (log.size === 0 || log.newest() < now - 86_400_000) this.#logs.delete(k);
    }
    for (const [k, c] of this.#counters) if (c.resetAt <= now) this.#counters.delete(k);
  }

  async close(): Promise<void> {
    clearInterval(this.#sweep);
    this.#sweep = undefined;
  }
}
