import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService } from '../auth/accounts.ts';
import type { Config } from '../config/schema.ts';
import { unauthorized } from '../errors/http.ts';
import { ErrorResponse, IsoDate, ok, OkMessage } from '../http/schemas.ts';
import { effectiveLimits } from '../metering/plans.ts';
import type { KeyService } from './service.ts';

const Slug = T.String({ pattern: '^[a-z0-9-]{1,64}$' });
const Name = T.String({ minLength: 1, maxLength: 100, pattern: '\\S' });
const RateLimit = T.Integer({ minimum: 1, description: 'requests per minute (C14)' });
const Status = T.Union([T.Literal('active'), T.Literal('inactive'), T.Literal('revoked'), T.Literal('expired')]);
const Nullable = <S extends Parameters<typeof T.Union>[0][number]>(s: S) => T.Union([s, T.Null()]);

const ApiKey = T.Object({
  id: T.String(),
  name: T.String(),
  key: T.String({ description: 'the full key; send it as X-API-Key or as the last path segment' }),
  prefix: T.String(),
  networks: T.Array(T.String()),
  rateLimit: Nullable(T.Integer({ description: 'requests per minute; null = unlimited (enterprise)' })),
  status: Status,
  expiresAt: Nullable(IsoDate),
  createdAt: IsoDate,
});
const ApiKeyListItem = T.Composite([
  ApiKey,
  T.Object({
    usage: T.Object({ daily: T.Integer(), monthly: T.Integer() }),
    lastUsedAt: Nullable(IsoDate),
  }),
]);
const IdParams = T.Object({ id: T.String({ maxLength: 64 }) });
const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };
const security = [{ bearerAuth: [] }];

/** API key routes (spec 4.2; C14–C16, C19–C21). Registered behind the bearer hook. */
export const keyRoutes: FastifyPluginAsyncTypebox<{ keys: KeyService; accounts: AccountService; config: Config }> = async (
  app,
  { keys, accounts, config },
) => {
  const planRate = async (userId: string) => {
    const user = await accounts.findById(userId);
    if (!user) throw unauthorized('The account no longer exists');
    return effectiveLimits(config, user).requestsPerMinute;
  };

  app.get(
    '/api-keys',
    { schema: { tags: ['api-keys'], summary: "The account's API keys", security, response: { 200: ok(T.Array(ApiKeyListItem)), ...errors } } },
    async (req) => ({ success: true as const, data: await keys.list(req.userId, await planRate(req.userId)) }),
  );

  app.post(
    '/api-keys',
    {
      schema: {
        tags: ['api-keys'],
        summary: 'Create an API key',
        security,
        body: T.Object(
          {
            name: Name,
            networks: T.Optional(T.Array(Slug, { maxItems: 64, description: 'empty or omitted: every network the plan allows (C16)' })),
            rateLimit: T.Optional(RateLimit),
            expiresAt: T.Optional(Nullable(IsoDate)),
          },
          { additionalProperties: false },
        ),
        response: { 200: ok(ApiKey), ...errors },
      },
    },
    async (req) => {
      const row = await keys.create(req.userId, req.body);
      return { success: true as const, data: keys.view(row, await planRate(req.userId)) };
    },
  );

  app.patch(
    '/api-keys/:id',
    {
      schema: {
        tags: ['api-keys'],
        summary: 'Change a key: name, networks, rate limit, active/inactive, expiry (C20)',
        security,
        params: IdParams,
        body: T.Object(
          {
            name: T.Optional(Name),
            networks: T.Optional(T.Array(Slug, { maxItems: 64 })),
            rateLimit: T.Optional(Nullable(RateLimit)),
            status: T.Optional(T.Union([T.Literal('active'), T.Literal('inactive')])),
            expiresAt: T.Optional(Nullable(IsoDate)),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: ok(ApiKey), ...errors },
      },
    },
    async (req) => {
      const row = await keys.update(req.userId, req.params.id, req.body);
      return { success: true as const, data: keys.view(row, await planRate(req.userId)) };
    },
  );

  app.post(
    '/api-keys/:id/revoke',
    {
      schema: { tags: ['api-keys'], summary: 'Revoke a key for good (it stays listed)', security, params: IdParams, response: { 200: ok(ApiKey), ...errors } },
    },
    async (req) => {
      const row = await keys.revoke(req.userId, req.params.id);
      return { success: true as const, data: keys.view(row, await planRate(req.userId)) };
    },
  );

  app.post(
    '/api-keys/:id/rotate',
    {
      schema: { tags: ['api-keys'], summary: 'New key value; the old one stops at once', security, params: IdParams, response: { 200: ok(ApiKey), ...errors } },
    },
    async (req) => {
      const row = await keys.rotate(req.userId, req.params.id);
      return { success: true as const, data: keys.view(row, await planRate(req.userId)) };
    },
  );

  app.delete(
    '/api-keys/:id',
    {
      schema: { tags: ['api-keys'], summary: 'Delete a key (cannot be undone)', security, params: IdParams, response: { 200: OkMessage, ...errors } },
    },
    async (req) => {
      await keys.delete(req.userId, req.params.id);
      return { success: true as const, message: 'API key deleted' };
    },
  );
};
