// The `nat_*` methods of the native networks (C24, C25), translated to the node's own calls.
import { InvalidParamsError, MethodNotSupportedError, NodeAnsweredError, UpstreamError } from '../../errors/rpc.ts';
import { UpstreamRpcError } from '../../errors/upstream.ts';
import type { UpstreamPool } from '../../upstreams/http/pool.ts';

/**
 * The `nat_*` methods of the native networks (C24, C25), translated to the XDC-like node's own
 * calls by the table in config (`methods.native`: gateway method -> node method).
 *
 * Results use camelCase keys, `0x` lower-case addresses (the node sends `xdc…`, checksummed or
 * not) and decimal strings for wei amounts, which do not fit a JSON number without losing digits.
 *
 * Errors follow C22 as for `eth_*` calls: what a reachable node said is an answer (HTTP 200), and
 * only a call no node could answer is -32000 with 502.
 * - A JSON-RPC error the node answers is passed on unchanged: its code, message and data.
 * - A node that answers a result saying there is nothing (an epoch without a block, a block
 *   without a reward record) or carrying its own `Error` text is answered as a node answers a
 *   read it cannot serve: -32000 with HTTP 200 and a message that says what is missing, as geth's
 *   "header not found" for a state read at an unknown block. Not `result: null`: null already
 *   means "no reward for this address in an epoch the node knows", and must not also mean
 *   "unknown epoch" or "this node keeps no rewards".
 * - An answer the gateway cannot read (not JSON-RPC, or not an object where one is needed) is
 *   -32000 with 502: the node said nothing the caller could use, and another node, or the same
 *   one later, may answer (as an `eth_*` call whose node answers something not JSON-RPC).
 * - No node reached: the pool's NoUpstreamError, -32000 with 502.
 */

/** One call to the native node; resolves to the JSON-RPC `result`. */
export type NodeCall = <T = unknown>(method: string, params: readonly unknown[]) => Promise<T>;

/**
 * Node method that turns an epoch number into its first block, for the two reward methods.
 * Not in the config table: its keys must be `nat_*` names, and every key there is a method the
 * gateway offers to clients.
 */
export const EPOCH_INFO_METHOD = 'XDPoS_getBlockInfoByEpochNum';

export interface MethodDoc {
  params: string;
  result: string;
  description: string;
}

/** What each method takes and answers, for docs/rpc.md ("Native-chain methods") and the OpenAPI description. */
export const NATIVE_METHOD_DOCS: Record<string, MethodDoc> = {
  nat_getBlockByNumber: {
    params:
      '[block?]: a block tag ("latest", "earliest", "pending", "finalized"), a hex quantity ("0x4ca5e10") or a non-negative integer; "latest" when omitted.',
    result:
      '{ hash, round, number, parentHash, committed, miner, timestamp, encodedRLP }. `miner` is the 20-byte 0x address (the node sends it left-padded to 32 bytes); `round`, `number` and `timestamp` (seconds) are numbers; `committed` is true once the block is final; `encodedRLP` is the header RLP in base64.',
    description:
      'XDPoS v2 view of one block (node method XDPoS_getV2BlockByNumber). When the node cannot answer for that block (unknown number, v1 block) the error is -32000 with the node message, HTTP 200.',
  },
  nat_getCandidates: {
    params:
      '[epoch?]: an epoch number (integer, hex quantity or decimal string) or "latest"; "latest" when omitted.',
    result:
      '{ epoch, success, candidates: { "0x<address>": { capacity, status } } }. `capacity` is the stake in wei as a decimal string ("-1" for a masternode that is not a candidate); `status` is "MASTERNODE", "SLASHED" or "PROPOSED"; `success` is false (and `candidates` empty) when the node found no candidate list for the epoch.',
    description: 'Masternode candidates of an epoch with their stake and status (node method eth_getCandidates).',
  },
  nat_getMasternodes: {
    params: '[block?]: as for nat_getBlockByNumber; "latest" when omitted.',
    result:
      '{ epoch, number, round, masternodesLen, masternodes, penaltyLen, penalty, standbynodesLen, standbynodes }: the node keys in camelCase, addresses as 0x lower-case. `epoch` is present only when the node reports it.',
    description:
      'Active masternodes, penalised nodes and standby nodes at a block (node method XDPoS_getMasternodesByNumber). An error the node reports in its answer is -32000, HTTP 200.',
  },
  nat_getValidatorReward: {
    params:
      '[epoch, validatorAddress]: epoch as integer, hex quantity or decimal string; the address as 0x… or xdc…, any case.',
    result:
      '{ sign, reward } or null: `sign` is how many blocks the validator signed in the epoch, `reward` its signing reward in wei as a decimal string; null when the address has no signing reward in that epoch.',
    description:
      'Signing reward of one validator for one epoch: the node resolves the epoch to its block (XDPoS_getBlockInfoByEpochNum), then reads the reward record of that block (eth_getRewardByHash). An epoch the node has no block for, or whose block has no reward record (XDC nodes keep them only when run with --store-reward), is -32000 with HTTP 200 and a message saying which; an error the node answers is passed on unchanged.',
  },
  nat_getVoterReward: {
    params: '[epoch, masternodeAddress, voterAddress]: as for nat_getValidatorReward; addresses 0x… or xdc…, any case.',
    result:
      'The voter reward in wei as a decimal string, or null when that voter has no reward through that masternode in the epoch.',
    description:
      'Reward paid to one voter (staker) of one masternode for one epoch; same two node calls and errors as nat_getValidatorReward.',
  },
};

/**
 * Runs one `nat_*` call against the native node and returns the JSON-RPC result (C25).
 * A `nat_*` method in the table but not known here is passed through: params and result unchanged.
 *
 * @param table gateway method -> node method (`methods.native` in config).
 * @param call  sends one request to the node; {@link nodeCallFromPool} keeps wei amounts exact.
 * @throws InvalidParamsError (-32602) for bad params, before any node call.
 * @throws MethodNotSupportedError (-32601) when the method is not in the table.
 * @throws UpstreamRpcError (from `call`, unchanged) when the node answers a JSON-RPC error: the
 *   client gets it as the node wrote it, with HTTP 200 (`toRpcError`, C22).
 * @throws NodeAnsweredError (-32000, HTTP 200) when the node's answer says there is nothing to
 *   answer with (no block for the epoch, no reward record) or carries the node's own `Error`.
 * @throws UpstreamError (-32000, HTTP 502) when the node's answer cannot be read.
 * @throws NoUpstreamError (from the pool, unchanged) when no node answers.
 */
export async function callNativeMethod(
  method: string,
  params: unknown,
  table: Readonly<Record<string, string>>,
  call: NodeCall,
): Promise<unknown> {
  const nodeMethod = Object.hasOwn(table, method) ? table[method] : undefined;
  if (nodeMethod === undefined) throw new MethodNotSupportedError(`method ${method} is not available on this network`);
  // C22, C25: a node's JSON-RPC error propagates as the UpstreamRpcError `call` throws, which
  // the dispatcher answers unchanged with HTTP 200 (toRpcError), as for every eth_* call.
  const node: Ask = call;
  switch (method) {
    case 'nat_getBlockByNumber': {
      const [block = 'latest'] = paramList(method, params, ['block'], 0);
      return toBlock(nodeMethod, await node(nodeMethod, [blockParam(method, 'block', block)]));
    }
    case 'nat_getCandidates': {
      const [epoch = 'latest'] = paramList(method, params, ['epoch'], 0);
      const e = epochParam(method, epoch, true);
      return toCandidates(nodeMethod, await node(nodeMethod, [e === 'latest' ? e : hex(e)]));
    }
    case 'nat_getMasternodes': {
      const [block = 'latest'] = paramList(method, params, ['block'], 0);
      return toMasternodes(nodeMethod, await node(nodeMethod, [blockParam(method, 'block', block)]));
    }
    case 'nat_getValidatorReward': {
      const [epoch, validator] = paramList(method, params, ['epoch', 'validatorAddress']);
      const e = epochParam(method, epoch, false);
      const address = addressParam(method, 'validatorAddress', validator);
      const record = await rewardRecord(node, nodeMethod, e);
      const entry = lookup(record.signers, address);
      if (!isObject(entry)) return null;
      const { reward, ...rest } = camelKeys(entry);
      return { ...rest, reward: toAmount(reward) };
    }
    case 'nat_getVoterReward': {
      const [epoch, masternode, voter] = paramList(method, params, ['epoch', 'masternodeAddress', 'voterAddress']);
      const e = epochParam(method, epoch, false);
      const mn = addressParam(method, 'masternodeAddress', masternode);
      const v = addressParam(method, 'voterAddress', voter);
      const record = await rewardRecord(node, nodeMethod, e);
      const amount = lookup(lookup(record.rewards, mn), v);
      return amount === undefined || amount === null ? null : toAmount(amount);
    }
    default: {
      // An operator-added mapping: the gateway knows nothing of its shape.
      return node(nodeMethod, paramList(method, params, [], 0, true));
    }
  }
}

/**
 * A {@link NodeCall} over the pool that keeps integers above 2^53 exact (as decimal strings):
 * the node writes stakes and rewards in wei as bare JSON numbers, which `JSON.parse`, and so
 * `UpstreamPool.request`, rounds (3281250000000000000123 becomes 3281250000000000000000).
 * Errors as `UpstreamPool.request`: `UpstreamRpcError` for a node error, `NoUpstreamError` when none answers.
 */
export function nodeCallFromPool(pool: Pick<UpstreamPool, 'forward'>): NodeCall {
  let nextId = 1;
  return async <T = unknown>(method: string, params: readonly unknown[]): Promise<T> => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params });
    const res = await pool.forward(body, [method]);
    let answer: unknown;
    try {
      answer = parseJsonKeepingBigIntegers(res.body.toString('utf8'));
    } catch {
      answer = undefined;
    }
    if (!isObject(answer)) throw new UpstreamError('native node sent an invalid answer');
    const { error } = answer;
    if (isObject(error)) {
      throw new UpstreamRpcError(
        typeof error.code === 'number' ? error.code : -32603,
        typeof error.message === 'string' ? error.message : 'upstream error',
        error.data,
        res.upstream,
      );
    }
    if (!('result' in answer)) throw new UpstreamError('native node sent an invalid answer');
    return answer.result as T;
  };
}

/**
 * `JSON.parse`, except that integer literals beyond `Number.MAX_SAFE_INTEGER` come back as
 * decimal strings instead of rounded numbers. Throws as `JSON.parse` on invalid JSON.
 */
export function parseJsonKeepingBigIntegers(text: string): unknown {
  let out = '';
  let copied = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string, escapes included: digits inside it are not numbers.
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
      continue;
    }
    if (c !== 0x2d && (c < 0x30 || c > 0x39)) continue;
    let end = i + 1;
    while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
    const literal = text.slice(i, end);
    if (/^-?[0-9]{16,}$/.test(literal) && !Number.isSafeInteger(Number(literal))) {
      out += `${text.slice(copied, i)}"${literal}"`;
      copied = end;
    }
    i = end - 1;
  }
  return JSON.parse(copied === 0 ? text : out + text.slice(copied));
}

const isNumberChar = (c: number): boolean =>
  (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d; // 0-9 . e E + -

// ---- node calls -------------------------------------------------------------------------------

type Ask = (nodeMethod: string, params: readonly unknown[]) => Promise<unknown>;

/**
 * What a node that did answer said there is not, or the `Error` text it put in its answer: -32000
 * with HTTP 200 (C22: the node answered; C25), as a node answers a read it cannot serve.
 * `data.method` names the node method whose answer it was.
 */
function nodeSaid(nodeMethod: string, message: string, details: Record<string, unknown> = {}): NodeAnsweredError {
  return new NodeAnsweredError(-32000, message, { details: { method: nodeMethod, ...details } });
}

/** An answer that is not an object where the translation needs one: the call could not be answered (-32000, HTTP 502). */
function expectObject(nodeMethod: string, value: unknown): Record<string, unknown> {
  if (!isObject(value)) throw new UpstreamError(`native node error (${nodeMethod}): unexpected answer`, { details: { method: nodeMethod } });
  return value;
}

interface RewardRecord {
  signers: unknown;
  rewards: unknown;
}

/**
 * The epoch's first block, then that block's reward record: the node keys rewards by block hash.
 * A null answer is the node's "nothing" (a Go nil) and reads as the empty answer would.
 */
async function rewardRecord(node: Ask, rewardMethod: string, epoch: number): Promise<RewardRecord> {
  const rawInfo = await node(EPOCH_INFO_METHOD, [epoch]);
  const info = rawInfo === null ? {} : camelKeys(expectObject(EPOCH_INFO_METHOD, rawInfo));
  // `hash` on current nodes; `epochBlockHash` from nodes whose struct has no JSON tags.
  const hash = info.hash ?? info.epochBlockHash;
  if (typeof hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(hash) || /^0x0{64}$/.test(hash)) {
    throw nodeSaid(EPOCH_INFO_METHOD, `no block found for epoch ${epoch}`, { epoch });
  }
  const rawRecord = await node(rewardMethod, [hash]);
  const record = rawRecord === null ? {} : expectObject(rewardMethod, rawRecord);
  // The node answers {} when it has no record for the block (not stored, or unknown hash).
  if (record.signers === undefined && record.rewards === undefined) {
    throw nodeSaid(
      rewardMethod,
      `no reward record for epoch ${epoch}: the node keeps none for its block ${hash} (XDC nodes keep them only when run with --store-reward)`,
      { epoch, blockHash: hash },
    );
  }
  return { signers: record.signers, rewards: record.rewards };
}

// ---- results ----------------------------------------------------------------------------------

function toBlock(nodeMethod: string, raw: unknown): Record<string, unknown> {
  const { error, ...block } = camelKeys(expectObject(nodeMethod, raw));
  if (typeof error === 'string' && error !== '') throw nodeSaid(nodeMethod, error);
  if ('miner' in block) block.miner = unpadAddress(block.miner);
  return block;
}

function toCandidates(nodeMethod: string, raw: unknown): Record<string, unknown> {
  const { candidates, ...rest } = camelKeys(expectObject(nodeMethod, raw));
  const out: Record<string, unknown> = {};
  // A map keyed by address on XDC; some forks answer a list of { address, capacity, status }.
  const entries = Array.isArray(candidates)
    ? candidates.filter(isObject).map((c) => [c.address, c] as const)
    : Object.entries(isObject(candidates) ? candidates : {});
  for (const [address, info] of entries) {
    if (typeof address !== 'string' || !isObject(info)) continue;
    const { address: _, ...fields } = camelKeys(info);
    if ('capacity' in fields) fields.capacity = toAmount(fields.capacity);
    out[toAddress(address)] = fields;
  }
  return { ...rest, candidates: out };
}

function toMasternodes(nodeMethod: string, raw: unknown): Record<string, unknown> {
  const { error, ...rest } = camelKeys(expectObject(nodeMethod, raw));
  // Go marshals this `error` field as null, or as {} (the message is lost) when set.
  if (typeof error === 'string' ? error !== '' : error !== null && error !== undefined) {
    throw nodeSaid(nodeMethod, typeof error === 'string' ? error : `${nodeMethod}: the node reported an error without a message`);
  }
  for (const key of ['masternodes', 'penalty', 'standbynodes']) {
    const list = rest[key];
    if (Array.isArray(list)) rest[key] = list.map(toAddress);
  }
  return rest;
}

// ---- params -----------------------------------------------------------------------------------

/** The positional params (absent means none); `required` defaults to all of `names`; `anyCount` skips the count check. */
function paramList(
  method: string,
  params: unknown,
  names: readonly string[],
  required = names.length,
  anyCount = false,
): unknown[] {
  const list = params ?? [];
  if (!Array.isArray(list)) throw new InvalidParamsError(`${method}: params must be an array`);
  if (!anyCount && (list.length < required || list.length > names.length)) {
    const expected = required === names.length ? `${names.length}` : `${required} to ${names.length}`;
    throw new InvalidParamsError(`${method} expects ${expected} params (${names.join(', ')}), got ${list.length}`);
  }
  return list;
}

const BLOCK_TAGS = new Set(['latest', 'earliest', 'pending', 'finalized']);
const MAX_BLOCK = 2n ** 63n - 1n; // the node's block number is an int64

function blockParam(method: string, name: string, value: unknown): string {
  if (typeof value === 'string' && BLOCK_TAGS.has(value)) return value;
  if (typeof value === 'string' && /^0x[0-9a-fA-F]{1,16}$/.test(value) && BigInt(value) <= MAX_BLOCK) {
    return `0x${BigInt(value).toString(16)}`; // the node refuses leading zeros
  }
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return hex(value);
  throw new InvalidParamsError(
    `${method}: ${name} must be a block tag (${[...BLOCK_TAGS].join(', ')}), a hex quantity or a non-negative integer`,
  );
}

function epochParam(method: string, value: unknown, allowLatest: true): number | 'latest';
function epochParam(method: string, value: unknown, allowLatest: false): number;
function epochParam(method: string, value: unknown, allowLatest: boolean): number | 'latest' {
  if (allowLatest && value === 'latest') return value;
  let n: number | undefined;
  if (typeof value === 'number') n = value;
  else if (typeof value === 'string' && /^(0x[0-9a-fA-F]{1,13}|[0-9]{1,15})$/.test(value)) n = Number(value);
  if (n !== undefined && Number.isSafeInteger(n) && n >= 0) return n;
  throw new InvalidParamsError(
    `${method}: epoch must be a non-negative integer, hex quantity or decimal string${allowLatest ? ', or "latest"' : ''}`,
  );
}

const ADDRESS = /^(?:0x|xdc)([0-9a-f]{40})$/i;

function addressParam(method: string, name: string, value: unknown): string {
  const m = typeof value === 'string' ? ADDRESS.exec(value) : null;
  if (m?.[1] === undefined) throw new InvalidParamsError(`${method}: ${name} must be a 20-byte address, 0x… or xdc…`);
  return `0x${m[1].toLowerCase()}`;
}

// ---- shapes -----------------------------------------------------------------------------------

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `MasternodesLen` -> `masternodesLen`, `EncodedRLP` -> `encodedRLP`; one level deep. */
function camelKeys(obj: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) out[key.charAt(0).toLowerCase() + key.slice(1)] = value;
  return out;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/** `xdc…` or `0x…`, any case, to `0x` lower-case; anything else unchanged. */
function toAddress<T>(value: T): T | string {
  const m = typeof value === 'string' ? ADDRESS.exec(value) : null;
  return m?.[1] === undefined ? value : `0x${m[1].toLowerCase()}`;
}

/** The node sends the miner as a 32-byte hash of the address, left-padded with zeros. */
function unpadAddress(value: unknown): unknown {
  if (typeof value === 'string' && /^0x0{24}[0-9a-fA-F]{40}$/.test(value)) return `0x${value.slice(-40).toLowerCase()}`;
  return toAddress(value);
}

/** A wei amount as a decimal string; the node sends bare JSON numbers. */
function toAmount(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isInteger(value)) return BigInt(value).toString();
  return value;
}

/** The value under `address` in a map keyed by addresses in any form (`xdc…`, checksummed, …). */
function lookup(map: unknown, address: string): unknown {
  if (!isObject(map)) return undefined;
  for (const [key, value] of Object.entries(map)) if (toAddress(key) === address) return value;
  return undefined;
}
