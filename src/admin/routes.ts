import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService, UserRow } from '../auth/accounts.ts';
import type { Config } from '../config/schema.ts';
import { HttpError, notFound } from '../errors/http.ts';
import { Email, ErrorResponse, ok, StoredCount } from '../http/schemas.ts';
import type { AccountLimitsPatch, KeyService } from '../keys/service.ts';
import { effectiveLimits } from '../metering/plans.ts';

const Limit = T.Union([StoredCount(), T.Null()]);
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

const AdminUserChanged = T.Object({
  ...AdminUser.properties,
  // Keys brought within the new plan by this change (ids), see KeyService.changeAccountLimits.
  keyChanges: T.Object({ deactivated: T.Array(T.String()), networksChanged: T.Array(T.String()), rateLimited: T.Array(T.String()) }),
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
        operationId: 'adminFindUsers',
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
        operationId: 'adminUpdateUser',
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
        response: { 200: ok(AdminUserChanged), 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => {
      const { tier, limits } = req.body;
      const patch: AccountLimitsPatch = {};
      if (tier !== undefined) patch.tier = tier;
      if (limits?.requestsPerMinute !== undefined) patch.requestsPerMinute = limits.requestsPerMinute;
      if (limits?.dailyLimit !== undefined) patch.dailyLimit = limits.dailyLimit;
      if (limits?.monthlyLimit !== undefined) patch.monthlyLimit = limits.monthlyLimit;
      // A downgrade also switches off, narrows or slows keys beyond the new plan (C14–C16), and
      // drops every cached lookup of the account's keys (C20: takes effect at once).
      const changed = await keys.changeAccountLimits(req.params.id, patch);
      if (!changed) throw notFound('account');
      if (Object.values(changed.keys).some((ids: readonly string[]) => ids.length > 0)) {
        req.log.info({ userId: changed.user.id, tier: changed.user.tier, ...changed.keys }, 'keys brought within the account’s plan');
      }
      return { success: true as const, data: { ...show(changed.user), keyChanges: changed.keys } };
    },
  );
};
