import { keccak256 } from 'viem/utils';
import { idText } from '../json/lossless.ts';

/**
 * Transactions broadcast to every healthy upstream at once (issue 15, point 7). Each node gets the
 * transaction once; none is asked twice (C26: the `maybeSent` rule). A node that already holds
 * this very transaction ("already known") has accepted it as much as one that answers its hash.
 */

/** What one node's answer to `eth_sendRawTransaction` means. */
export type TxAnswer =
  | { kind: 'hash' }
  /** The node already holds this transaction: success, answered with its hash. */
  | { kind: 'known' }
  /** "nonce too low": this very transaction may be mined already; success only when the chain has its hash. */
  | { kind: 'nonceTooLow' }
  /** Any other error (insufficient funds, underpriced, ...): the node's own answer. */
  | { kind: 'refused' }
  | { kind: 'invalid' };

const KNOWN = /already known|known transaction|already imported|already in (the )?(mempool|pool)|transaction already exists/i;
const NONCE_TOO_LOW = /nonce too low|nonce has already been used|oldnonce/i;

export function classifyTxAnswer(body: Buffer): TxAnswer {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return { kind: 'invalid' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { kind: 'invalid' };
  const { result, error } = parsed as { result?: unknown; error?: { message?: unknown } };
  // Nodes answer the hash; any result means the node took it, and its answer is passed on unchanged.
  if (result !== undefined && result !== null) return { kind: 'hash' };
  if (typeof error !== 'object' || error === null) return { kind: 'invalid' };
  const message = typeof error.message === 'string' ? error.message : '';
  if (KNOWN.test(message)) return { kind: 'known' };
  if (NONCE_TOO_LOW.test(message)) return { kind: 'nonceTooLow' };
  return { kind: 'refused' };
}

/**
 * The signed transaction of a single `eth_sendRawTransaction` call, its hash (keccak256 of the
 * raw bytes, as every node computes it) and the call's id exactly as written; null for anything
 * else (a batch, a malformed param): such a call is sent the ordinary way.
 */
export function rawTransaction(body: string | Buffer): { raw: `0x${string}`; hash: `0x${string}`; id: string } | null {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const { method, params } = parsed as { method?: unknown; params?: unknown };
  if (method !== 'eth_sendRawTransaction' || !Array.isArray(params)) return null;
  const raw: unknown = params[0];
  if (typeof raw !== 'string' || !/^0x([0-9a-fA-F]{2})+$/.test(raw)) return null;
  return { raw: raw as `0x${string}`, hash: keccak256(raw as `0x${string}`), id: idText(text) };
}

/** The answer given for a transaction a node already held: its hash under the caller's id. */
export function hashAnswer(id: string, hash: string): Buffer {
  return Buffer.from(`{"jsonrpc":"2.0","id":${id},"result":"${hash}"}`);
}
