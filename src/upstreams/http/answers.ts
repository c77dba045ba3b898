// Reading a node's answer: a cheap JSON-RPC shape check, the parsed answer, a head.
import { answerMembersPlain } from '../../json/lossless.ts';

/** Reading a node's answer: a cheap JSON-RPC shape check, the parsed answer, a head. */

const isSpace = (b: number | undefined): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** Cheap garbage check without parsing: a JSON object or array by its first and last bytes. */
export function looksLikeJsonRpc(buf: Buffer): boolean {
  let start = 0;
  let end = buf.length - 1;
  while (start <= end && isSpace(buf[start])) start++;
  while (end >= start && isSpace(buf[end])) end--;
  if (start >= end) return false;
  const first = buf[start];
  const last = buf[end];
  return (first === 0x7b && last === 0x7d) || (first === 0x5b && last === 0x5d); // {...} or [...]
}

export interface RpcResponse {
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

/**
 * A node's answer to one call of the gateway's own (heads, the faucet, the follower), parsed; undefined
 * when it is not one, or names a member twice or in disguise (C54: it reads differently to different parsers).
 */
export function parseResponse(buf: Buffer): RpcResponse | undefined {
  let parsed: unknown;
  const text = buf.toString('utf8');
  if (!answerMembersPlain(text)) return undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const res = parsed as RpcResponse;
  if (res.error !== undefined) return typeof res.error === 'object' && res.error !== null ? res : undefined;
  return 'result' in res ? res : undefined;
}

export function parseHead(buf: Buffer): number | undefined {
  const res = parseResponse(buf);
  if (typeof res?.result !== 'string' || !/^0x[0-9a-fA-F]+$/.test(res.result)) return undefined;
  return Number.parseInt(res.result, 16);
}
