import { InvalidRequestError, type RpcError } from '../errors/rpc.ts';

export type RpcId = string | number | null;

/** One well-formed JSON-RPC 2.0 call; `id` undefined marks a notification (no answer, C23). */
export interface RpcCall {
  id: RpcId | undefined;
  method: string;
  params: unknown;
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
  // `params: null` is accepted as "no params", as geth does.
  if (o.params !== undefined && o.params !== null && typeof o.params !== 'object') {
    return { id, error: new InvalidRequestError('Invalid request: "params" must be an array or an object') };
  }
  return { call: { id: hasId ? (o.id as RpcId) : undefined, method: o.method, params: o.params } };
}


/** An error response with the id given as JSON text, exactly as the client wrote it (C23). */
export function errorText(idText: string, err: RpcError): string {
  return `{"jsonrpc":"2.0","id":${idText},"error":${JSON.stringify(err.toJSON())}}`;
}

/** A result response with the id given as JSON text. */
export function resultText(idText: string, result: unknown): string {
  return `{"jsonrpc":"2.0","id":${idText},"result":${JSON.stringify(result) ?? 'null'}}`;
}
