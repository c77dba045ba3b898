// The unified balance's HTTP face (C40): GET /chain-abstraction/balance/:address.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { ErrorResponse, IsoDate, ok } from '../http/schemas.ts';
import type { BalanceService } from './service.ts';

const Amount = (description: string) => T.String({ pattern: '^[0-9]+(\\.[0-9]+)?$', description });
const Usd = (description: string) => T.Union([T.Number({ minimum: 0 }), T.Null()], { description });

const ChainBalance = T.Object({
  network: T.String({ description: 'network slug' }),
  chainId: T.Integer({ description: 'EIP-155 chain id' }),
  balance: Amount('whole units on this network, exact decimal string'),
  balanceRaw: T.String({ pattern: '^[0-9]+$', description: 'smallest units (wei for a native coin), exact decimal string' }),
  usd: Usd('US dollars to the cent; null when the price is unknown'),
  blockNumber: T.Integer({ minimum: 0, description: "the block every amount of this network was read at" }),
}, { title: 'ChainBalance' });

const Asset = T.Object({
  symbol: T.String({
    description: 'native coins and tokens of one symbol are one asset over the networks (ETH on Ethereum, Arbitrum, Optimism and Base); mainnets and testnets apart',
  }),
  testnet: T.Boolean({ description: 'true for testnet coins, which never form one asset with mainnet coins of the same symbol' }),
  balance: Amount('whole units over all its networks, exact'),
  usd: Usd('US dollars to the cent; null when a network holding some of it has no price'),
  chains: T.Array(ChainBalance, {
    description: 'where it is held, in config order: a native coin on every network read (zero included), a token only where its balance is not zero',
  }),
}, { title: 'BalanceAsset' });

const UnifiedBalance = T.Object({
  address: T.String({ pattern: '^0x[0-9a-fA-F]{40}$', description: 'the address asked about, in EIP-55 form (an xdc… address is answered as 0x…)' }),
  totalUsd: T.Number({ minimum: 0, description: 'US dollars to the cent, over every amount that has a price' }),
  updatedAt: IsoDate,
  assets: T.Array(Asset, { description: 'largest USD value first; assets without a price last' }),
  errors: T.Array(
    T.Object({
      network: T.String(),
      code: T.String({
        description: 'TIMEOUT: no answer within 3 s; UPSTREAM_ERROR: no node answered, or its answer was unusable; TOKEN_ERROR: one token could not be read (the network is listed without it)',
      }),
      message: T.String(),
    }),
    { description: 'networks (or tokens) left out of the answer, and why' },
  ),
}, { title: 'UnifiedBalance' });

const Params = T.Object({
  address: T.String({
    minLength: 1,
    maxLength: 64,
    description: '0x + 40 hex digits (mixed case must carry a valid EIP-55 checksum) or the same with the xdc prefix',
  }),
});

const Query = T.Object(
  {
    testnets: T.Optional(T.Boolean({ description: 'true: every testnet instead of every mainnet' })),
    networks: T.Optional(
      T.String({ minLength: 1, maxLength: 1000, description: 'comma-separated network slugs (any type) instead of every mainnet; not with testnets' }),
    ),
  },
  { additionalProperties: false },
);

/** GET /chain-abstraction/balance/:address (spec 4.2; C40). Registered behind the bearer hook. */
export const balanceRoutes: FastifyPluginAsyncTypebox<{ balances: BalanceService }> = async (app, { balances }) => {
  app.get(
    '/chain-abstraction/balance/:address',
    {
      schema: {
        operationId: 'getUnifiedBalance',
        tags: ['chain-abstraction'],
        summary: "An address's native coins and configured ERC-20 tokens over many networks, grouped by symbol, in USD",
        description:
          'Every mainnet by default, every testnet with `testnets=true`, or the `networks` named. Each network is read in one batch through its upstreams, all amounts at one block, within 3 s; a network that fails or is slower is listed in `errors` and the others answer. When no network answers: 502 UPSTREAM_ERROR. Reads are cached 5 s per (address, network). Every plan.',
        security: [{ bearerAuth: [] }],
        params: Params,
        querystring: Query,
        response: { 200: ok(UnifiedBalance), 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 502: ErrorResponse },
      },
    },
    async (req) => ({ success: true as const, data: await balances.balance(req.params.address, req.query) }),
  );
};
