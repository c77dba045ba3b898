// The signed-in account's own routes (C6): /me, logout and password change.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { PlansConfig } from '../config/schema.ts';
import { badRequest, unauthorized } from '../errors/http.ts';
import { ErrorResponse, ok, OkMessage } from '../http/schemas.ts';
import type { Meter } from '../metering/meter.ts';
import { effectiveLimits } from '../metering/plans.ts';
import type { RestLimits } from '../metering/rest-limits.ts';
import type { AccountService } from './accounts.ts';
import { checkNewPassword } from './password-rules.ts';
import { clearRefreshCookie, Password, Tokens, UserSchema } from './routes.ts';
import type { TokenService } from './tokens.ts';

const Limit = T.Union([T.Integer(), T.Null()]);
const Me = T.Composite([
  UserSchema,
  T.Object({
    limits: T.Object(
      {
        requestsPerMinute: Limit,
        dailyLimit: Limit,
        monthlyLimit: T.Union([T.Integer(), T.Null()], { description: 'compute units per calendar month (UTC)' }),
        maxKeys: Limit,
        maxNetworks: Limit,
      },
      { description: "the plan's limits with this account's overrides; null = unlimited" }, // C8, C9
    ),
    remaining: T.Object(
      {
        requestsThisMinute: Limit,
        requestsToday: Limit,
        computeUnitsThisMonth: Limit,
      },
      { description: 'left now over all the account\'s keys; null = unlimited' }, // C10–C12
    ),
  }),
], { title: 'Me' });
const errors = { 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };
const security = [{ bearerAuth: [] }];

/**
 * The signed-in account: `/me`, logout (this login or every login) and password change.
 * Registered behind the bearer hook (C6).
 */
export const accountRoutes: FastifyPluginAsyncTypebox<{
  accounts: AccountService;
  tokens: TokenService;
  limits: RestLimits;
  meter: Meter;
  plans: PlansConfig;
  /** The public URL is https: the refresh cookie is Secure (C43). */
  publicHttps: boolean;
}> = async (app, { accounts, tokens, limits, meter, plans, publicHttps }) => {
  const account = async (userId: string) => {
    const user = await accounts.findById(userId);
    if (!user) throw unauthorized('The account no longer exists');
    return user;
  };

  app.get(
    '/me',
    {
      schema: {
        tags: ['auth'],
        operationId: 'getMe',
        summary: 'The signed-in account, its limits and what is left of them now',
        security,
        response: { 200: ok(Me), ...errors },
      },
    },
    async (req) => {
      const user = await account(req.userId);
      const l = effectiveLimits(plans, user);
      return {
        success: true as const,
        data: {
          id: user.id,
          email: user.email,
          name: user.name,
          tier: user.tier as 'free' | 'pro' | 'max' | 'enterprise',
          limits: {
            requestsPerMinute: l.requestsPerMinute,
            dailyLimit: l.dailyLimit,
            monthlyLimit: l.monthlyComputeUnits,
            maxKeys: l.maxKeys,
            maxNetworks: l.maxNetworks,
          },
          remaining: await meter.accountRemaining(user.id, l),
        },
      };
    },
  );

  app.post(
    '/auth/logout',
    {
      schema: {
        tags: ['auth'],
        operationId: 'logout',
        summary: "Sign this login out: its refresh token stops working (the access token lives out its 15 minutes)",
        security,
        response: { 200: OkMessage, ...errors },
      },
    },
    async (req, reply) => {
      await tokens.revokeFamily(req.tokenFamily);
      clearRefreshCookie(req, reply, publicHttps); // C43: the dashboard's cookie goes too
      return { success: true as const, message: 'Signed out' };
    },
  );

  app.post(
    '/auth/logout-all',
    {
      schema: {
        tags: ['auth'],
        operationId: 'logoutAll',
        summary: 'Sign out everywhere: every refresh token of the account stops working, this login included (access tokens live out their 15 minutes)',
        security,
        response: { 200: OkMessage, ...errors },
      },
    },
    async (req, reply) => {
      await tokens.revokeAll(req.userId);
      clearRefreshCookie(req, reply, publicHttps);
      return { success: true as const, message: 'Signed out everywhere' };
    },
  );

  app.post(
    '/auth/password',
    {
      schema: {
        tags: ['auth'],
        operationId: 'changePassword',
        summary: 'Change the password; every other login is signed out and this one gets fresh tokens',
        security,
        body: T.Object(
          { currentPassword: T.String({ minLength: 1, maxLength: 256 }), newPassword: Password },
          { additionalProperties: false },
        ),
        response: { 200: ok(Tokens), ...errors },
      },
    },
    async (req) => {
      checkNewPassword(req.body.newPassword, 'body.newPassword');
      const user = await account(req.userId);
      // C17: guesses of the current password count as failed logins of this (IP, e-mail).
      const attempt = await limits.loginAttempt(req, user.email);
      const right = await accounts.checkPassword(user, req.body.currentPassword).catch(async (err: unknown) => {
        await attempt.release();
        throw err;
      });
      if (!right) {
        throw badRequest('Invalid request: body.currentPassword is wrong', [{ field: 'body.currentPassword', message: 'is wrong' }]);
      }
      await attempt.release();
      await accounts.setPassword(user.id, req.body.newPassword);
      // Every login, this one included, is revoked; this one goes on under a new family.
      await tokens.revokeAll(user.id);
      return { success: true as const, data: await tokens.issue(user.id) };
    },
  );
};
