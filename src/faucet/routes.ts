// The faucet's HTTP face (C28–C30): POST /faucet/request and GET /faucet/balance.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { ErrorResponse, ok } from '../http/schemas.ts';
import type { FaucetService } from './service.ts';

const Hex = (description: string) => T.String({ pattern: '^0x[0-9a-fA-F]+$', description });

const GrantBody = T.Object(
  {
    network: T.String({ minLength: 1, maxLength: 64, description: 'a testnet slug with a faucet wallet (GET /faucet/balance lists them)' }),
    address: T.String({
      minLength: 1,
      maxLength: 64,
      description: '0x address of the recipient; mixed case must carry a valid EIP-55 checksum; xdc… is accepted on the native networks',
    }),
    amount: T.Optional(
      T.String({ minLength: 1, maxLength: 100, description: 'whole native units as a decimal string ("1", "0.5"); default per network, usually "1"' }),
    ),
  },
  { additionalProperties: false },
);

const FaucetResult = T.Object({
  txHash: Hex('hash of the transaction the node accepted'),
  amount: T.String({ description: 'whole native units, as a decimal string' }),
  network: T.String(),
  recipient: Hex('EIP-55 address'),
}, { title: 'FaucetGrant' });

const FaucetBalance = T.Object({
  balance: T.Union([T.String(), T.Null()], { description: 'whole native units as a decimal string; null when no node of the network answered' }),
  symbol: T.String(),
  faucetAddress: Hex('the faucet wallet'),
  error: T.Optional(T.String({ description: 'why balance is null' })),
}, { title: 'FaucetBalance' });

const security = [{ bearerAuth: [] }];

/** POST /faucet/request and GET /faucet/balance (spec 4.2; C28–C30). Registered behind the bearer hook. */
export const faucetRoutes: FastifyPluginAsyncTypebox<{ faucet: FaucetService }> = async (app, { faucet }) => {
  app.post(
    '/faucet/request',
    {
      schema: {
        tags: ['faucet'],
        operationId: 'requestFaucet',
        summary: 'Send testnet coins to an address (answers once a node accepted the transaction)',
        description:
          'One grant per (network, address) and per (network, account) every 24 hours by default: another is 429 FAUCET_COOLDOWN with Retry-After. A faucet wallet that cannot pay is 503 FAUCET_EMPTY. Invalid or refused requests use up nothing.',
        security,
        body: GrantBody,
        response: {
          200: ok(FaucetResult),
          400: ErrorResponse,
          401: ErrorResponse,
          429: ErrorResponse,
          502: ErrorResponse,
          503: ErrorResponse,
        },
      },
    },
    async (req) => ({ success: true as const, data: await faucet.grant(req.userId, req.body) }),
  );

  app.get(
    '/faucet/balance',
    {
      schema: {
        tags: ['faucet'],
        operationId: 'getFaucetBalances',
        summary: 'Every faucet wallet: balance (read live), symbol and address, keyed by testnet slug',
        security,
        response: { 200: ok(T.Record(T.String(), FaucetBalance)), 401: ErrorResponse },
      },
    },
    async () => ({ success: true as const, data: await faucet.balances() }),
  );
};
