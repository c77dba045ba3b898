import type { FastifyInstance, FastifyRequest } from 'fastify';
import { unauthorized } from '../errors/http.ts';
import type { TokenService } from './tokens.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in account, set by the bearer hook on protected routes (C6). */
    userId: string;
  }
}

/** Every route registered in `scope` after this needs `Authorization: Bearer <access token>` (C6). */
export function requireBearer(scope: FastifyInstance, tokens: TokenService): void {
  scope.decorateRequest('userId', '');
  scope.addHook('onRequest', async (req: FastifyRequest) => {
    const header = req.headers.authorization;
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) throw unauthorized('Authorization: Bearer <access token> is required');
    req.userId = await tokens.verifyAccess(match[1]);
  });
}
