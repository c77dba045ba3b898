// What an account's plan allows its keys (C14-C16, C24, C52), and bringing keys within a new plan.
import { and, eq, ne } from 'drizzle-orm';
import type { UserRow } from '../auth/accounts.ts';
import type { Networks } from '../chains/networks.ts';
import type { MethodsConfig, PlansConfig } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
import { type AccountLimitsInput, effectiveLimits } from '../metering/plans.ts';
import { WEBSOCKET_METHODS } from '../methods/catalogue.ts';
import type { Db } from '../storage/db.ts';
import { apiKeys } from './schema.ts';

/**
 * What an account's plan allows its keys (C14-C16, C24, C52): the networks "every network" means,
 * how many keys and distinct networks, the highest own rate, the methods a key's list may name;
 * and, after a plan change, the changes that bring an account's keys within it. The key records
 * themselves are service.ts's; this module only judges them against the plan.
 */

type KeyRow = typeof apiKeys.$inferSelect;

const FREE_DEFAULT_NETWORKS = ['native-mainnet', 'native-testnet'];

/** Keys a plan change brought within the new plan (ids only, never key values). */
export interface PlanEnforcement {
  /** Switched to `inactive`: more active keys than the plan allows (C15). */
  deactivated: string[];
  /** Networks taken off: more distinct networks than the plan allows (C16). */
  networksChanged: string[];
  /** `rateLimit` lowered to the plan rate (C14). */
  rateLimited: string[];
}

/** The settings plan rules read: the plan table and the methods a key's list may name. */
export interface PlanRulesSettings {
  plans: PlansConfig;
  methods: Pick<MethodsConfig, 'standard' | 'native' | 'planExtras'>;
}

export class PlanRules {
  readonly #plans: PlansConfig;
  readonly #methods: PlanRulesSettings['methods'];
  readonly #networks: Networks;

  constructor(settings: PlanRulesSettings, networks: Networks) {
    this.#plans = settings.plans;
    this.#methods = settings.methods;
    this.#networks = networks;
  }

  /**
   * C16, C52: the networks "every network the plan allows" means for an account now: all of them
   * on a plan without a network cap, the native networks on one with a cap (free).
   */
  planNetworks(account: AccountLimitsInput): string[] {
    const max = effectiveLimits(this.#plans, account).maxNetworks;
    return max === null ? this.#networks.all.map((n) => n.slug) : FREE_DEFAULT_NETWORKS.slice(0, max);
  }

  /** The networks a key covers: its own list, or the plan's as it is now for a key made for every network (C52). */
  networksOf(row: Pick<KeyRow, 'networks' | 'allNetworks'>, account: AccountLimitsInput): string[] {
    return row.allNetworks ? this.planNetworks(account) : row.networks;
  }

  /** The changes that bring `rows` (all of one account's keys, oldest first) within the account's limits. */
  fitToPlan(user: UserRow, rows: KeyRow[]): Map<string, Partial<Pick<KeyRow, 'status' | 'networks' | 'allNetworks' | 'rateLimit'>>> {
    const limits = effectiveLimits(this.#plans, user);
    const changes = new Map<string, Partial<Pick<KeyRow, 'status' | 'networks' | 'allNetworks' | 'rateLimit'>>>();
    const change = (id: string) => {
      let c = changes.get(id);
      if (!c) changes.set(id, (c = {}));
      return c;
    };
    const live = rows.filter((r) => r.status !== 'revoked');
    const now = Date.now();

    // C15: the active keys that stay active, usable ones first, then the oldest.
    const active = live.filter((r) => r.status === 'active');
    const usableFirst = [...active].sort((a, b) => Number(isExpired(a, now)) - Number(isExpired(b, now)));
    const staying = new Set((limits.maxKeys === null ? usableFirst : usableFirst.slice(0, limits.maxKeys)).map((r) => r.id));
    for (const r of active) if (!staying.has(r.id)) change(r.id).status = 'inactive';

    // C16: keep the first networks named, the staying keys' first. A key made for every network
    // names the new plan's list (C52: it follows the plan) and keeps following it if all of that
    // list is kept; otherwise it is narrowed like the others and keeps the list it is left with.
    if (limits.maxNetworks !== null) {
      const max = limits.maxNetworks;
      const ordered = [...live.filter((r) => staying.has(r.id)), ...live.filter((r) => !staying.has(r.id))];
      const covered = new Map(ordered.map((r) => [r.id, this.networksOf(r, user)]));
      const named = [...new Set(ordered.flatMap((r) => covered.get(r.id) ?? []))];
      if (named.length > max) {
        let kept = new Set(named.slice(0, max));
        if (ordered.some((r) => !(covered.get(r.id) ?? []).some((n) => kept.has(n)))) {
          const defaults = FREE_DEFAULT_NETWORKS.slice(0, max);
          kept = new Set([...defaults, ...named.filter((n) => !defaults.includes(n))].slice(0, max));
        }
        for (const r of ordered) {
          const before = covered.get(r.id) ?? [];
          const left = before.filter((n) => kept.has(n));
          const networks = left.length > 0 ? left : FREE_DEFAULT_NETWORKS.filter((n) => kept.has(n));
          if (networks.length !== before.length) {
            change(r.id).networks = networks;
            if (r.allNetworks) change(r.id).allNetworks = false;
          }
        }
      }
    }

    // C14: a key's own rate never above the plan rate.
    const rate = limits.requestsPerMinute;
    if (rate !== null) for (const r of live) if (r.rateLimit !== null && r.rateLimit > rate) change(r.id).rateLimit = rate;
    return changes;
  }

  /** C15 after a downgrade: switching a key back on must not make more active keys than the plan allows. */
  async checkActiveAllowance(tx: Db, user: UserRow, id: string): Promise<void> {
    const max = effectiveLimits(this.#plans, user).maxKeys;
    if (max === null) return;
    const others = await tx
      .select({ id: apiKeys.id })
      .from(apiKeys)
      .where(and(eq(apiKeys.userId, user.id), eq(apiKeys.status, 'active'), ne(apiKeys.id, id)));
    if (others.length >= max) {
      throw new HttpError('PLAN_LIMIT', `The ${user.tier} plan allows ${max} active API keys; switch another off first`, {
        details: { limit: max },
      });
    }
  }

  /** C16: known slugs only; empty means the plan's default; a free account's keys share 5 networks. */
  resolveNetworks(user: UserRow, requested: string[] | undefined, otherKeys: string[][]): string[] {
    const unknown = (requested ?? []).filter((s) => !this.#networks.has(s));
    if (unknown.length) {
      throw new HttpError('VALIDATION_ERROR', `Unknown network: ${unknown.join(', ')}`, {
        details: unknown.map((s) => ({ field: 'body.networks', message: `unknown network "${s}"` })),
      });
    }
    let networks = [...new Set(requested ?? [])];
    const limits = effectiveLimits(this.#plans, user);
    if (networks.length === 0) networks = this.planNetworks(user);
    if (limits.maxNetworks !== null) {
      const distinct = new Set([...otherKeys.flat(), ...networks]);
      if (distinct.size > limits.maxNetworks) {
        throw new HttpError(
          'PLAN_LIMIT',
          `The ${user.tier} plan allows ${limits.maxNetworks} distinct networks across all keys (this would make ${distinct.size})`,
          { details: { limit: limits.maxNetworks, networks: [...distinct] } },
        );
      }
    }
    return networks;
  }

  /** The method names an allowlist may name: what the plan lets through (C24), subscriptions included. */
  planMethods(user: UserRow): ReadonlySet<string> {
    const m = this.#methods;
    const extras = (m.planExtras as Record<string, string[] | undefined>)[user.tier] ?? [];
    return new Set([...m.standard, ...extras, ...Object.keys(m.native), ...WEBSOCKET_METHODS]);
  }

  /** C14: 1 <= rateLimit <= the plan's rate (any >= 1 when the plan is unlimited); omitted = plan rate. */
  checkRateLimit(user: UserRow, rateLimit: number | undefined): number | null {
    if (rateLimit === undefined) return null;
    const max = effectiveLimits(this.#plans, user).requestsPerMinute;
    if (rateLimit < 1 || (max !== null && rateLimit > max)) {
      throw new HttpError('VALIDATION_ERROR', `rateLimit must be between 1 and ${max ?? 'any'} requests per minute`, {
        details: [{ field: 'body.rateLimit', message: `must be between 1 and ${max ?? 'any'}` }],
      });
    }
    return rateLimit;
  }
}

function isExpired(r: KeyRow, now: number): boolean {
  return r.expiresAt !== null && r.expiresAt.getTime() <= now;
}
