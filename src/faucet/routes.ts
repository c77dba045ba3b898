import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FaucetService } from './service.ts';

/** POST /faucet/request and GET /faucet/balance (C28–C30). TO BE BUILT. */
export const faucetRoutes: FastifyPluginAsyncTypebox<{ faucet: FaucetService }> = async () => {};
