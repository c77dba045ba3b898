// GET /plans: the public plan table (C9), as the sign-up page shows it.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { type PlansConfig, TIERS } from '../config/schema.ts';
import { ok } from '../http/schemas.ts';

const Limit = T.Union([T.Integer(), T.Null()]);
const Plan = T.Object({
  tier: T.Union([T.Literal('free'), T.Literal('pro'), T.Literal('max'), T.Literal('enterprise')]),
  limits: T.Object(
    {
      requestsPerMinute: Limit,
      dailyLimit: Limit,
      monthlyLimit: T.Union([T.Integer(), T.Null()], { description: 'compute units per calendar month (UTC)' }),
      maxKeys: Limit,
      maxNetworks: T.Union([T.Integer(), T.Null()], { description: "distinct networks over all of an account's keys" }),
    },
    { title: 'PlanLimits', description: "the plan's limits as configured, named as GET /me names them; null = unlimited" }, // C9
  ),
}, { title: 'Plan' });

/**
 * GET /plans: public, like GET /networks (C6 beyond the contract: the sign-up page shows what the
 * free plan gives before there is an account). The plan table of the config (C9, `plans`), in
 * tier order; an account's own overrides (C8) are in its GET /me.
 */
export const planRoutes: FastifyPluginAsyncTypebox<{ plans: PlansConfig }> = async (app, { plans: table }) => {
  const plans = TIERS.map((tier) => {
    const p = table[tier];
    return {
      tier,
      limits: {
        requestsPerMinute: p.requestsPerMinute,
        dailyLimit: p.dailyLimit,
        monthlyLimit: p.monthlyComputeUnits,
        maxKeys: p.maxKeys,
        maxNetworks: p.maxNetworks,
      },
    };
  });
  app.get(
    '/plans',
    {
      schema: {
        tags: ['auth'],
        operationId: 'listPlans',
        summary: "The plans and their limits, from the gateway's configuration (no token needed)",
        response: { 200: ok(T.Array(Plan)) },
      },
    },
    async () => ({ success: true as const, data: plans }),
  );
};
