// Sending signed transactions through the gateway's upstream pool: the fees to give them, the
// broadcast and what its answer means, and where a sent transaction stands (C29's re-broadcast).
// src/onchain/ holds what faucet, balance, intents and devnet share about talking to a chain
// (named apart from src/chains/, which holds the networks).
import type { Hex } from 'viem';
import { NoUpstreamError, type UpstreamPool, UpstreamRpcError } from '../upstreams/http/pool.ts';

/** Fee fields of a transaction: EIP-1559 where the chain has a base fee, else legacy. */
export type Fees =
  | { type: 'legacy'; gasPrice: bigint }
  | { type: 'eip1559'; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };

/** The fees a transaction sent now should carry, and the node's `eth_gasPrice` they follow from. */
export interface FeeState {
  fees: Fees;
  /** The most one gas unit may cost with these fees. */
  maxPerGas: bigint;
  gasPrice: bigint;
}

/**
 * Fees for a transaction sent now, asked in parallel through the gateway's pool.
 * @throws NoUpstreamError or UpstreamRpcError as the pool does.
 */
export async function readFees(pool: UpstreamPool): Promise<FeeState> {
  const [block, gasPrice, tip] = await Promise.all([
    pool.request<{ baseFeePerGas?: Hex } | null>('eth_getBlockByNumber', ['latest', false]),
    pool.request<Hex>('eth_gasPrice', []),
    // Chains without EIP-1559 may not know the method: then the tip follows from eth_gasPrice.
    pool.request<Hex>('eth_maxPriorityFeePerGas', []).catch(() => undefined),
  ]);
  const price = BigInt(gasPrice);
  const base = block?.baseFeePerGas ? BigInt(block.baseFeePerGas) : undefined;
  if (base === undefined) return { fees: { type: 'legacy', gasPrice: price }, maxPerGas: price, gasPrice: price };
  const maxPriorityFeePerGas = tip !== undefined ? BigInt(tip) : price > base ? price - base : 0n;
  // Twice the base fee stays valid through several full blocks (the base fee rises 12.5 % a block at most).
  const maxFeePerGas = base * 2n + maxPriorityFeePerGas;
  return { fees: { type: 'eip1559', maxFeePerGas, maxPriorityFeePerGas }, maxPerGas: maxFeePerGas, gasPrice: price };
}

/**
 * How a broadcast ended:
 * - `accepted`: a node has the transaction (now, or from an earlier broadcast of the same bytes);
 * - `refused`: the node will not take it (`nonceTaken`: another transaction holds its nonce);
 * - `unreached`: no node got the request, nothing was sent;
 * - `unknown`: it may have reached a node (timeout after sending).
 */
export type Broadcast =
  | { kind: 'accepted' }
  | { kind: 'refused'; reason: string; nonceTaken: boolean; insufficientFunds: boolean }
  | { kind: 'unreached'; reason: string }
  | { kind: 'unknown'; reason: string };

/**
 * Where a sent transaction stands as the node sees it: in a block (`mined`, or `reverted` when
 * its receipt says it failed), waiting in its pool
 * (`known`, also when queued behind a nonce gap), or not at all (`unknown`: dropped from the pool,
 * or never received).
 * @throws NoUpstreamError or UpstreamRpcError as the pool does: the node could not say.
 */
export async function lookup(pool: UpstreamPool, txHash: Hex): Promise<'mined' | 'reverted' | 'known' | 'unknown'> {
  const receipt = await pool.request<{ blockNumber?: Hex | null; status?: Hex | null } | null>('eth_getTransactionReceipt', [txHash]);
  // In a block but reverted (status 0): the nonce and the gas are spent, the coins never moved.
  if (receipt?.blockNumber) return receipt.status === '0x0' ? 'reverted' : 'mined';
  const tx = await pool.request<{ blockNumber?: Hex | null } | null>('eth_getTransactionByHash', [txHash]);
  if (!tx) return 'unknown';
  return tx.blockNumber ? 'mined' : 'known';
}

const ALREADY_HAVE = /already known|already imported|known transaction|already exists|already in (the )?(mem)?pool/i;
const NONCE_USED = /nonce too low|nonce has already been used|old nonce|replacement transaction underpriced|already used/i;
const NO_FUNDS = /insufficient funds/i;

/**
 * Sends a signed transaction through the pool. Sending the same bytes again is harmless (same
 * nonce, same hash), which is what makes a re-broadcast after a crash safe.
 */
export async function broadcast(pool: UpstreamPool, rawTx: Hex, txHash: Hex): Promise<Broadcast> {
  try {
    await pool.request<Hex>('eth_sendRawTransaction', [rawTx]);
    return { kind: 'accepted' };
  } catch (err) {
    if (err instanceof NoUpstreamError) {
      return err.maybeSent ? { kind: 'unknown', reason: err.message } : { kind: 'unreached', reason: err.message };
    }
    if (!(err instanceof UpstreamRpcError)) throw err;
    if (ALREADY_HAVE.test(err.message)) return { kind: 'accepted' };
    if (NONCE_USED.test(err.message)) {
      // Our own transaction from an earlier broadcast, or another one holding the nonce?
      try {
        const known = await pool.request<unknown>('eth_getTransactionByHash', [txHash]);
        if (known) return { kind: 'accepted' };
      } catch (lookup) {
        return { kind: 'unknown', reason: lookup instanceof Error ? lookup.message : 'lookup failed' };
      }
      return { kind: 'refused', reason: `nonce already used by another transaction (${err.message})`, nonceTaken: true, insufficientFunds: false };
    }
    return { kind: 'refused', reason: err.message, nonceTaken: false, insufficientFunds: NO_FUNDS.test(err.message) };
  }
}
