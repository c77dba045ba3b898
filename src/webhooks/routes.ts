// The /webhooks resource (C37-C39): an account's webhook endpoints through the REST API.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService } from '../auth/accounts.ts';
import { signedInAccount } from '../auth/bearer.ts';
import type { Tier, WebhooksConfig } from '../config/schema.ts';
import { unauthorized } from '../errors/http.ts';
import { ErrorResponse, IsoDate, ok, OkMessage } from '../http/schemas.ts';
import { planFeature, webhookPlans } from './endpoints.ts';
import { EVENT_TYPES } from './events.ts';
import type { Webhooks } from './service.ts';

const Slug = T.String({ pattern: '^[a-z0-9-]{1,64}$' });
const Decimal = T.String({ pattern: '^[0-9]+(\\.[0-9]+)?$', maxLength: 80 });
const EventType = T.Union(
  EVENT_TYPES.map((e) => T.Literal(e)),
  { description: 'an event type (C38)' },
);

const Url = T.String({
  minLength: 8,
  maxLength: 2048,
  description: 'where events are POSTed: http or https, no credentials; loopback, private and link-local targets are refused unless webhooks.allowPrivateTargets',
});
const Events = T.Array(EventType, { minItems: 1, maxItems: EVENT_TYPES.length, uniqueItems: true, description: 'the event types this endpoint receives' });
const Filters = T.Object(
  {
    networks: T.Optional(T.Array(Slug, { maxItems: 64, description: 'network slugs; omitted: every network (required for address.activity)' })),
    minValue: T.Optional({ ...Decimal, description: 'whole native units: smaller transfers are left out (whale.alert, address.activity)' }),
    addresses: T.Optional(
      T.Array(T.String({ pattern: '^(0x|xdc|XDC)[0-9a-fA-F]{40}$' }), {
        maxItems: 1000,
        description: 'addresses watched for address.activity (at most 1,000); mixed case must be the EIP-55 checksum',
      }),
    ),
  },
  { additionalProperties: false, description: 'what narrows the events (C38)' },
);
const Description = T.Union([T.String({ maxLength: 500 }), T.Null()], { description: 'a note of your own' });

const Endpoint = T.Object({
  id: T.String(),
  url: T.String(),
  description: T.Union([T.String(), T.Null()]),
  events: T.Array(T.String()),
  filters: Filters,
  status: T.Union([T.Literal('enabled'), T.Literal('disabled')]),
  disabledReason: T.Union([T.String(), T.Null()], { description: 'owner, gone (the receiver answered 410) or failing (5 days of failures)' }),
  createdAt: IsoDate,
  updatedAt: IsoDate,
}, { title: 'WebhookEndpoint' });
const EndpointWithSecret = T.Composite([
  Endpoint,
  T.Object({ secret: T.String({ description: 'the signing secret (whsec_...): shown here only, store it now' }) }),
], { title: 'WebhookEndpointWithSecret' });
const Delivery = T.Object({
  id: T.String(),
  eventId: T.String({ description: 'the webhook-id header' }),
  type: T.String(),
  status: T.Union([T.Literal('pending'), T.Literal('delivered'), T.Literal('failed')]),
  attempts: T.Integer(),
  lastStatusCode: T.Union([T.Integer(), T.Null()]),
  lastDurationMs: T.Union([T.Integer(), T.Null()]),
  lastError: T.Union([T.String(), T.Null()]),
  lastAttemptAt: T.Union([IsoDate, T.Null()]),
  nextAttemptAt: T.Union([IsoDate, T.Null()]),
  deliveredAt: T.Union([IsoDate, T.Null()]),
  createdAt: IsoDate,
}, { title: 'WebhookDelivery' });
const IdParams = T.Object({ id: T.String({ maxLength: 64 }) }, { additionalProperties: false });
const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };
const security = [{ bearerAuth: [] }];
const tags = ['webhooks'];

/** The /webhooks resource (C37-C39). Registered behind the bearer hook. */
export const webhookRoutes: FastifyPluginAsyncTypebox<{ webhooks: Webhooks; accounts: AccountService; maxEndpoints: WebhooksConfig['maxEndpoints'] }> = async (
  app,
  { webhooks, accounts, maxEndpoints },
) => {
  const plans = webhookPlans(maxEndpoints);
  const store = webhooks.endpoints;
  // C37: plans max and enterprise only, checked before the input (another plan learns nothing from it).
  app.addHook('preValidation', async (req) => {
    const user = await signedInAccount(accounts, req);
    if (!user) throw unauthorized('The account no longer exists');
    if (!plans.includes(user.tier as Tier)) throw planFeature(maxEndpoints);
  });

  app.post(
    '/webhooks',
    {
      schema: {
        operationId: 'createWebhook',
        tags,
        summary: 'Create a webhook endpoint (plans max and enterprise)',
        description: 'Answers the endpoint with its signing secret, shown this once. Endpoints per account: max 10, enterprise 100 (403 PLAN_LIMIT past that).',
        security,
        body: T.Object(
          { url: Url, events: Events, filters: T.Optional(Filters), description: T.Optional(Description) },
          { additionalProperties: false },
        ),
        response: { 200: ok(EndpointWithSecret), ...errors },
      },
    },
    async (req) => {
      const { row, secret } = await store.create(req.userId, req.body);
      return { success: true as const, data: { ...store.view(row), secret } };
    },
  );

  app.get(
    '/webhooks',
    {
      schema: { operationId: 'listWebhooks', tags, summary: "The account's webhook endpoints (never their secrets)", security, response: { 200: ok(T.Array(Endpoint)), ...errors } },
    },
    async (req) => ({ success: true as const, data: (await store.list(req.userId)).map((r) => store.view(r)) }),
  );

  app.get(
    '/webhooks/:id',
    { schema: { operationId: 'getWebhook', tags, summary: 'One webhook endpoint', security, params: IdParams, response: { 200: ok(Endpoint), ...errors } } },
    async (req) => ({ success: true as const, data: store.view(await store.get(req.userId, req.params.id)) }),
  );

  app.patch(
    '/webhooks/:id',
    {
      schema: {
        operationId: 'updateWebhook',
        tags,
        summary: 'Change url, events, filters, description or status',
        description: 'Disabling fails the pending deliveries; enabling again clears the reason and the failure streak.',
        security,
        params: IdParams,
        body: T.Object(
          {
            url: T.Optional(Url),
            events: T.Optional(Events),
            filters: T.Optional(Filters),
            description: T.Optional(Description),
            status: T.Optional(T.Union([T.Literal('enabled'), T.Literal('disabled')])),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: ok(Endpoint), ...errors },
      },
    },
    async (req) => ({ success: true as const, data: store.view(await store.update(req.userId, req.params.id, req.body)) }),
  );

  app.delete(
    '/webhooks/:id',
    {
      schema: { operationId: 'deleteWebhook', tags, summary: 'Delete an endpoint and its deliveries', security, params: IdParams, response: { 200: OkMessage, ...errors } },
    },
    async (req) => {
      await store.delete(req.userId, req.params.id);
      return { success: true as const, message: 'Webhook deleted' };
    },
  );

  app.post(
    '/webhooks/:id/rotate-secret',
    {
      schema: {
        operationId: 'rotateWebhookSecret',
        tags,
        summary: 'A new signing secret, shown this once',
        description: 'For webhooks.rotationOverlapSeconds (24 h) the old secret signs too: each delivery then carries two signatures, space-separated.',
        security,
        params: IdParams,
        response: { 200: ok(EndpointWithSecret), ...errors },
      },
    },
    async (req) => {
      const { row, secret } = await store.rotate(req.userId, req.params.id);
      return { success: true as const, data: { ...store.view(row), secret } };
    },
  );

  app.post(
    '/webhooks/:id/test',
    {
      schema: {
        operationId: 'testWebhook',
        tags,
        summary: 'Send a webhook.test event now',
        description: 'The event is queued and sent at once; follow it in GET /webhooks/:id/deliveries.',
        security,
        params: IdParams,
        response: { 200: ok(T.Object({ eventId: T.String(), deliveryId: T.String() })), ...errors },
      },
    },
    async (req) => ({ success: true as const, data: await webhooks.sendTest(req.userId, req.params.id) }),
  );

  app.get(
    '/webhooks/:id/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags,
        summary: "The endpoint's deliveries, newest first",
        security,
        params: IdParams,
        querystring: T.Object(
          { limit: T.Integer({ minimum: 1, maximum: 100, default: 20, description: 'deliveries to list, 1 to 100' }) },
          { additionalProperties: false },
        ),
        response: { 200: ok(T.Array(Delivery)), ...errors },
      },
    },
    async (req) => ({ success: true as const, data: await store.deliveries(req.userId, req.params.id, req.query.limit) }),
  );
};
