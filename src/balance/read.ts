// C40: one network's part of the unified balance, read in one JSON-RPC batch through its pool.
import type { Address, Hex } from 'viem';
import { encodeFunctionData } from 'viem/utils';
import type { TokenConfig } from '../config/schema.ts';
import { BalanceReadError } from '../errors/node.ts';
import type { UpstreamPool } from '../upstreams/http/pool.ts';

const BALANCE_OF_ABI = [
  {
    type: 'function',
    name: 'balanceOf',
    stateMutability: 'view',
    inputs: [{ name: 'owner', type: 'address' }],
    outputs: [{ name: '', type: 'uint256' }],
  },
] as const;

/** A token's balance, or why it could not be read (no contract at the address, a revert, ...). */
export type TokenRead = { token: TokenConfig; raw: bigint } | { token: TokenConfig; error: string };

/** What one network holds for an address, all read at `blockNumber`. */
export interface NetworkRead {
  blockNumber: number;
  native: bigint;
  tokens: TokenRead[];
  /** `Date.now()` when the answer arrived. */
  readAt: number;
}

interface RpcItem {
  jsonrpc: '2.0';
  id: number;
  method: string;
  params: unknown[];
}

type Answer = { result: unknown } | { error: { code?: unknown; message?: unknown } };

const QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;
const WORD = /^0x[0-9a-fA-F]{64}$/;

/**
 * The reads of one address at `block` (a hex number or `latest`): its native balance, then
 * `balanceOf` of each token, ids from 1 in that order. With `latest`, the batch is framed by two
 * `eth_blockNumber` (ids 0 and n+1): equal answers show every read saw one block.
 */
export function balanceBatch(address: Address, tokens: readonly TokenConfig[], block: Hex | 'latest'): RpcItem[] {
  const data = encodeFunctionData({ abi: BALANCE_OF_ABI, functionName: 'balanceOf', args: [address] });
  const reads: RpcItem[] = [
    { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [address, block] },
    ...tokens.map((t, i): RpcItem => ({ jsonrpc: '2.0', id: i + 2, method: 'eth_call', params: [{ to: t.address, data }, block] })),
  ];
  if (block !== 'latest') return reads;
  return [
    { jsonrpc: '2.0', id: 0, method: 'eth_blockNumber', params: [] },
    ...reads,
    { jsonrpc: '2.0', id: reads.length + 1, method: 'eth_blockNumber', params: [] },
  ];
}

/** The answers of a batch by id; throws when the body is not a JSON-RPC batch answer. */
export function answersById(body: Buffer | string): Map<number, Answer> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString());
  } catch {
    throw new BalanceReadError('the node answered with something other than JSON');
  }
  if (!Array.isArray(parsed)) {
    // A node that refuses batches answers one error object.
    const message = rpcMessage((parsed as { error?: { message?: unknown } } | null)?.error);
    throw new BalanceReadError(message ? `the node refused the batch: ${message}` : 'the node did not answer the batch');
  }
  const out = new Map<number, Answer>();
  for (const item of parsed) {
    if (typeof item !== 'object' || item === null) continue;
    const { id } = item as { id?: unknown };
    if (typeof id === 'number' && ('result' in item || 'error' in item)) out.set(id, item as Answer);
  }
  return out;
}

function rpcMessage(error: { message?: unknown } | undefined): string | undefined {
  const m = error?.message;
  return typeof m === 'string' ? m.slice(0, 200) : undefined;
}

/** The quantity answered to `id`; throws naming `what` when it is missing, an error or malformed. */
function quantity(answers: Map<number, Answer>, id: number, what: string): bigint {
  const a = answers.get(id);
  if (!a) throw new BalanceReadError(`no answer for ${what}`);
  if ('error' in a) throw new BalanceReadError(`${what}: ${rpcMessage(a.error) ?? 'error'}`);
  if (typeof a.result !== 'string' || !QUANTITY.test(a.result)) throw new BalanceReadError(`${what}: not a quantity`);
  return BigInt(a.result);
}

/** A token's answer: a 32-byte word is its balance; anything else (an error, `0x` from an address without code) says why not. */
function tokenRead(answers: Map<number, Answer>, id: number, token: TokenConfig): TokenRead {
  const a = answers.get(id);
  if (!a) return { token, error: 'no answer' };
  if ('error' in a) return { token, error: rpcMessage(a.error) ?? 'error' };
  if (typeof a.result !== 'string' || !WORD.test(a.result)) {
    return { token, error: a.result === '0x' ? 'no contract at the address' : 'not an ERC-20 balance' };
  }
  return { token, raw: BigInt(a.result) };
}

/** The reads of a batch made by {@link balanceBatch} (without the block numbers). */
function reads(answers: Map<number, Answer>, tokens: readonly TokenConfig[]): { native: bigint; tokens: TokenRead[] } {
  return { native: quantity(answers, 1, 'eth_getBalance'), tokens: tokens.map((t, i) => tokenRead(answers, i + 2, t)) };
}

const METHODS = ['eth_blockNumber', 'eth_getBalance', 'eth_call'] as const;

/**
 * Reads `address` on one network in one batch through its pool (so one node answers all of it).
 * When a block arrived while the node answered (the two block numbers differ), the reads are
 * asked again pinned to the later block, so the answer is always of one block.
 *
 * @throws BalanceReadError, or the pool's NoUpstreamError when no node answered.
 */
export async function readNetwork(pool: UpstreamPool, address: Address, tokens: readonly TokenConfig[]): Promise<NetworkRead> {
  const first = answersById((await pool.forward(JSON.stringify(balanceBatch(address, tokens, 'latest')), METHODS)).body);
  const before = quantity(first, 0, 'eth_blockNumber');
  const after = quantity(first, tokens.length + 2, 'eth_blockNumber');
  if (before === after) return { blockNumber: Number(after), ...reads(first, tokens), readAt: Date.now() };
  const pinned = answersById((await pool.forward(JSON.stringify(balanceBatch(address, tokens, `0x${after.toString(16)}`)), METHODS)).body);
  return { blockNumber: Number(after), ...reads(pinned, tokens), readAt: Date.now() };
}
