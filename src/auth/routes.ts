// Register, login and refresh (C4, C5), and the dashboard's refresh cookie (C43).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, HttpError, unauthorized } from '../errors/http.ts';
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
}, { title: 'User' });
export const Tokens = T.Object({ accessToken: T.String(), refreshToken: T.String() }, { title: 'Tokens' });
/** Register, login and refresh: the refresh token is left out of the body when it went into the cookie. */
const SessionTokens = T.Object({
  accessToken: T.String(),
  refreshToken: T.Optional(T.String({ description: 'absent with "session": "cookie" (then it is in the HttpOnly cookie)' })),
}, { title: 'SessionTokens' });
const Session = ok(T.Object({ user: UserSchema, tokens: SessionTokens }, { title: 'Session' }));
const SessionMode = T.Optional(
  T.Literal('cookie', {
    description:
      'for browsers: the refresh token is set as an HttpOnly, SameSite=Strict cookie for /api/v1/auth instead of being answered; /auth/refresh then reads it from there',
  }),
);

/**
 * C43: the dashboard's refresh token. HttpOnly (scripts cannot read it), SameSite=Strict (no other
 * site's page can make the browser send it), sent only to /api/v1/auth/*, Secure over https.
 */
export const REFRESH_COOKIE = 'junction_refresh';
const COOKIE_PATH = '/api/v1/auth';

/**
 * C43: Secure when users reach the gateway over https: the public address is https (behind a
 * TLS-terminating proxy the gateway itself sees plain http), or a trusted proxy says
 * `X-Forwarded-Proto: https` (Fastify's `req.protocol` believes the header only from
 * `server.trustedProxies`). Plain http with neither, as in local development, is not Secure: a
 * browser would not send the cookie back.
 */
function cookieHeader(req: FastifyRequest, publicHttps: boolean, value: string, maxAgeSeconds: number): string {
  const secure = publicHttps || req.protocol === 'https' ? '; Secure' : '';
  return `${REFRESH_COOKIE}=${value}; Path=${COOKIE_PATH}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure}`;
}

/** Puts the refresh token in the cookie (for as long as the token lives, C5) and leaves it out of the answer. */
function intoCookie(req: FastifyRequest, reply: FastifyReply, publicHttps: boolean, pair: { accessToken: string; refreshToken: string }) {
  const claims = JSON.parse(Buffer.from(pair.refreshToken.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp: number };
  const ttlSeconds = Math.max(0, claims.exp - Math.floor(Date.now() / 1000));
  reply.header('set-cookie', cookieHeader(req, publicHttps, pair.refreshToken, ttlSeconds)).header('cache-control', 'no-store');
  return { accessToken: pair.accessToken };
}

/** Clears the dashboard's refresh cookie (sign out). */
export function clearRefreshCookie(req: FastifyRequest, reply: FastifyReply, publicHttps: boolean): void {
  if (readRefreshCookie(req) !== undefined) reply.header('set-cookie', cookieHeader(req, publicHttps, '', 0));
}

/** The refresh token of the cookie, if the request carries one. */
export function readRefreshCookie(req: FastifyRequest): string | undefined {
  for (const part of String(req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === REFRESH_COOKIE) return part.slice(i + 1).trim() || undefined;
  }
  return undefined;
}
// C5: at least 8 characters; the upper bound keeps hashing cheap for absurd inputs. Blank and
// common passwords are refused by checkNewPassword.
export const Password = T.String({ minLength: 8, maxLength: 256, description: 'at least 8 characters, not blank, not a common password' });
const errors = { 400: ErrorResponse, 401: ErrorResponse, 409: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };

/** Register, login, refresh: exempt from the bearer requirement (C6). */
export const authRoutes: FastifyPluginAsyncTypebox<{
  accounts: AccountService;
  tokens: TokenService;
  limits: RestLimits;
  /** The public address is https: the refresh cookie is always Secure (C43). */
  publicHttps: boolean;
}> = async (app, { accounts, tokens, limits, publicHttps }) => {
  app.post(
    '/auth/register',
    {
      schema: {
        tags: ['auth'],
        operationId: 'register',
        summary: 'Create an account (free plan) and sign in',
        body: T.Object(
          { email: Email, password: Password, name: T.String({ minLength: 1, maxLength: 100, pattern: '\\S' }), session: SessionMode },
          { additionalProperties: false },
        ),
        response: { 200: Session, ...errors },
      },
    },
    async (req, reply) => {
      // Spec 7: success is 200, creation included.
      checkNewPassword(req.body.password, 'body.password');
      await limits.registration(req); // C17
      const { session, ...account } = req.body;
      const user = await accounts.register(account);
      const pair = await tokens.issue(user.id);
      return { success: true as const, data: { user: toPublicUser(user), tokens: session === 'cookie' ? intoCookie(req, reply, publicHttps, pair) : pair } };
    },
  );

  app.post(
    '/auth/login',
    {
      schema: {
        tags: ['auth'],
        operationId: 'login',
        summary: 'Sign in with e-mail and password',
        body: T.Object({ email: Email, password: T.String({ minLength: 1, maxLength: 256 }), session: SessionMode }, { additionalProperties: false }),
        response: { 200: Session, ...errors },
      },
    },
    async (req, reply) => {
      // C17: failed logins are limited per (client IP, e-mail); the place is taken before the check.
      const attempt = await limits.loginAttempt(req, req.body.email);
      const user = await accounts.authenticate(req.body.email, req.body.password).catch(async (err: unknown) => {
        if (!(err instanceof HttpError && err.code === 'INVALID_CREDENTIALS')) await attempt.release();
        throw err;
      });
      await attempt.release();
      const pair = await tokens.issue(user.id);
      return { success: true as const, data: { user: toPublicUser(user), tokens: req.body.session === 'cookie' ? intoCookie(req, reply, publicHttps, pair) : pair } };
    },
  );

  app.post(
    '/auth/refresh',
    {
      schema: {
        tags: ['auth'],
        operationId: 'refreshTokens',
        summary: 'Exchange a refresh token for a new pair (the old one stops working)',
        description: 'The token comes in the body, or, with "session": "cookie" and no token in the body, from the cookie set at login; the new one then goes back into the cookie.',
        body: T.Object(
          { refreshToken: T.Optional(T.String({ minLength: 1, maxLength: 4096 })), session: SessionMode },
          { additionalProperties: false },
        ),
        response: { 200: ok(SessionTokens), ...errors },
      },
    },
    async (req, reply) => {
      const { refreshToken, session } = req.body;
      if (refreshToken !== undefined) {
        const pair = await tokens.refresh(refreshToken);
        return { success: true as const, data: session === 'cookie' ? intoCookie(req, reply, publicHttps, pair) : pair };
      }
      // C43: the dashboard's token, from its HttpOnly cookie.
      const fromCookie = session === 'cookie' ? readRefreshCookie(req) : undefined;
      if (fromCookie === undefined) {
        if (session === 'cookie') throw unauthorized('Not signed in: no refresh cookie; sign in again');
        throw badRequest('Invalid request: body.refreshToken is required', [{ field: 'body.refreshToken', message: 'is required' }]);
      }
      let pair;
      try {
        pair = await tokens.refresh(fromCookie);
      } catch (err) {
        // A dead cookie (used, revoked, expired) goes away with its error.
        reply.header('set-cookie', cookieHeader(req, publicHttps, '', 0));
        throw err;
      }
      return { success: true as const, data: intoCookie(req, reply, publicHttps, pair) };
    },
  );
};
