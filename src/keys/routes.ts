// The /keys resource (C14-C21): an account's API keys through the REST API.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AccountService } from '../auth/accounts.ts';
import type { Networks } from '../chains/networks.ts';
import { unauthorized } from '../errors/http.ts';
import { ErrorResponse, IsoDate, ok, OkMessage, StoredCount } from '../http/schemas.ts';
import { MAX_JWT_KEYS, MAX_LIST_ENTRIES } from './allowlist-settings.ts';
import type { KeyService } from './service.ts';

const Slug = T.String({ pattern: '^[a-z0-9-]{1,64}$' });
const Name = T.String({ minLength: 1, maxLength: 100, pattern: '\\S' });
const RateLimit = StoredCount({ description: 'requests per minute, at most the plan rate' });
const Status = T.Union([T.Literal('active'), T.Literal('inactive'), T.Literal('revoked'), T.Literal('expired')]);
const Nullable = <S extends Parameters<typeof T.Union>[0][number]>(s: S) => T.Union([s, T.Null()]);

// A key's allowlists and JWT option (docs/decisions.md, "API keys"). Lengths are bounded here; the values themselves
// (origins, CIDRs, addresses, method names, public keys) are checked in allowlist-settings.ts, 400 naming the entry.
const Entry = T.String({ minLength: 1, maxLength: 256 });
const List = (description: string) => T.Array(Entry, { maxItems: MAX_LIST_ENTRIES, description: `${description}; empty: any` });
const AccessInput = {
  allowedOrigins: T.Optional(List('browser origins allowed (scheme://host[:port]; https://*.example.com for its subdomains)')),
  requireOrigin: T.Optional(T.Boolean({ description: 'with allowedOrigins: refuse requests without an Origin header too (default true)' })),
  allowedIps: T.Optional(List('client IP addresses and CIDR ranges allowed, IPv4 or IPv6')),
  allowedMethods: T.Optional(List('exact JSON-RPC method names allowed')),
  allowedContracts: T.Optional(List('contract addresses where calls may run or read code; each method is judged by its rule and one the list cannot judge is refused (docs/rest-api.md "How the contract list judges each method")')),
  requireJwt: T.Optional(T.Boolean({ description: 'every request must carry Authorization: Bearer <jwt> signed by one of jwtPublicKeys' })),
  jwtPublicKeys: T.Optional(
    T.Array(
      T.Object(
        {
          name: T.String({ minLength: 1, maxLength: 100, pattern: '\\S' }),
          publicKey: T.Union([T.String({ minLength: 1, maxLength: 8192, description: 'PEM (SPKI)' }), T.Object({}, { additionalProperties: true, description: 'JWK' })]),
        },
        { additionalProperties: false },
      ),
      { maxItems: MAX_JWT_KEYS, description: 'ES256 (P-256), RS256 (2048 bits or more) or EdDSA (Ed25519) public keys; replaces the registered ones' },
    ),
  ),
};
const AccessView = T.Object({
  allowedOrigins: T.Array(T.String()),
  requireOrigin: T.Boolean(),
  allowedIps: T.Array(T.String()),
  allowedMethods: T.Array(T.String()),
  allowedContracts: T.Array(T.String()),
  requireJwt: T.Boolean(),
  jwtPublicKeys: T.Array(
    T.Object({
      id: T.String({ description: "the key's fingerprint; send it as the JWT header's kid (a kid naming no registered key is refused)" }),
      name: T.String(),
      alg: T.Union([T.Literal('ES256'), T.Literal('RS256'), T.Literal('EdDSA')]),
      publicKey: T.String({ description: 'PEM (SPKI)' }),
    }),
  ),
});

const ApiKey = T.Composite([T.Object({
  id: T.String(),
  name: T.String(),
  key: T.String({ description: 'the full key; send it as X-API-Key or as the last path segment' }),
  prefix: T.String(),
  networks: T.Array(T.String({ description: 'the networks the key covers now' })),
  allNetworks: T.Boolean({ description: 'made for every network the plan allows (networks omitted or empty): its networks follow a plan change' }),
  rateLimit: Nullable(T.Integer({ description: "requests per minute that apply to the key: its own rate, else the plan's; null = unlimited (enterprise)" })),
  ownRateLimit: Nullable(T.Integer({ description: "the rate set on the key itself; null = none, the key follows the plan's rate (PATCH rateLimit: null clears it)" })),
  status: Status,
  expiresAt: Nullable(IsoDate),
  createdAt: IsoDate,
}), AccessView], { title: 'ApiKey' });
const Endpoint = T.Object({
  network: T.String({ description: 'network slug' }),
  http: T.String({ description: 'JSON-RPC over HTTP with the key in the path: POST here' }),
  ws: T.String({ description: 'JSON-RPC over WebSocket with the key in the query: connect here' }),
}, { title: 'KeyEndpoint' });
/** Create and rotate answer the key with its ready-to-paste addresses. */
const ApiKeyWithEndpoints = T.Composite([
  ApiKey,
  T.Object({ endpoints: T.Array(Endpoint, { description: "the addresses of the key's networks, ready to paste" }) }),
], { title: 'ApiKeyWithEndpoints' });
const ApiKeyListItem = T.Composite([
  ApiKey,
  T.Object({
    usage: T.Object({ daily: T.Integer(), monthly: T.Integer() }),
    lastUsedAt: Nullable(IsoDate),
  }),
], { title: 'ApiKeyListItem' });
const IdParams = T.Object({ id: T.String({ maxLength: 64 }) });
/** Revoke and rotate take no input: no body, `{}`, or an empty body sent as JSON. */
const NoBody = T.Object({}, { additionalProperties: false, description: 'nothing; the body may be left out' });

/**
 * An empty body declared as JSON (`content-type: application/json`, nothing after it, as some
 * clients send on a POST without data) is taken as no body instead of a JSON syntax error.
 */
async function emptyJsonIsNoBody(req: FastifyRequest, _reply: FastifyReply): Promise<void> {
  if (req.headers['content-length'] === '0' || (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined)) {
    delete req.headers['content-type'];
  }
}

/** No body at all is validated as `{}`. */
async function noBodyIsEmpty(req: FastifyRequest, _reply: FastifyReply): Promise<void> {
  req.body ??= {};
}
const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse };
const security = [{ bearerAuth: [] }];

/** API key routes (spec 4.2; C14–C16, C19–C21). Registered behind the bearer hook. */
export const keyRoutes: FastifyPluginAsyncTypebox<{ keys: KeyService; accounts: AccountService; networks: Networks }> = async (
  app,
  { keys, accounts, networks },
) => {
  /** The owner, whose plan fills a key's rate and an all-networks key's list (C14, C52). */
  const account = async (userId: string) => {
    const user = await accounts.findById(userId);
    if (!user) throw unauthorized('The account no longer exists');
    return user;
  };
  const withEndpoints = <V extends { key: string; networks: string[] }>(view: V) => ({
    ...view,
    endpoints: view.networks.map((slug) => networks.keyUrls(slug, view.key)),
  });

  app.get(
    '/api-keys',
    {
      schema: { tags: ['api-keys'], operationId: 'listApiKeys', summary: "The account's API keys", security, response: { 200: ok(T.Array(ApiKeyListItem)), ...errors } },
    },
    async (req) => ({ success: true as const, data: await keys.list(req.userId, await account(req.userId)) }),
  );

  app.post(
    '/api-keys',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'createApiKey',
        summary: 'Create an API key',
        description: 'Answers the key and the ready-to-paste HTTP and WebSocket addresses of its networks.',
        security,
        body: T.Object(
          {
            name: Name,
            networks: T.Optional(T.Array(Slug, { maxItems: 64, description: 'empty or omitted: every network the plan allows, following a plan change (C52)' })),
            rateLimit: T.Optional(RateLimit),
            expiresAt: T.Optional(Nullable(IsoDate)),
            ...AccessInput,
          },
          { additionalProperties: false },
        ),
        response: { 200: ok(ApiKeyWithEndpoints), ...errors },
      },
    },
    async (req) => {
      const row = await keys.create(req.userId, req.body);
      return { success: true as const, data: withEndpoints(keys.view(row, await account(req.userId))) };
    },
  );

  app.patch(
    '/api-keys/:id',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'updateApiKey',
        summary: 'Change a key: name, networks, rate limit, active/inactive, expiry, allowlists, JWT option',
        description: 'A list given replaces the stored one; an empty list removes that restriction.',
        security,
        params: IdParams,
        body: T.Object(
          {
            name: T.Optional(Name),
            networks: T.Optional(T.Array(Slug, { maxItems: 64, description: 'replaces the list; empty: every network the plan allows, following a plan change' })),
            rateLimit: T.Optional(Nullable(RateLimit)),
            status: T.Optional(T.Union([T.Literal('active'), T.Literal('inactive')])),
            expiresAt: T.Optional(Nullable(IsoDate)),
            ...AccessInput,
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: ok(ApiKey), ...errors },
      },
    },
    async (req) => {
      const row = await keys.update(req.userId, req.params.id, req.body);
      return { success: true as const, data: keys.view(row, await account(req.userId)) };
    },
  );

  app.post(
    '/api-keys/:id/revoke',
    {
      onRequest: emptyJsonIsNoBody,
      preValidation: noBodyIsEmpty,
      schema: {
        tags: ['api-keys'],
        operationId: 'revokeApiKey',
        summary: 'Revoke a key for good (it stays listed)',
        security,
        params: IdParams,
        body: NoBody,
        response: { 200: ok(ApiKey), ...errors },
      },
    },
    async (req) => {
      const row = await keys.revoke(req.userId, req.params.id);
      return { success: true as const, data: keys.view(row, await account(req.userId)) };
    },
  );

  app.post(
    '/api-keys/:id/rotate',
    {
      onRequest: emptyJsonIsNoBody,
      preValidation: noBodyIsEmpty,
      schema: {
        tags: ['api-keys'],
        operationId: 'rotateApiKey',
        summary: 'New key value; the old one stops at once',
        description: 'Answers the new key and the ready-to-paste HTTP and WebSocket addresses of its networks.',
        security,
        params: IdParams,
        body: NoBody,
        response: { 200: ok(ApiKeyWithEndpoints), ...errors },
      },
    },
    async (req) => {
      const row = await keys.rotate(req.userId, req.params.id);
      return { success: true as const, data: withEndpoints(keys.view(row, await account(req.userId))) };
    },
  );

  app.delete(
    '/api-keys/:id',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'deleteApiKey',
        summary: 'Delete a key (cannot be undone)',
        security,
        params: IdParams,
        response: { 200: OkMessage, ...errors },
      },
    },
    async (req) => {
      await keys.delete(req.userId, req.params.id);
      return { success: true as const, message: 'API key deleted' };
    },
  );
};
