// Transactions broadcast to every healthy upstream at once (C26).
import { keccak256 } from 'viem/utils';
import { type FailedAttempt, NoUpstreamError } from '../../errors/upstream.ts';
import { looksLikeJsonRpc } from './answers.ts';
import { attempt } from './attempt.ts';
import { markFailed, markOk } from './health.ts';
import { observe, type PoolState, type Upstream } from './state.ts';

/**
 * Transactions broadcast to every healthy upstream at once (C26). Each node gets the
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
 * The signed transaction of a single `eth_sendRawTransaction` call as the gateway judged it, its
 * hash (keccak256 of the raw bytes, as every node computes it) and the call's id exactly as
 * written; null for a param that is not hex bytes: such a call is sent the ordinary way.
 */
export function rawTransaction(raw: string, id: string): { raw: `0x${string}`; hash: `0x${string}`; id: string } | null {
  if (!/^0x([0-9a-fA-F]{2})+$/.test(raw)) return null;
  return { raw: raw as `0x${string}`, hash: keccak256(raw as `0x${string}`), id };
}

/** The answer given for a transaction a node already held: its hash under the caller's id. */
export function hashAnswer(id: string, hash: string): Buffer {
  return Buffer.from(`{"jsonrpc":"2.0","id":${id},"result":"${hash}"}`);
}

/** A call through the pool with failover, parsed `result` (failover.ts `request`). */
type Ask = <R>(p: PoolState, method: string, params: readonly unknown[], reqId: string | undefined) => Promise<R>;

/**
 * C26: a signed transaction goes to every healthy upstream at once, each exactly once. The
 * first hash answered wins; "already known" is success too (answered with the transaction's
 * hash), and so is "nonce too low" when the chain has this very transaction. Otherwise, once
 * every node is done, a node's refusal is the answer; with none, -32000 with `maybeSent` when
 * any node may have received it (C26: nothing is sent twice). `ask` is the pool's request with
 * failover (failover.ts), for the transaction by hash.
 */
export function broadcast<T>(
  p: PoolState,
  targets: readonly Upstream[],
  body: string | Buffer,
  tx: NonNullable<ReturnType<typeof rawTransaction>>,
  timeoutMs: number,
  read: (status: number, body: Buffer) => T | undefined,
  reqId: string | undefined,
  ask: Ask,
): Promise<{ value: T; upstream: number }> {
  const failed: FailedAttempt[] = [];
  let refusal: { value: T; upstream: number } | undefined;
  let nonceTooLow = false;
  let maybeSent = false;
  let pending = targets.length;
  let won = false;
  return new Promise((resolve, reject) => {
    const settle = async (): Promise<void> => {
      if (nonceTooLow) {
        // The same transaction mined already also makes a node say "nonce too low".
        const known = await ask<unknown>(p, 'eth_getTransactionByHash', [tx.hash], reqId).catch(() => null);
        const value = known ? read(200, hashAnswer(tx.id, tx.hash)) : undefined;
        if (value !== undefined) return resolve({ value, upstream: (refusal ?? { upstream: 0 }).upstream });
      }
      if (refusal) return resolve(refusal);
      reject(new NoUpstreamError(p.network, failed, maybeSent));
    };
    for (const u of targets) {
      const startedAt = performance.now();
      void attempt(p, u, body, timeoutMs, (_status, buf) => (looksLikeJsonRpc(buf) ? buf : undefined)).then((outcome) => {
        observe(u.calls, (performance.now() - startedAt) / 1000);
        if (outcome.ok) {
          markOk(p, u, reqId);
          const answer = classifyTxAnswer(outcome.value);
          if (!won && (answer.kind === 'hash' || answer.kind === 'known')) {
            const value = read(200, answer.kind === 'hash' ? outcome.value : hashAnswer(tx.id, tx.hash));
            if (value !== undefined) {
              won = true;
              resolve({ value, upstream: u.index });
            }
          } else if (answer.kind === 'nonceTooLow' || answer.kind === 'refused') {
            nonceTooLow ||= answer.kind === 'nonceTooLow';
            const value = read(200, outcome.value);
            if (value !== undefined && refusal === undefined) refusal = { value, upstream: u.index };
          } else if (answer.kind === 'invalid') {
            failed.push({ upstream: u.index, reason: 'invalid body (HTTP 200)' });
            maybeSent = true;
          }
        } else {
          u.calls.errors.set(outcome.kind, (u.calls.errors.get(outcome.kind) ?? 0) + 1);
          failed.push({ upstream: u.index, reason: outcome.reason });
          maybeSent ||= outcome.sent;
          p.log?.debug({ reqId, network: p.network, upstream: u.index, name: u.name, reason: outcome.reason, methods: ['eth_sendRawTransaction'] }, 'upstream attempt failed');
          if (!p.closed && !outcome.final) markFailed(p, u, outcome.reason, reqId);
        }
        if (--pending === 0 && !won) void settle();
      });
    }
  });
}
