import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { HttpError } from '../errors/http.ts';
import { Email, ErrorResponse, ok } from '../http/schemas.ts';
import type { RestLimits } from '../metering/rest-limits.ts';
import { type AccountService, toPublicUser } from './accounts.ts';
import { checkNewPassword } from './password-rules.ts';
import type { TokenService } from './tokens.ts';

export const UserSchema = T.Object({
  id: T.String(),
  email: T.String(),
  name: T.String(),
  tier: T.Union([T.Literal('free'), T.Literal('pro'), T.Literal('max'), T.Literal('enterprise')]),
});
export const Tokens = T.Object({ accessToken: T.String(), refreshToken: T.String() });
const Session = ok(T.Object({ user: UserSchema, tokens: Tokens }));
// C5: at least 8 characters; the upper bound keeps hashing cheap for absurd inputs. Blank and
// common passwords are refused by checkNewPassword.
export const Password = T.String({ minLength: 8, maxLength: 256, description: 'at least 8 characters, not blank, not a common password' });
const errors = { 400: ErrorResponse, 401: ErrorResponse, 409: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };

/** Register, login, refresh: exempt from the bearer requirement (C6). */
export const authRoutes: FastifyPluginAsyncTypebox<{
  accounts: AccountService;
  tokens: TokenService;
  limits: RestLimits;
}> = async (app, { accounts, tokens, limits }) => {
  app.post(
    '/auth/register',
    {
      schema: {
        tags: ['auth'],
        summary: 'Create an account (free plan) and sign in',
        body: T.Object(
          { email: Email, password: Password, name: T.String({ minLength: 1, maxLength: 100, pattern: '\\S' }) },
          { additionalProperties: false },
        ),
        response: { 200: Session, ...errors },
      },
    },
    async (req) => {
      // Spec 7: success is 200, creation included.
      checkNewPassword(req.body.password, 'body.password');
      await limits.registration(req); // C17
      const user = await accounts.register(req.body);
      const pair = await tokens.issue(user.id);
      return { success: true as const, data: { user: toPublicUser(user), tokens: pair } };
    },
  );

  app.post(
    '/auth/login',
    {
      schema: {
        tags: ['auth'],
        summary: 'Sign in with e-mail and password',
        body: T.Object({ email: Email, password: T.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false }),
        response: { 200: Session, ...errors },
      },
    },
    async (req) => {
      // C17: failed logins are limited per (client IP, e-mail); the place is taken before the check.
      const attempt = await limits.loginAttempt(req, req.body.email);
      const user = await accounts.authenticate(req.body.email, req.body.password).catch(async (err: unknown) => {
        if (!(err instanceof HttpError && err.code === 'INVALID_CREDENTIALS')) await attempt.release();
        throw err;
      });
      await attempt.release();
      const pair = await tokens.issue(user.id);
      return { success: true as const, data: { user: toPublicUser(user), tokens: pair } };
    },
  );

  app.post(
    '/auth/refresh',
    {
      schema: {
        tags: ['auth'],
        summary: 'Exchange a refresh token for a new pair (the old one stops working)',
        body: T.Object({ refreshToken: T.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false }),
        response: { 200: ok(Tokens), ...errors },
      },
    },
    async (req) => ({ success: true as const, data: await tokens.refresh(req.body.refreshToken) }),
  );
};
