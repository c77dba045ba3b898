// The OpenAPI document (/docs/json). Fastify's routes give the REST operations; what Fastify does
// not serve is added here: the JSON-RPC addresses (answered by a fast path ahead of Fastify), the
// WebSocket addresses, the API-key schemes, the shared error envelope and the 429 of every limited
// route. Contract ids cited in the code's descriptions are left out of the document.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';

type Obj = Record<string, unknown>;

const here = path.dirname(fileURLToPath(import.meta.url));
/** package.json's version (src/http and dist/http both sit two levels below it). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.resolve(here, '../../package.json'), 'utf8')) as { version: string }).version;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const rateHeaders = {
  'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
  'X-CU-Remaining': { $ref: '#/components/headers/X-CU-Remaining' },
};

const integerHeader = (description: string) => ({ description, schema: { type: 'integer' } });

const components = {
  schemas: {
    ErrorResponse: {
      type: 'object',
      description: 'Every failed REST call: a stable code, a message in words and, for invalid input, the offending fields.',
      required: ['success', 'error'],
      properties: {
        success: { type: 'boolean', enum: [false] },
        error: {
          type: 'object',
          required: ['code', 'message'],
          properties: {
            code: {
              type: 'string',
              pattern: '^[A-Z][A-Z0-9_]*$',
              description: 'VALIDATION_ERROR, UNAUTHORIZED, PLAN_LIMIT, PLAN_FEATURE, NOT_FOUND, CONFLICT, RATE_LIMITED, ...',
            },
            message: { type: 'string' },
            details: { description: 'For VALIDATION_ERROR: the offending fields; for limits: the limit and when it resets' },
          },
        },
      },
    },
    JsonRpcRequest: {
      type: 'object',
      required: ['jsonrpc', 'method'],
      properties: {
        jsonrpc: { type: 'string', enum: ['2.0'] },
        id: { description: 'Echoed exactly; a request without id is a notification and gets no answer', type: ['integer', 'string', 'null'] },
        method: { type: 'string', description: 'An allowed method, e.g. eth_blockNumber (GET /api/v1/networks/{slug} lists them)' },
        params: { description: 'Positional (array) or named (object) parameters', type: ['array', 'object'] },
      },
    },
    JsonRpcBody: {
      description: 'One call, or a batch of up to 100 (answered as an array in the same order)',
      oneOf: [ref('JsonRpcRequest'), { type: 'array', minItems: 1, maxItems: 100, items: ref('JsonRpcRequest') }],
    },
    JsonRpcSuccess: {
      type: 'object',
      required: ['jsonrpc', 'id', 'result'],
      properties: { jsonrpc: { type: 'string', enum: ['2.0'] }, id: { type: ['integer', 'string', 'null'] }, result: { description: "The node's answer, unchanged" } },
    },
    JsonRpcError: {
      type: 'object',
      required: ['jsonrpc', 'id', 'error'],
      properties: {
        jsonrpc: { type: 'string', enum: ['2.0'] },
        id: { type: ['integer', 'string', 'null'] },
        error: {
          type: 'object',
          required: ['code', 'message'],
          properties: {
            code: {
              type: 'integer',
              description:
                '-32700 parse error, -32600 invalid request, -32601 method not supported, -32001 missing or unknown key, -32002 key revoked or expired, -32003 network not allowed for the key or refused by its allowlists or JWT option (data.reason: origin, ip, method, contract or jwt), -32004 unknown network, -32005 rate limit, -32006 daily or monthly quota, -32000 no upstream could answer; other codes come from the node',
            },
            message: { type: 'string' },
            data: { description: 'Details where useful, e.g. {"retryAfter": 12}' },
          },
        },
      },
    },
    JsonRpcAnswer: {
      description: 'The answer to one call, or the array of answers to a batch',
      oneOf: [ref('JsonRpcSuccess'), ref('JsonRpcError'), { type: 'array', items: { oneOf: [ref('JsonRpcSuccess'), ref('JsonRpcError')] } }],
    },
  },
  headers: {
    'X-RateLimit-Limit': integerHeader('The per-minute limit that applies (-1: unlimited)'),
    'X-RateLimit-Remaining': integerHeader('Requests left in the current 60-second window (-1: unlimited)'),
    'X-RateLimit-Reset': integerHeader('Unix time (seconds) when one more request is allowed again'),
    'X-CU-Remaining': integerHeader('Compute units left this month (-1: unlimited)'),
    'Retry-After': integerHeader('Seconds to wait before trying again'),
  },
  responses: {
    TooManyRequests: {
      description: 'Throttled: wait Retry-After seconds',
      headers: { 'Retry-After': { $ref: '#/components/headers/Retry-After' }, ...rateHeaders },
      content: { 'application/json': { schema: ref('ErrorResponse') } },
    },
  },
  securitySchemes: {
    bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'The accessToken of register, login or refresh' },
    adminToken: { type: 'apiKey', in: 'header', name: 'X-Admin-Token', description: 'The ADMIN_TOKEN of the gateway (admin routes only)' },
    apiKey: {
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
      description: 'An API key in a header. The key may instead be the last path segment of POST /v1/{network}/{apiKey} (the path-key form).',
    },
    apiKeyQuery: { type: 'apiKey', in: 'query', name: 'apiKey', description: 'An API key in the query, for WebSocket clients that cannot set headers' },
  },
};

function rpcResponses(extra: Obj = {}): Obj {
  const answer = (description: string, headers: Obj = rateHeaders) => ({
    description,
    headers,
    content: { 'application/json': { schema: ref('JsonRpcAnswer') } },
  });
  const error = (description: string, headers: Obj = rateHeaders) => ({
    description,
    headers,
    content: { 'application/json': { schema: ref('JsonRpcError') } },
  });
  return {
    200: answer("The node's answer (errors of the node included, unchanged); -32601 for a method that is not supported"),
    204: { description: 'Only notifications were sent: nothing to answer' },
    400: error('-32700 parse error or -32600 invalid request (an empty batch, a batch over the limit)'),
    401: error('-32001: no key, an unknown or inactive key; -32002: a revoked or expired key'),
    403: error('-32003: the key may not use this network, or its allowlists or JWT option refuse the call (data.reason: origin, ip, method, contract, jwt)'),
    404: error('-32004: no such network (the list: GET /api/v1/networks)'),
    413: error('The body is larger than the limit (1 MiB by default)'),
    429: error('-32005 rate limit or -32006 daily/monthly quota; wait Retry-After seconds', {
      'Retry-After': { $ref: '#/components/headers/Retry-After' },
      ...rateHeaders,
    }),
    502: error('-32000: no upstream node could answer'),
    ...extra,
  };
}

const rpcBody = { required: true, content: { 'application/json': { schema: ref('JsonRpcBody') } } };
const networkParam = { name: 'network', in: 'path', required: true, description: 'A network slug, e.g. native-mainnet or ethereum', schema: { type: 'string' } };
const rpcNotes = {
  'x-protocol': 'JSON-RPC 2.0',
  'x-rate-limit-headers': 'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset and X-CU-Remaining on every answer',
};

/** The addresses served outside Fastify's routes. */
const rpcPaths = {
  '/rpc/main/evm/{chainId}': {
    post: {
      tags: ['json-rpc'],
      operationId: 'rpcByChainId',
      summary: 'JSON-RPC on the network with this chain id, the key in X-API-Key',
      security: [{ apiKey: [] }],
      parameters: [{ name: 'chainId', in: 'path', required: true, description: 'EIP-155 chain id, e.g. 50 (native mainnet) or 1', schema: { type: 'integer' } }],
      requestBody: rpcBody,
      responses: rpcResponses(),
      ...rpcNotes,
    },
  },
  '/v1/{network}': {
    post: {
      tags: ['json-rpc'],
      operationId: 'rpcByNetwork',
      summary: 'JSON-RPC on a network by slug, the key in X-API-Key',
      description: 'The rpcUrl of GET /api/v1/networks.',
      security: [{ apiKey: [] }],
      parameters: [networkParam],
      requestBody: rpcBody,
      responses: rpcResponses(),
      ...rpcNotes,
    },
  },
  '/v1/{network}/{apiKey}': {
    post: {
      tags: ['json-rpc'],
      operationId: 'rpcWithKeyInPath',
      summary: 'JSON-RPC on a network by slug, the key as the last path segment',
      description: 'The http address that creating or rotating a key answers; paste it into any Ethereum client.',
      security: [],
      parameters: [
        networkParam,
        { name: 'apiKey', in: 'path', required: true, description: 'The API key (the path-key form of the apiKey scheme)', schema: { type: 'string' } },
      ],
      requestBody: rpcBody,
      responses: rpcResponses(),
      'x-api-key-in': 'path',
      ...rpcNotes,
    },
  },
  '/public/main': {
    post: {
      tags: ['json-rpc'],
      operationId: 'rpcPublic',
      summary: 'JSON-RPC on native mainnet without a key, limited per client address',
      security: [],
      requestBody: rpcBody,
      responses: rpcResponses(),
      ...rpcNotes,
    },
  },
  '/ws': {
    get: {
      tags: ['websocket'],
      operationId: 'websocketNativeMainnet',
      summary: 'JSON-RPC over WebSocket on native mainnet (eth_subscribe included)',
      description: 'Connect with a WebSocket client to ws(s)://{host}/ws?apiKey={apiKey}; every message is a JSON-RPC request or batch as on the HTTP addresses.',
      security: [{ apiKeyQuery: [] }, { apiKey: [] }],
      responses: websocketResponses(),
      'x-protocol': 'JSON-RPC 2.0 over WebSocket',
    },
  },
  '/ws/{network}': {
    get: {
      tags: ['websocket'],
      operationId: 'websocketByNetwork',
      summary: 'JSON-RPC over WebSocket on a network by slug (eth_subscribe included)',
      description: 'The wsUrl of GET /api/v1/networks: connect to ws(s)://{host}/ws/{network}?apiKey={apiKey}.',
      security: [{ apiKeyQuery: [] }, { apiKey: [] }],
      parameters: [networkParam],
      responses: websocketResponses(),
      'x-protocol': 'JSON-RPC 2.0 over WebSocket',
    },
  },
};

function websocketResponses(): Obj {
  const refused = (description: string) => ({ description, content: { 'application/json': { schema: ref('JsonRpcError') } } });
  return {
    101: { description: 'Switching to the WebSocket protocol', headers: rateHeaders },
    401: refused('-32001 or -32002: the key is missing, unknown, revoked or expired'),
    403: refused('-32003: the key may not use this network, or its origin, IP or JWT rules refuse the connection (data.reason)'),
    404: refused('-32004: no such network'),
    426: { description: 'A plain HTTP request: this address only upgrades to WebSocket' },
    429: refused('Too many connections for the key, or its rate limit'),
  };
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The C7 envelope as route schemas render it (`success: false`, an `error` object). */
function isErrorEnvelope(s: unknown): boolean {
  if (!isObj(s) || !isObj(s.properties)) return false;
  const { success, error } = s.properties;
  return isObj(success) && isObj(error) && (success.const === false || (Array.isArray(success.enum) && success.enum[0] === false));
}

/** Contract ids cited in descriptions (`(C12)`, `(C10–C12; ...)`, `C5:`) are the code's, not the users'. */
export function withoutContractIds(text: string): string {
  return text
    .replace(/\s*\(\s*C\d+(?:\s*[,–-]\s*C?\d+)*\s*\)/g, '')
    .replace(/\(\s*C\d+(?:\s*[,–-]\s*C?\d+)*\s*[;,]\s*/g, '(')
    .replace(/\bC\d{1,2}(?:\s*[–-]\s*C?\d{1,2})?:?\s*/g, '');
}

function scrub(v: unknown): unknown {
  if (typeof v === 'string') return withoutContractIds(v);
  if (Array.isArray(v)) return v.map(scrub);
  if (isObj(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'pattern' || k === 'enum' || k === 'const' ? x : scrub(x)]));
  return v;
}

/** Adds what Fastify's routes do not say to the document it built. */
export function completeDocument(doc: Obj): Obj {
  const paths = (isObj(doc.paths) ? doc.paths : {}) as Record<string, Record<string, Obj>>;
  for (const [url, ops] of Object.entries(paths)) {
    for (const op of Object.values(ops)) {
      if (!isObj(op) || !isObj(op.responses)) continue;
      const responses = op.responses as Record<string, Obj>;
      for (const r of Object.values(responses)) {
        const content = isObj(r.content) ? (r.content as Record<string, Obj>) : {};
        for (const media of Object.values(content)) if (isErrorEnvelope(media.schema)) media.schema = ref('ErrorResponse');
      }
      // A body with nothing required (revoke, rotate) may be left out.
      const body = isObj(op.requestBody) && isObj(op.requestBody.content) ? (op.requestBody.content as Record<string, Obj>)['application/json'] : undefined;
      const bodySchema = body && isObj(body.schema) ? body.schema : undefined;
      if (isObj(op.requestBody) && bodySchema?.type === 'object' && !(bodySchema.required as unknown[] | undefined)?.length && !bodySchema.minProperties) {
        op.requestBody.required = false;
      }
      // Every REST route is limited (per account, or per client address signed out).
      if (url.startsWith('/api/v1/')) {
        responses['429'] = { $ref: '#/components/responses/TooManyRequests' };
        for (const [status, r] of Object.entries(responses)) if (/^2/.test(status) && !r.$ref) r.headers = { ...rateHeaders, ...(r.headers as Obj | undefined) };
      }
    }
  }
  const existing = isObj(doc.components) ? (doc.components as Record<string, Obj>) : {};
  const merged: Record<string, Obj> = { ...existing };
  for (const [k, v] of Object.entries(components)) merged[k] = { ...(existing[k] ?? {}), ...v };
  return scrub({ ...doc, paths: { ...paths, ...rpcPaths }, components: merged }) as Obj;
}

/** The options of @fastify/swagger: the document's head and `completeDocument`. */
export function openapiOptions(): FastifyDynamicSwaggerOptions {
  const head = {
    openapi: '3.1.0',
    info: {
      title: 'Junction API',
      version: packageVersion(),
      description:
        'Junction, a multi-chain JSON-RPC gateway: the REST API under /api/v1 (accounts, API keys, networks, usage, faucet and more), the JSON-RPC addresses (/rpc, /v1, /public) and the WebSocket addresses (/ws). REST errors share one envelope (ErrorResponse); JSON-RPC errors are JSON-RPC error objects with the codes listed at JsonRpcError.',
    },
    // The route schemas name these schemes, so the plugin needs them before the transform.
    components: { securitySchemes: components.securitySchemes },
    tags: [
      { name: 'json-rpc', description: 'JSON-RPC over HTTP: POST one call or a batch' },
      { name: 'websocket', description: 'JSON-RPC over WebSocket, with subscriptions' },
    ],
  };
  return {
    openapi: head as FastifyDynamicSwaggerOptions['openapi'],
    transformObject: (d) => ('openapiObject' in d ? completeDocument(d.openapiObject) : d.swaggerObject),
  };
}
