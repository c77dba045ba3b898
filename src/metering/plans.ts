// The limits that apply to an account: its plan (C9) with the admin's overrides (C8).
import type { PlanLimits, PlansConfig, Tier } from '../config/schema.ts';

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
export function effectiveLimits(plans: PlansConfig, account: AccountLimitsInput): PlanLimits {
  const plan = plans[account.tier as Tier] ?? plans.free;
  return {
    requestsPerMinute: account.requestsPerMinute ?? plan.requestsPerMinute,
    dailyLimit: account.dailyLimit ?? plan.dailyLimit,
    monthlyComputeUnits: account.monthlyLimit ?? plan.monthlyComputeUnits,
    maxKeys: plan.maxKeys,
    maxNetworks: plan.maxNetworks,
  };
}
