// The intents' HTTP face (C41): POST /chain-abstraction/intent, GET /chain-abstraction/intents and /intents/:id.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { ErrorResponse, IsoDate, ok } from '../http/schemas.ts';
import type { IntentService } from './service.ts';

const Hex = (description: string) => T.String({ pattern: '^0x[0-9a-fA-F]*$', description });
const Address = (description: string) => T.String({ pattern: '^0x[0-9a-fA-F]{40}$', description });
const Wei = (description: string) => T.String({ pattern: '^[0-9]+$', description });
const Units = (description: string) => T.String({ description: `${description}; whole native units as an exact decimal string` });
const Slug = (description: string) => T.String({ minLength: 1, maxLength: 64, description });

const IntentBody = T.Object(
  {
    fromNetwork: Slug('origin network slug: the sender locks the amount there'),
    toNetwork: Slug('destination network slug: the recipient receives the output there (same native coin, same network type)'),
    amount: T.String({ minLength: 1, maxLength: 100, description: 'whole native units to lock, as a decimal string ("0.5"); at most the currency’s decimals' }),
    sender: T.String({ minLength: 1, maxLength: 64, description: 'the address that signs and sends the open transaction (0x…, EIP-55 checksum when mixed case; xdc… on the native networks)' }),
    recipient: T.Optional(T.String({ minLength: 1, maxLength: 64, description: 'who receives on the destination; default the sender' })),
    openDeadlineSeconds: T.Optional(T.Integer({ minimum: 10, maximum: 3600, description: 'seconds from now the open may happen in; default 600' })),
    fillDeadlineSeconds: T.Optional(T.Integer({ minimum: 30, maximum: 86400, description: 'seconds after the open the solver has to fill; then anyone may refund; default 600' })),
  },
  { additionalProperties: false },
);

const Output = T.Object({
  token: Hex('bytes32; zero: the native coin'),
  amount: Wei('wei'),
  recipient: Hex('bytes32 (an address left-padded); zero for maxSpent'),
  chainId: T.Integer(),
});

const Step = T.Union([
  T.Object({
    network: T.String(),
    txHash: T.Union([Hex('transaction hash'), T.Null()]),
    status: T.Union([T.Literal('pending'), T.Literal('sent'), T.Literal('confirmed'), T.Literal('reverted'), T.Literal('failed')], {
      description: 'pending: recorded, not yet taken by a node; sent; confirmed: its event is confirmed; reverted; failed: refused by the node',
    }),
    blockNumber: T.Union([T.Integer(), T.Null()]),
    timestamp: T.Union([IsoDate, T.Null()], { description: 'the block time once confirmed' }),
  }, { title: 'IntentStep' }),
  T.Null(),
]);

export const IntentSchema = T.Object(
  {
    id: T.String(),
    status: T.Union([T.Literal('awaiting_open'), T.Literal('opened'), T.Literal('filled'), T.Literal('settled'), T.Literal('expired'), T.Literal('refunded')], {
      description: 'awaiting_open → opened (Open confirmed) → filled (recipient paid) → settled (solver repaid); or expired (never opened) or refunded (not filled in time)',
    }),
    fromNetwork: T.String(),
    toNetwork: T.String(),
    sender: Address('EIP-55'),
    recipient: Address('EIP-55'),
    inputAmount: Units('locked on the origin'),
    outputAmount: Units('received on the destination: inputAmount - fee'),
    fee: Units('feeBps of the amount plus the destination gas of a fill, quoted at creation'),
    order: T.Object(
      {
        user: Address('the sender'),
        originChainId: T.Integer(),
        openDeadline: T.Integer({ description: 'unix seconds' }),
        fillDeadline: T.Integer({ description: 'unix seconds: the latest possible until opened, then the settler’s own' }),
        orderId: Hex('keccak256(abi.encode(originChainId, originSettler, user, nonce)), as the settler computes it'),
        maxSpent: T.Array(Output),
        minReceived: T.Array(Output),
        fillInstructions: T.Array(
          T.Object({
            destinationChainId: T.Integer(),
            destinationSettler: Hex('bytes32'),
            originData: Hex('what DestinationSettler.fill takes (final once opened)'),
          }),
        ),
      },
      { description: 'the ERC-7683 resolved order' },
    ),
    open: T.Object(
      {
        chainId: T.Integer(),
        to: Address('the origin settler'),
        data: Hex('calldata of open(order)'),
        value: Wei('wei to send: exactly the input amount'),
      },
      { description: 'the transaction the sender signs and sends on the origin network' },
    ),
    transactions: T.Object({ open: Step, fill: Step, settle: Step, refund: Step }),
    createdAt: IsoDate,
    updatedAt: IsoDate,
  },
  { title: 'Intent', description: 'a cross-chain intent (C41)' },
);

const security = [{ bearerAuth: [] }];
const tags = ['chain-abstraction'];

/** POST /chain-abstraction/intent, GET /chain-abstraction/intents and /intents/:id (C41). Registered behind the bearer hook. */
export const intentRoutes: FastifyPluginAsyncTypebox<{ intents: IntentService }> = async (app, { intents }) => {
  app.post(
    '/chain-abstraction/intent',
    {
      schema: {
        operationId: 'createIntent',
        tags,
        summary: 'Create an intent to move the native coin from one network to another',
        description:
          'Quotes the fee (intents.feeBps of the amount plus the destination gas of a fill), checks the route and that the solver can fill it (else 409 INSUFFICIENT_LIQUIDITY), and that the intent stays within its shares of the solver’s liquidity on the destination (C51: intents.maxReservePerIntent of it for one intent, intents.maxReservePerAccount for the account’s intents not yet filled, intents.maxReserveAwaitingOpen for all intents waiting for their open; else 409 INSUFFICIENT_LIQUIDITY with details.setting naming the share), and answers the intent with the `open` transaction the sender signs and sends. The solver fills once the Open is confirmed and settles afterwards; an order not filled by its fill deadline is refunded.',
        security,
        body: IntentBody,
        response: { 200: ok(IntentSchema), 400: ErrorResponse, 401: ErrorResponse, 409: ErrorResponse, 502: ErrorResponse, 503: ErrorResponse },
      },
    },
    async (req) => ({ success: true as const, data: await intents.create(req.userId, req.body) }),
  );

  app.get(
    '/chain-abstraction/intents',
    {
      schema: {
        operationId: 'listIntents',
        tags,
        summary: 'The account’s intents, newest first',
        security,
        querystring: T.Object(
          {
            limit: T.Integer({ minimum: 1, maximum: 100, default: 20, description: '1..100, default 20' }),
            before: T.Optional(T.String({ minLength: 1, maxLength: 64, description: 'an intent id: only older ones (paging)' })),
          },
          { additionalProperties: false },
        ),
        response: { 200: ok(T.Array(IntentSchema)), 400: ErrorResponse, 401: ErrorResponse },
      },
    },
    async (req) => ({ success: true as const, data: await intents.list(req.userId, req.query.limit, req.query.before) }),
  );

  app.get(
    '/chain-abstraction/intents/:id',
    {
      schema: {
        operationId: 'getIntent',
        tags,
        summary: 'One intent of the account (another account’s is 404)',
        security,
        params: T.Object({ id: T.String({ minLength: 1, maxLength: 64 }) }),
        response: { 200: ok(IntentSchema), 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => ({ success: true as const, data: await intents.get(req.userId, req.params.id) }),
  );
};
