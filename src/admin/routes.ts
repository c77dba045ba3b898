import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService, UserRow } from '../auth/accounts.ts';
import type { Config } from '../config/schema.ts';
import { HttpError, notFound } from '../errors/http.ts';
import { Email, ErrorResponse, ok } from '../http/schemas.ts';
import type { KeyService } from '../keys/service.ts';
import { effectiveLimits } from '../metering/plans.ts';

const Limit = T.Union([T.Integer({ minimum: 1 }), T.Null()]);
const AdminUser = T.Object({
  id: T.String(),
  email: T.String(),
  name: T.String(),
  tier: T.String(),
  overrides: T.Object({ requestsPerMinute: Limit, dailyLimit: Limit, monthlyLimit: Limit }),
  effective: T.Object({
    requestsPerMinute: Limit,
    dailyLimit: Limit,
    monthlyLimit: Limit,
    maxKeys: Limit,
    maxNetworks: Limit,
  }),
  createdAt: T.String(),
});

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Admin routes (C8), registered only when ADMIN_TOKEN is set; otherwise `/admin/*` is an ordinary
 * 404. The token is compared in constant time (on digests, so length leaks nothing either).
 */
export const adminRoutes: FastifyPluginAsyncTypebox<{
  token: string;
  accounts: AccountService;
  keys: KeyService;
  config: Config;
}> = async (app, { token, accounts, keys, config }) => {
  const expected = digest(token);
  app.addHook('onRequest', async (req) => {
    const given = req.headers['x-admin-token'];
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
      throw new HttpError('UNAUTHORIZED', 'X-Admin-Token is missing or wrong');
    }
  });

  const show = (u: UserRow) => {
    const e = effectiveLimits(config, u);
    return {
      id: u.id,
      email: u.email,
      name: u.name,
      tier: u.tier,
      overrides: { requestsPerMinute: u.requestsPerMinute, dailyLimit: u.dailyLimit, monthlyLimit: u.monthlyLimit },
      effective: {
        requestsPerMinute: e.requestsPerMinute,
        dailyLimit: e.dailyLimit,
        monthlyLimit: e.monthlyComputeUnits,
        maxKeys: e.maxKeys,
        maxNetworks: e.maxNetworks,
      },
      createdAt: u.createdAt.toISOString(),
    };
  };
  const security = [{ adminToken: [] }];

  app.get(
    '/admin/users',
    {
      schema: {
        tags: ['admin'],
        summary: 'Find accounts by e-mail',
        security,
        querystring: T.Object({ email: Email }, { additionalProperties: false }),
        response: { 200: ok(T.Array(AdminUser)), 400: ErrorResponse, 401: ErrorResponse },
      },
    },
    async (req) => {
      const user = await accounts.findByEmail(req.query.email);
      return { success: true as const, data: user ? [show(user)] : [] };
    },
  );

  app.patch(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        summary: 'Change an account’s tier and per-account limit overrides (null clears one)',
        security,
        params: T.Object({ id: T.String({ maxLength: 64 }) }),
        body: T.Object(
          {
            tier: T.Optional(T.Union([T.Literal('free'), T.Literal('pro'), T.Literal('max'), T.Literal('enterprise')])),
            limits: T.Optional(
              T.Object(
                {
                  requestsPerMinute: T.Optional(Limit),
                  dailyLimit: T.Optional(Limit),
                  monthlyLimit: T.Optional(Limit),
                },
                { additionalProperties: false },
              ),
            ),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: ok(AdminUser), 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => {
      const { tier, limits } = req.body;
      const patch: Parameters<AccountService['update']>[1] = {};
      if (tier !== undefined) patch.tier = tier;
      if (limits?.requestsPerMinute !== undefined) patch.requestsPerMinute = limits.requestsPerMinute;
      if (limits?.dailyLimit !== undefined) patch.dailyLimit = limits.dailyLimit;
      if (limits?.monthlyLimit !== undefined) patch.monthlyLimit = limits.monthlyLimit;
      const user = await accounts.update(req.params.id, patch);
      if (!user) throw notFound('account');
      // Cached key lookups carry the account's plan: drop them (C20: takes effect at once).
      await keys.accountChanged(user.id);
      return { success: true as const, data: show(user) };
    },
  );
};
