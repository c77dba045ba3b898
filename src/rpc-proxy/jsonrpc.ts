import { InvalidRequestError, type RpcError } from '../errors/rpc.ts';

export type RpcId = string | number | null;

/** One well-formed JSON-RPC 2.0 call; `id` undefined marks a notification (no answer, C23). */
export interface RpcCall {
  id: RpcId | undefined;
  method: string;
  params: unknown;
  /** The item as the client sent it, re-sent unchanged when forwarded in a batch. */
  raw: Record<string, unknown>;
}

export type RpcItem = { call: RpcCall; error?: undefined } | { call?: undefined; id: RpcId; error: RpcError };

const isId = (v: unknown): v is RpcId => v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/** Checks one request object against JSON-RPC 2.0; the error keeps the id when the id itself is valid. */
export function parseItem(x: unknown): RpcItem {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) {
    return { id: null, error: new InvalidRequestError('Invalid request: expected a JSON-RPC 2.0 object') };
  }
  const o = x as Record<string, unknown>;
  const hasId = 'id' in o;
  const id = hasId && isId(o.id) ? o.id : null;
  if (hasId && !isId(o.id)) return { id: null, error: new InvalidRequestError('Invalid request: id must be a string, number or null') };
  if (o.jsonrpc !== '2.0') return { id, error: new InvalidRequestError('Invalid request: "jsonrpc" must be "2.0"') };
  if (typeof o.method !== 'string' || o.method.length === 0 || o.method.length > 128) {
    return { id, error: new InvalidRequestError('Invalid request: "method" must be a non-empty string') };
  }
  if (o.params !== undefined && (typeof o.params !== 'object' || o.params === null)) {
    return { id, error: new InvalidRequestError('Invalid request: "params" must be an array or an object') };
  }
  return { call: { id: hasId ? (o.id as RpcId) : undefined, method: o.method, params: o.params, raw: o } };
}

/** A JSON-RPC error response object (C22: `data` carries machine-readable details). */
export function errorObject(id: RpcId | undefined, err: RpcError): { jsonrpc: '2.0'; id: RpcId; error: ReturnType<RpcError['toJSON']> } {
  return { jsonrpc: '2.0', id: id ?? null, error: err.toJSON() };
}

export function resultObject(id: RpcId, result: unknown): { jsonrpc: '2.0'; id: RpcId; result: unknown } {
  return { jsonrpc: '2.0', id, result };
}

/** A key for matching answers to calls by id: 1 and "1" are different ids. */
export const idKey = (id: unknown): string => (typeof id === 'string' ? `s:${id}` : `n:${String(id)}`);
