// The bearer hook (C6): the REST routes that need a signed-in account's access token.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, unauthorized } from '../errors/http.ts';
import type { RestLimits } from '../metering/rest-limits.ts';
import type { AccountService, UserRow } from './accounts.ts';
import type { TokenService } from './tokens.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in account, set by the bearer hook on protected routes (C6). */
    userId: string;
    /** The login (refresh-token family) the access token belongs to. */
    tokenFamily: string;
  }
}

/**
 * Every route registered in `scope` after this needs `Authorization: Bearer <access token>` (C6).
 * With `limits`, failed authentications count per client IP and past the limit answer 429 (C17);
 * the 401 and the 429 carry that window's C13 headers.
 */
export function requireBearer(scope: FastifyInstance, tokens: TokenService, limits?: RestLimits): void {
  scope.decorateRequest('userId', '');
  scope.decorateRequest('tokenFamily', '');
  scope.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    let claims: Awaited<ReturnType<TokenService['verifyAccess']>>;
    try {
      const header = req.headers.authorization;
      const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
      if (!match?.[1]) throw unauthorized('Authorization: Bearer <access token> is required');
      claims = await tokens.verifyAccess(match[1]);
    } catch (err) {
      if (limits && err instanceof HttpError && err.statusCode === 401) throw (await limits.bearerFailed(req, reply)) ?? err;
      throw err;
    }
    req.userId = claims.userId;
    req.tokenFamily = claims.familyId;
  });
}

/** Each request's read of its signed-in account, while the request lives. */
const accountReads = new WeakMap<FastifyRequest, Promise<UserRow | undefined>>();

/**
 * The signed-in account's row (undefined when it no longer exists), one for the whole request
 * however many steps ask: the REST limits' X-CU-Remaining (C13) and a route's plan check (C36,
 * C37, C46) see the same row. It comes from `AccountService.signedIn`: shared with the account's
 * other requests, read from storage at most once a second, and again at once after a tier or
 * limits change (C20).
 */
export function signedInAccount(accounts: AccountService, req: FastifyRequest): Promise<UserRow | undefined> {
  let read = accountReads.get(req);
  if (!read) accountReads.set(req, (read = accounts.signedIn(req.userId)));
  return read;
}
