// GET /networks and /networks/:slug: the public list of networks (C2, C6).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { notFound } from '../errors/http.ts';
import { ErrorResponse, ok } from '../http/schemas.ts';
import type { Network, Networks } from './networks.ts';

const Currency = T.Object({ name: T.String(), symbol: T.String(), decimals: T.Integer() }, { title: 'Currency' });
const NetworkSummary = T.Object({
  id: T.String(),
  name: T.String(),
  slug: T.String(),
  chainId: T.Integer(),
  type: T.Union([T.Literal('mainnet'), T.Literal('testnet')]),
  rpcUrl: T.String({ description: 'JSON-RPC over HTTP: append /{apiKey}, or send the key in X-API-Key' }),
  wsUrl: T.String({ description: 'JSON-RPC over WebSocket: append ?apiKey={apiKey}' }),
  currency: Currency,
}, { title: 'NetworkSummary' });
const NetworkDetail = T.Composite([
  NetworkSummary,
  T.Object({ explorerUrl: T.Union([T.String(), T.Null()], { description: 'the block explorer; null when there is none (the devnet)' }), supportedMethods: T.Array(T.String()) }),
], { title: 'NetworkDetail' });

/** GET /networks and /networks/:slug: public (C6). */
export const networkRoutes: FastifyPluginAsyncTypebox<{ networks: Networks }> = async (app, { networks }) => {
  const summary = (n: Network) => ({
    id: n.slug,
    name: n.name,
    slug: n.slug,
    chainId: n.chainId,
    type: n.type,
    rpcUrl: networks.rpcUrl(n.slug),
    wsUrl: networks.wsUrl(n.slug),
    currency: n.currency,
  });

  app.get(
    '/networks',
    {
      schema: {
        tags: ['networks'],
        operationId: 'listNetworks',
        summary: 'List the supported networks',
        response: { 200: ok(T.Array(NetworkSummary)) },
      },
    },
    async () => ({ success: true as const, data: networks.all.map(summary) }),
  );

  app.get(
    '/networks/:slug',
    {
      schema: {
        tags: ['networks'],
        operationId: 'getNetwork',
        summary: 'One network, with its explorer and supported methods',
        params: T.Object({ slug: T.String() }),
        response: { 200: ok(NetworkDetail), 404: ErrorResponse },
      },
    },
    async (req) => {
      const n = networks.bySlug(req.params.slug);
      if (!n) throw notFound('network');
      return {
        success: true as const,
        data: { ...summary(n), explorerUrl: n.explorerUrl, supportedMethods: [...n.supportedMethods] },
      };
    },
  );
};
