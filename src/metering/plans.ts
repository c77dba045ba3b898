import type { Config, PlanLimits, Tier } from '../config/schema.ts';

export interface AccountLimitsInput {
  tier: string;
  requestsPerMinute: number | null;
  dailyLimit: number | null;
  monthlyLimit: number | null;
}

/**
 * The limits that apply to an account: its plan (C9), with admin overrides (C8) in place of the
 * plan's per-minute, daily and monthly values. `null` means unlimited.
 */
export function effectiveLimits(cfg: Config, account: AccountLimitsInput): PlanLimits {
  const plan = cfg.plans[account.tier as Tier] ?? cfg.plans.free;
  return {
    requestsPerMinute: account.requestsPerMinute ?? plan.requestsPerMinute,
    dailyLimit: account.dailyLimit ?? plan.dailyLimit,
    monthlyComputeUnits: account.monthlyLimit ?? plan.monthlyComputeUnits,
    maxKeys: plan.maxKeys,
    maxNetworks: plan.maxNetworks,
  };
}
