// JSON-RPC 2.0 items (C22, C23): reading single calls and notifications, and writing answers as text.
import { InvalidRequestError, type RpcError } from '../errors/rpc.ts';
import { firstMemberAt, idText, nextMemberAt, skipValue, skipWs } from '../json/lossless.ts';

export type RpcId = string | number | null;

/** One well-formed JSON-RPC 2.0 call; `id` undefined marks a notification (no answer, C23). */
export interface RpcCall {
  id: RpcId | undefined;
  method: string;
  params: unknown;
}

/**
 * A call read (with `idText`, its id exactly as written or `null`, when its text was given), or
 * why it cannot be one.
 */
export type RpcItem = { call: RpcCall; idText?: string; error?: undefined } | { call?: undefined; id: RpcId; error: RpcError };

const isId = (v: unknown): v is RpcId => v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/**
 * Checks one request object against JSON-RPC 2.0; the error keeps the id when the id itself is
 * valid. Give `raw`, the call's own text (the body of a single call, a batch element, a WebSocket
 * message), whenever it is what goes to the node: its member names are then checked as written
 * (`callMembersError`), so that the gateway judges exactly the call the node will execute.
 */
export function parseItem(x: unknown, raw?: string | Uint8Array): RpcItem {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) {
    return { id: null, error: new InvalidRequestError('Invalid request: expected a JSON-RPC 2.0 object') };
  }
  const o = x as Record<string, unknown>;
  const hasId = 'id' in o;
  const id = hasId && isId(o.id) ? o.id : null;
  let written: string | undefined;
  if (raw !== undefined) {
    const read = readCallMembers(raw);
    // A stray spelling of "id" makes the id itself uncertain: answered as null.
    if (typeof read !== 'string') return { id: read.aboutId ? null : id, error: read.error };
    written = read;
  }
  if (hasId && !isId(o.id)) return { id: null, error: new InvalidRequestError('Invalid request: id must be a string, number or null') };
  if (o.jsonrpc !== '2.0') return { id, error: new InvalidRequestError('Invalid request: "jsonrpc" must be "2.0"') };
  if (typeof o.method !== 'string' || o.method.length === 0 || o.method.length > 128) {
    return { id, error: new InvalidRequestError('Invalid request: "method" must be a non-empty string') };
  }
  // `params: null` is accepted as "no params", as geth does.
  if (o.params !== undefined && o.params !== null && typeof o.params !== 'object') {
    return { id, error: new InvalidRequestError('Invalid request: "params" must be an array or an object') };
  }
  const call = { id: hasId ? (o.id as RpcId) : undefined, method: o.method, params: o.params };
  return written === undefined ? { call } : { call, idText: written };
}

/**
 * The id to answer a refusal of a whole message under (C23), as the client wrote it: a call's, read
 * with its member names; a refused item's valid id, read from `text` (the message's text); `null`
 * for a batch (`item` undefined) or an id of the wrong type. Used by the pipeline (pipeline.ts
 * `Message.id`) and by a WebSocket turning a message away during a stop (ws/connection.ts).
 */
export function messageIdText(item: RpcItem | undefined, text: string): string {
  return item?.call ? (item.idText ?? idText(text)) : item && item.id !== null ? idText(text) : 'null';
}

// Bits of the members a call may have, by name as written.
const JSONRPC = 1;
const METHOD = 2;
const PARAMS = 4;
const ID = 8;
const MAX_ECHOED_NAME = 64;

/**
 * Why the call object text `raw` is not one the gateway can judge, or null. Its members must be
 * exactly from `jsonrpc`, `method`, `params`, `id`, each at most once, written exactly: no case
 * variant (`Method`, `ID`), no escaped spelling (`"m\u0065thod"`), no repeat, nothing else. Nodes
 * written in Go (geth, XDC) match member names case-insensitively and keep the last of a
 * repeated one, so `{"method":"eth_blockNumber","Method":"admin_addPeer"}` runs admin_addPeer
 * while JSON.parse sees eth_blockNumber; an escaped "id" is invisible to the id scanners that keep
 * ids exact (C23). One pass over the top-level object, nothing allocated unless refused.
 * `aboutId`: the stray member is a spelling of "id" (the id is then uncertain).
 */
export function callMembersError(raw: string | Uint8Array): StrayMember | null {
  const read = readCallMembers(raw);
  return typeof read === 'string' ? null : read;
}

/** A member a call may not have (see {@link callMembersError}). */
export interface StrayMember {
  error: InvalidRequestError;
  member: string;
  aboutId: boolean;
}

/**
 * The walk of {@link callMembersError}, which also keeps the id: the stray member, or the call's
 * `id` exactly as written (`null` when it has none; C23), read in the same pass (every call's
 * answer needs it, and a second walk to find it cost as much as this one).
 */
function readCallMembers(raw: string | Uint8Array): StrayMember | string {
  // Latin-1 keeps one character per byte: JSON's structure is ASCII, so spans are byte offsets.
  const t = typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('latin1');
  let seen = 0;
  let strayStart = -1;
  let strayEnd = -1;
  let repeated = false;
  let idStart = -1;
  let idEnd = -1;
  // The walk of eachMemberName without its callback: this runs for every call.
  for (let i = firstMemberAt(t); i !== -1; ) {
    const keyEnd = skipValue(t, i);
    const start = i + 1;
    const len = keyEnd - 1 - start;
    let bit = 0;
    if (len === 2) bit = t.startsWith('id', start) ? ID : 0;
    else if (len === 6) bit = t.startsWith('method', start) ? METHOD : t.startsWith('params', start) ? PARAMS : 0;
    else if (len === 7) bit = t.startsWith('jsonrpc', start) ? JSONRPC : 0;
    if (bit === 0 || (seen & bit) !== 0) {
      strayStart = start;
      strayEnd = keyEnd - 1;
      repeated = bit !== 0;
      break;
    }
    seen |= bit;
    if (bit === ID) {
      // The text passed JSON.parse: a colon follows the name, then the value.
      idStart = skipWs(t, skipWs(t, keyEnd) + 1);
      idEnd = skipValue(t, idStart);
    }
    i = nextMemberAt(t, keyEnd);
  }
  if (strayStart < 0) {
    if (idStart < 0) return 'null';
    const id = t.slice(idStart, idEnd);
    return typeof raw === 'string' ? id : Buffer.from(id, 'latin1').toString('utf8');
  }
  let member = t.slice(strayStart, Math.min(strayEnd, strayStart + MAX_ECHOED_NAME));
  if (typeof raw !== 'string') member = Buffer.from(member, 'latin1').toString('utf8');
  const message = repeated
    ? `Invalid request: member "${member}" appears more than once`
    : `Invalid request: member "${member}" is not allowed; a call has only "jsonrpc", "method", "params" and "id", each written exactly once`;
  return { error: new InvalidRequestError(message, { details: { member } }), member, aboutId: readsAsId(member) };
}

/** Whether a member name as written reads as "id" to a node that decodes escapes and ignores case. */
function readsAsId(written: string): boolean {
  try {
    return (JSON.parse(`"${written}"`) as string).toLowerCase() === 'id';
  } catch {
    return false;
  }
}

/** An error response with the id given as JSON text, exactly as the client wrote it (C23). */
export function errorText(idText: string, err: RpcError): string {
  return `{"jsonrpc":"2.0","id":${idText},"error":${JSON.stringify(err.toJSON())}}`;
}

/** A result response with the id given as JSON text. */
export function resultText(idText: string, result: unknown): string {
  return `{"jsonrpc":"2.0","id":${idText},"result":${JSON.stringify(result) ?? 'null'}}`;
}
