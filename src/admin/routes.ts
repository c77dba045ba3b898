// The admin API (C8): accounts, plans and keys as the operator manages them, behind ADMIN_TOKEN.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService, UserRow } from '../auth/accounts.ts';
import type { PlansConfig } from '../config/schema.ts';
import { HttpError, notFound } from '../errors/http.ts';
import { Email, ErrorResponse, ok, StoredCount } from '../http/schemas.ts';
import type { AccountLimitsPatch, KeyRow, KeyService } from '../keys/service.ts';
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

/** A key as the admin sees it: never its value (C19), only the prefix that names it. */
const AdminKey = T.Object({
  id: T.String(),
  name: T.String(),
  prefix: T.String(),
  status: T.String(),
  networks: T.Array(T.String()),
  allNetworks: T.Boolean(),
  rateLimit: T.Union([T.Integer(), T.Null()]),
  expiresAt: T.Union([T.String(), T.Null()]),
  createdAt: T.String(),
  lastUsedAt: T.Union([T.String(), T.Null()]),
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
  plans: PlansConfig;
}> = async (app, { token, accounts, keys, plans }) => {
  const expected = digest(token);
  app.addHook('onRequest', async (req) => {
    const given = req.headers['x-admin-token'];
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
      throw new HttpError('UNAUTHORIZED', 'X-Admin-Token is missing or wrong');
    }
  });

  const show = (u: UserRow) => {
    const e = effectiveLimits(plans, u);
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
        summary: 'Find an account by e-mail, or list accounts oldest first (C52)',
        security,
        querystring: T.Object(
          {
            email: T.Optional(Email),
            limit: T.Optional(T.Integer({ minimum: 1, maximum: 500, default: 50 })),
            offset: T.Optional(T.Integer({ minimum: 0, maximum: 2_147_483_647, default: 0 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: ok(T.Array(AdminUser)), 400: ErrorResponse, 401: ErrorResponse },
      },
    },
    async (req) => {
      const { email, limit = 50, offset = 0 } = req.query;
      if (email !== undefined) {
        const user = await accounts.findByEmail(email);
        return { success: true as const, data: user ? [show(user)] : [] };
      }
      return { success: true as const, data: (await accounts.list({ limit, offset })).map(show) };
    },
  );

  const UserId = T.Object({ id: T.String({ maxLength: 64 }) });
  const userOr404 = async (id: string) => {
    const user = await accounts.findById(id);
    if (!user) throw notFound('account');
    return user;
  };
  const showKey = (k: KeyRow, owner: UserRow, now: Date) => ({
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    status: k.status !== 'revoked' && k.expiresAt && k.expiresAt <= now ? 'expired' : k.status,
    networks: keys.networksOf(k, owner),
    allNetworks: k.allNetworks,
    rateLimit: k.rateLimit,
    expiresAt: k.expiresAt?.toISOString() ?? null,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
  });

  app.get(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        operationId: 'adminGetUser',
        summary: 'One account by id (C52)',
        security,
        params: UserId,
        response: { 200: ok(AdminUser), 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => ({ success: true as const, data: show(await userOr404(req.params.id)) }),
  );

  app.get(
    '/admin/users/:id/keys',
    {
      schema: {
        tags: ['admin'],
        operationId: 'adminListKeys',
        summary: 'An account’s API keys, oldest first, without their values (C52)',
        security,
        params: UserId,
        response: { 200: ok(T.Array(AdminKey)), 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => {
      const owner = await userOr404(req.params.id);
      const now = new Date();
      return { success: true as const, data: (await keys.rows(req.params.id)).map((k) => showKey(k, owner, now)) };
    },
  );

  app.post(
    '/admin/users/:id/keys/:keyId/revoke',
    {
      schema: {
        tags: ['admin'],
        operationId: 'adminRevokeKey',
        summary: 'Revoke one of an account’s API keys for good (C20, C52)',
        security,
        params: T.Object({ id: T.String({ maxLength: 64 }), keyId: T.String({ maxLength: 64 }) }),
        response: { 200: ok(AdminKey), 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => {
      const owner = await userOr404(req.params.id);
      const row = await keys.revoke(req.params.id, req.params.keyId);
      req.log.info({ userId: req.params.id, keyId: row.id, prefix: row.prefix }, 'key revoked by an admin');
      return { success: true as const, data: showKey(row, owner, new Date()) };
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
