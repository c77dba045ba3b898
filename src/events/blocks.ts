// C33: reading blocks with their full transactions through a network's upstream pool, and
// turning the node's JSON into exact values (numbers checked, wei as bigint, addresses lower-case).
import { BlockReadError } from '../errors/node.ts';
import type { ForwardResult } from '../upstreams/http/pool.ts';
import type { FollowedBlock, FollowedTransaction } from './types.ts';

/** What the follower needs of an upstream pool (`UpstreamPool` fits). */
export interface BlockSource {
  forward(body: string, methods: readonly string[]): Promise<ForwardResult>;
  request<T = unknown>(method: string, params: readonly unknown[]): Promise<T>;
}

const HEX_QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;
const HEX_DATA = /^0x[0-9a-fA-F]*$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const METHODS = ['eth_getBlockByNumber'] as const;

/** The node's head (`eth_blockNumber`) through the pool. */
export async function readHead(source: BlockSource): Promise<number> {
  return quantity(await source.request<unknown>('eth_blockNumber', []), 'eth_blockNumber');
}

/**
 * Blocks `from` .. `from + count - 1` with full transactions, in order: one request for a single
 * block, one JSON-RPC batch for more (the pool forwards the batch as it is). The list stops before
 * the first block the node does not have yet (`null`), so it may be shorter than asked, or empty.
 *
 * @throws BlockReadError for an answer that is not the blocks asked (`batchLevel` when the whole
 *   batch was refused), NoUpstreamError when no node answered.
 */
export async function readBlocks(source: BlockSource, network: string, chainId: number, from: number, count: number): Promise<FollowedBlock[]> {
  const call = (id: number, n: number) => `{"jsonrpc":"2.0","id":${id},"method":"eth_getBlockByNumber","params":["0x${n.toString(16)}",true]}`;
  if (count === 1) {
    const res = await source.forward(call(0, from), METHODS);
    const item = parseJson(res.body, 'a block');
    if (!isObject(item)) throw new BlockReadError('the node answered eth_getBlockByNumber with something other than an object');
    const raw = resultOf(item, from);
    return raw === null ? [] : [parseBlock(raw, network, chainId, from)];
  }
  const calls: string[] = [];
  for (let i = 0; i < count; i++) calls.push(call(i, from + i));
  const res = await source.forward(`[${calls.join(',')}]`, METHODS);
  const answer = parseJson(res.body, 'a batch of blocks');
  if (!Array.isArray(answer)) {
    const message = isObject(answer) && isObject(answer.error) ? String(answer.error.message) : 'not a batch answer';
    throw new BlockReadError(`the node refused a batch of ${count} blocks: ${message}`, true);
  }
  // JSON-RPC allows a batch's answers in any order: matched by id.
  const byId = new Map<number, Record<string, unknown>>();
  for (const item of answer) if (isObject(item) && typeof item.id === 'number') byId.set(item.id, item);
  const blocks: FollowedBlock[] = [];
  for (let i = 0; i < count; i++) {
    const item = byId.get(i);
    if (!item) throw new BlockReadError(`the node's batch answer lacks block ${from + i}`, true);
    const raw = resultOf(item, from + i);
    if (raw === null) break;
    blocks.push(parseBlock(raw, network, chainId, from + i));
  }
  return blocks;
}

function resultOf(item: Record<string, unknown>, n: number): Record<string, unknown> | null {
  if (item.error !== undefined) {
    const message = isObject(item.error) ? String(item.error.message) : 'error';
    throw new BlockReadError(`the node answered an error for block ${n}: ${message}`, true);
  }
  if (item.result === null) return null;
  if (!isObject(item.result)) throw new BlockReadError(`the node's answer for block ${n} is not a block`);
  return item.result;
}

/** One block of `eth_getBlockByNumber(n, true)` as the consumers get it; checks it is block `expected`. */
export function parseBlock(raw: Record<string, unknown>, network: string, chainId: number, expected: number): FollowedBlock {
  const number = quantity(raw.number, `block ${expected} number`);
  if (number !== expected) throw new BlockReadError(`asked for block ${expected}, the node answered block ${number}`);
  const hash = match(raw.hash, HASH, `block ${expected} hash`).toLowerCase();
  const parentHash = match(raw.parentHash, HASH, `block ${expected} parentHash`).toLowerCase();
  const timestamp = quantity(raw.timestamp, `block ${expected} timestamp`);
  if (!Array.isArray(raw.transactions)) throw new BlockReadError(`block ${expected} has no transaction list`);
  const transactions = raw.transactions.map((tx: unknown, i): FollowedTransaction => {
    if (!isObject(tx)) throw new BlockReadError(`block ${expected}: transaction ${i} is not an object (asked with full transactions)`);
    const where = `block ${expected} transaction ${i}`;
    return {
      hash: match(tx.hash, HASH, `${where} hash`).toLowerCase(),
      from: match(tx.from, ADDRESS, `${where} from`).toLowerCase(),
      to: tx.to === null || tx.to === undefined ? null : match(tx.to, ADDRESS, `${where} to`).toLowerCase(),
      value: BigInt(match(tx.value, HEX_QUANTITY, `${where} value`)),
      index: quantity(tx.transactionIndex, `${where} index`),
      input: match(tx.input, HEX_DATA, `${where} input`),
    };
  });
  return { network, chainId, number, hash, parentHash, timestamp, transactions };
}

function quantity(v: unknown, what: string): number {
  const n = Number.parseInt(match(v, HEX_QUANTITY, what), 16);
  if (!Number.isSafeInteger(n)) throw new BlockReadError(`${what} is out of range`);
  return n;
}

function match(v: unknown, re: RegExp, what: string): string {
  if (typeof v !== 'string' || !re.test(v)) throw new BlockReadError(`${what} is missing or malformed`);
  return v;
}

function parseJson(body: Buffer, what: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new BlockReadError(`the node's answer to ${what} is not JSON`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
