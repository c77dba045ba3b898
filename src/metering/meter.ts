// Metering of RPC calls (C10-C13): rate and quota checks per key or client IP, and the limit headers.
import type { LimitsConfig, PlanLimits } from '../config/schema.ts';
import { QuotaExceededError, RateLimitedError, type RpcError } from '../errors/rpc.ts';
import { type Check, type CheckState, type CounterSeed, type Limiter, windowHeaders } from './limiter.ts';
import { currentPeriods } from './periods.ts';

const MINUTE_MS = 60_000;

/**
 * What metering reads of an API key: its ids, its own rate and its account's plan limits. The
 * key cache's resolved key is one (keys/ builds on this type; metering imports nothing from keys/).
 */
export interface MeteredKey {
  keyId: string;
  userId: string;
  /** The key's own per-minute limit; null = the plan's. */
  rateLimit: number | null;
  limits: PlanLimits;
}

/** Who is being metered: a key (its account's plan) or, on the public endpoint, a client IP. */
export type Metered = { key: MeteredKey } | { ip: string };

/** A key without any limit of its own or of its plan: nothing to check or count (C13: every header -1). */
function unlimited(who: Metered): boolean {
  if (!('key' in who)) return false;
  const { key } = who;
  const plan = key.limits;
  return key.rateLimit === null && plan.requestsPerMinute === null && plan.dailyLimit === null && plan.monthlyComputeUnits === null;
}

/**
 * The outcome of every call of an unlimited key, shared (never written to: the transports copy
 * the headers into their own): what `#outcome` answers for no checks, without building it per call.
 */
const UNLIMITED: MeterOutcome = Object.freeze({
  error: null,
  headers: Object.freeze({ 'x-ratelimit-limit': '-1', 'x-ratelimit-remaining': '-1', 'x-ratelimit-reset': '-1', 'x-cu-remaining': '-1' }),
});

export interface MeterOutcome {
  /** null: admitted (and consumed, when the cost was > 0). */
  error: RpcError | null;
  /** The four C13 headers, plus Retry-After on a refusal. */
  headers: Record<string, string>;
}

/** What an account has left now; null: unlimited. */
export interface AccountRemaining {
  requestsThisMinute: number | null;
  requestsToday: number | null;
  computeUnitsThisMonth: number | null;
}

interface CheckNames {
  day: string;
  month: string;
  keyRate: string;
  accountRate: string;
  daily: string;
  monthly: string;
}

type Role = 'keyRate' | 'accountRate' | 'daily' | 'monthly' | 'ipRate';

/** A key's checks in one UTC day and month, kept for `rpcNow` (which sets their costs per call). */
interface KeyChecks {
  day: string;
  month: string;
  checks: Check[];
  roles: Role[];
  perMinute: number;
  /** The checks' states, written by the limiter's `consumeInto` and read before `rpcNow` returns. */
  states: CheckState[];
}

/** Stored usage the quotas are counted from (UsageQueries.quotaUsage). */
export interface QuotaUsageSource {
  quotaUsage(): Promise<Array<{ userId: string; requestsToday: number; computeUnitsThisMonth: number }>>;
}

/**
 * Applies the limits of C9–C13 and C18 to RPC traffic: the key's own rate, the account's plan
 * rate (shared by its keys; the tighter answers), the daily request quota and the monthly
 * compute units. One `consume` per request, all checks together.
 */
export class Meter {
  readonly #limiter: Limiter;
  readonly #publicPerMinute: number;
  readonly #failedLookupsPerMinute: number;
  readonly #nameCache = new WeakMap<MeteredKey, CheckNames>();
  readonly #keyChecksCache = new WeakMap<MeteredKey, KeyChecks>();

  constructor(limits: Pick<LimitsConfig, 'publicRpcPerMinute' | 'failedAuthPerMinute'>, limiter: Limiter) {
    this.#limiter = limiter;
    this.#publicPerMinute = limits.publicRpcPerMinute;
    this.#failedLookupsPerMinute = limits.failedAuthPerMinute;
  }

  /**
   * Reserves one failed API key lookup for a client IP before storage is asked about a key that
   * is not in memory (C17's failed-auth limit, applied to the RPC addresses): refused with -32005
   * past `limits.failedAuthPerMinute`; `release()` gives the place back when the key was found.
   * `headers` are this window's four C13 headers as the reservation left it (X-CU-Remaining -1:
   * no account is known), plus Retry-After when refused: what the unknown key's -32001, or the
   * -32005, answers with.
   */
  async reserveKeyLookup(ip: string): Promise<{ error: RpcError | null; headers: Record<string, string>; release(): Promise<void> }> {
    const limit = this.#failedLookupsPerMinute;
    const check: Check = { kind: 'window', key: `fk:${ip}`, limit, windowMs: MINUTE_MS, cost: 1 };
    const result = await this.#limiter.consume([check]);
    const state = result.states[0] as CheckState;
    const headers = windowHeaders(limit, state, -1);
    if (result.allowed) return { error: null, headers, release: () => this.#limiter.refund([check]) };
    const retryAfter = Math.max(1, Math.ceil(state.retryAfterMs / 1000));
    headers['retry-after'] = String(retryAfter);
    const error = new RateLimitedError('Too many unknown API keys from this address; try again later', { details: { retryAfter, limit: 'keyLookups' } });
    return { error, headers, release: async () => {} };
  }

  /**
   * C13: the client address's failed-key-lookup window as it stands, nothing consumed (X-CU-Remaining
   * -1: no account is known): the headers of an answer to a key that cannot be used, or of one
   * given before any limit was consulted. At once in process; a promise with Redis.
   */
  keyLookupHeaders(ip: string): Record<string, string> | Promise<Record<string, string>> {
    const limit = this.#failedLookupsPerMinute;
    const checks: Check[] = [{ kind: 'window', key: `fk:${ip}`, limit, windowMs: MINUTE_MS, cost: 0 }];
    if (this.#limiter.consumeSync) return windowHeaders(limit, this.#limiter.consumeSync(checks).states[0] as CheckState, -1);
    return this.#limiter.consume(checks).then((r) => windowHeaders(limit, r.states[0] as CheckState, -1));
  }

  /** The limiter keys of a key's checks, made once per key and period rather than per request. */
  #names(key: MeteredKey, day: string, month: string): CheckNames {
    let n = this.#nameCache.get(key);
    if (!n || n.day !== day || n.month !== month) {
      n = { day, month, keyRate: `k:${key.keyId}`, accountRate: `a:${key.userId}`, daily: `d:${key.userId}:${day}`, monthly: `cu:${key.userId}:${month}` };
      this.#nameCache.set(key, n);
    }
    return n;
  }

  /**
   * Consumes `requests` (batch items count one each, C10) and `computeUnits`; a cost of 0 only
   * reads the state for the headers. All or nothing: a refused request consumes nothing.
   */
  async rpc(who: Metered, requests: number, computeUnits: number): Promise<MeterOutcome> {
    if (unlimited(who)) return UNLIMITED;
    const { checks, roles, perMinute } = this.#checks(who, requests, computeUnits);
    const result = await this.#limiter.consume(checks);
    return this.#outcome(result.allowed, result.states, roles, perMinute);
  }

  /** `rpc` answered at once when the limiter can (in process); undefined when it must be awaited (Redis). */
  rpcNow(who: Metered, requests: number, computeUnits: number): MeterOutcome | undefined {
    if (unlimited(who)) return UNLIMITED;
    const limiter = this.#limiter;
    if (!limiter.consumeSync) return undefined;
    if ('key' in who) {
      // A key's checks, made once per key and period and given this call's costs: the limiter in
      // process reads them and keeps nothing of them before this returns (never shared with an await).
      const own = this.#keyChecks(who.key);
      for (let i = 0; i < own.checks.length; i++) (own.checks[i] as Check).cost = own.roles[i] === 'monthly' ? computeUnits : requests;
      if (limiter.consumeInto) return this.#outcome(limiter.consumeInto(own.checks, own.states), own.states, own.roles, own.perMinute);
      const result = limiter.consumeSync(own.checks);
      return this.#outcome(result.allowed, result.states, own.roles, own.perMinute);
    }
    const { checks, roles, perMinute } = this.#checks(who, requests, computeUnits);
    const result = limiter.consumeSync(checks);
    return this.#outcome(result.allowed, result.states, roles, perMinute);
  }

  /** A key's checks for `rpcNow`, costs unset: made again when the UTC day or month turns (their keys name it). */
  #keyChecks(key: MeteredKey): KeyChecks {
    const p = currentPeriods();
    let own = this.#keyChecksCache.get(key);
    if (!own || own.day !== p.day || own.month !== p.month) {
      const made = this.#checks({ key }, 0, 0);
      own = { day: p.day, month: p.month, ...made, states: made.checks.map((): CheckState => ({ allowed: true, remaining: 0, resetAt: 0, retryAfterMs: 0 })) };
      this.#keyChecksCache.set(key, own);
    }
    return own;
  }

  #checks(who: Metered, requests: number, computeUnits: number): { checks: Check[]; roles: Role[]; perMinute: number } {
    const checks: Check[] = [];
    const roles: Role[] = [];
    let perMinute = -1;
    if ('ip' in who) {
      checks.push({ kind: 'window', key: `ip:${who.ip}`, limit: this.#publicPerMinute, windowMs: MINUTE_MS, cost: requests });
      roles.push('ipRate');
      perMinute = this.#publicPerMinute;
    } else {
      const { key } = who;
      const plan = key.limits;
      const p = currentPeriods();
      const names = this.#names(key, p.day, p.month);
      if (key.rateLimit !== null && (plan.requestsPerMinute === null || key.rateLimit < plan.requestsPerMinute)) {
        checks.push({ kind: 'window', key: names.keyRate, shard: key.userId, limit: key.rateLimit, windowMs: MINUTE_MS, cost: requests });
        roles.push('keyRate');
      }
      if (plan.requestsPerMinute !== null) {
        checks.push({ kind: 'window', key: names.accountRate, shard: key.userId, limit: plan.requestsPerMinute, windowMs: MINUTE_MS, cost: requests });
        roles.push('accountRate');
      }
      perMinute = Math.min(key.rateLimit ?? Number.POSITIVE_INFINITY, plan.requestsPerMinute ?? Number.POSITIVE_INFINITY);
      if (perMinute === Number.POSITIVE_INFINITY) perMinute = -1;
      if (plan.dailyLimit !== null) {
        checks.push({ kind: 'counter', key: names.daily, shard: key.userId, limit: plan.dailyLimit, resetAt: p.dayEndsAt, cost: requests });
        roles.push('daily');
      }
      if (plan.monthlyComputeUnits !== null) {
        checks.push({
          kind: 'counter',
          key: names.monthly,
          shard: key.userId,
          limit: plan.monthlyComputeUnits,
          resetAt: p.monthEndsAt,
          cost: computeUnits,
        });
        roles.push('monthly');
      }
    }
    return { checks, roles, perMinute };
  }

  /** An account's compute units left this month (`monthly`: its plan's, null: unlimited, answered -1), read without consuming. */
  async computeUnitsLeft(userId: string, monthly: number | null): Promise<number> {
    if (monthly === null) return -1;
    const p = currentPeriods();
    const { states } = await this.#limiter.consume([{ kind: 'counter', key: `cu:${userId}:${p.month}`, shard: userId, limit: monthly, resetAt: p.monthEndsAt, cost: 0 }]);
    return states[0]?.remaining ?? -1;
  }

  /**
   * What an account has left now of its per-minute rate, daily requests and monthly compute units
   * (`limits`: its plan with overrides; null: unlimited), read without consuming anything.
   */
  async accountRemaining(userId: string, limits: PlanLimits): Promise<AccountRemaining> {
    const p = currentPeriods();
    const checks: Check[] = [];
    const roles: Array<keyof AccountRemaining> = [];
    if (limits.requestsPerMinute !== null) {
      checks.push({ kind: 'window', key: `a:${userId}`, shard: userId, limit: limits.requestsPerMinute, windowMs: MINUTE_MS, cost: 0 });
      roles.push('requestsThisMinute');
    }
    if (limits.dailyLimit !== null) {
      checks.push({ kind: 'counter', key: `d:${userId}:${p.day}`, shard: userId, limit: limits.dailyLimit, resetAt: p.dayEndsAt, cost: 0 });
      roles.push('requestsToday');
    }
    if (limits.monthlyComputeUnits !== null) {
      checks.push({ kind: 'counter', key: `cu:${userId}:${p.month}`, shard: userId, limit: limits.monthlyComputeUnits, resetAt: p.monthEndsAt, cost: 0 });
      roles.push('computeUnitsThisMonth');
    }
    const out: AccountRemaining = { requestsThisMinute: null, requestsToday: null, computeUnitsThisMonth: null };
    const { states } = await this.#limiter.consume(checks);
    states.forEach((s, i) => {
      out[roles[i] as keyof AccountRemaining] = s.remaining;
    });
    return out;
  }

  /**
   * Seeds the daily request and monthly compute-unit quotas (per account, as `rpc` counts them)
   * from stored usage, so that a restart does not hand out a fresh quota (C11). Call once at
   * start, before traffic. With Redis the counters survived the restart and are left alone.
   */
  async seedFromUsage(usage: QuotaUsageSource): Promise<void> {
    const p = currentPeriods();
    const seeds: CounterSeed[] = [];
    for (const u of await usage.quotaUsage()) {
      seeds.push({ key: `d:${u.userId}:${p.day}`, shard: u.userId, value: u.requestsToday, resetAt: p.dayEndsAt });
      seeds.push({ key: `cu:${u.userId}:${p.month}`, shard: u.userId, value: u.computeUnitsThisMonth, resetAt: p.monthEndsAt });
    }
    await this.#limiter.seed(seeds);
  }

  #outcome(allowed: boolean, states: CheckState[], roles: Role[], perMinute: number): MeterOutcome {
    let remaining = -1;
    let resetAt = 0;
    let cuRemaining = -1;
    for (let i = 0; i < states.length; i++) {
      const s = states[i] as CheckState;
      const role = roles[i];
      if (role === 'monthly') cuRemaining = s.remaining;
      else if (role !== 'daily' && (remaining === -1 || s.remaining < remaining)) {
        remaining = s.remaining;
        // C13: when one more request is allowed again, or when the window's oldest request leaves
        // (also when the last place was just taken, or read with nothing consumed: then no retry is known).
        resetAt = s.remaining === 0 && s.retryAfterMs > 0 ? Date.now() + s.retryAfterMs : s.resetAt;
      }
    }
    const headers: Record<string, string> = {
      'x-ratelimit-limit': String(perMinute),
      'x-ratelimit-remaining': String(remaining),
      'x-ratelimit-reset': String(remaining === -1 ? -1 : Math.ceil(resetAt / 1000)),
      'x-cu-remaining': String(cuRemaining),
    };
    if (allowed) return { error: null, headers };

    // Quotas first: waiting a minute does not help when the day's or month's quota is spent.
    let failing = states.findIndex((s, i) => !s.allowed && (roles[i] === 'daily' || roles[i] === 'monthly'));
    if (failing === -1) failing = states.findIndex((s) => !s.allowed);
    const s = states[failing] as CheckState;
    const role = roles[failing] as Role;
    const retryAfter = Math.max(1, Math.ceil(s.retryAfterMs / 1000));
    headers['retry-after'] = String(retryAfter);
    const error =
      role === 'daily' || role === 'monthly'
        ? new QuotaExceededError(role === 'daily' ? 'Daily request limit exceeded' : 'Monthly compute unit limit exceeded', {
            details: { retryAfter, limit: role === 'daily' ? 'daily' : 'monthly' },
          })
        : new RateLimitedError('Rate limit exceeded', {
            details: { retryAfter, limit: role === 'keyRate' ? 'key' : role === 'accountRate' ? 'plan' : 'ip' },
          });
    return { error, headers };
  }
}
