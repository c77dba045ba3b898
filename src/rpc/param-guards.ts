import { InvalidParamsError } from '../errors/rpc.ts';
import { eachMemberName, memberSpan, skipValue } from '../json/lossless.ts';

/**
 * C50: what a node cannot bound itself is refused (-32602) before any node sees it.
 * - An object anywhere inside params with two members that a Go node reads as one (geth and the
 *   native chain's client match member names case-insensitively, after decoding escapes, and
 *   keep the last): `{"to":"0xallowed","To":"0xother"}` would be judged on one and run on the other.
 * - `eth_feeHistory`'s block count above 1024 (a huge one makes a node allocate without bound).
 * - Block numbers, and the 64-bit fields of a transaction (`gas`, `nonce`), above 2^64-1: a node
 *   reads them as 64-bit integers and some overflow or panic on more.
 * Judged on the call's text (member names as written) and its parsed params.
 */
export function paramsProblem(method: string, params: unknown, callText: string): InvalidParamsError | null {
  if (params === undefined || params === null) return null;
  const span = callText.includes('{', 1) ? memberSpan(callText, 'params') : null;
  if (span) {
    const repeated = repeatedMember(callText, span[0], span[1]);
    if (repeated !== null) {
      return new InvalidParamsError(`Invalid params: member "${repeated}" appears more than once in one object (names are compared as a node reads them: case and escapes ignored)`, {
        details: { member: repeated },
      });
    }
  }
  if (!Array.isArray(params)) return null;
  const list = params as unknown[];
  if (method === 'eth_feeHistory') {
    const count = quantity(list[0]);
    if (count === INVALID || (count !== null && count > MAX_FEE_HISTORY_BLOCKS)) {
      return invalid(`eth_feeHistory blockCount must be at most ${MAX_FEE_HISTORY_BLOCKS}`, 'blockCount');
    }
  }
  const blocks = BLOCK_PARAMS[method];
  if (blocks) {
    for (const i of blocks) {
      if (blockTooLarge(list[i])) return invalid(`block number (param ${i}) above 2^64-1`, `list[${i}]`);
    }
  }
  const txAt = TX_PARAMS[method];
  if (txAt !== undefined) {
    const tx = list[txAt];
    if (isObject(tx)) {
      for (const field of TX_UINT64) if (tooLarge(tx[field])) return invalid(`${field} above 2^64-1`, `list[${txAt}].${field}`);
    }
  }
  if (FILTER_METHODS.has(method) && isObject(list[0])) {
    for (const field of ['fromBlock', 'toBlock'] as const) {
      if (blockTooLarge(list[0][field])) return invalid(`${field} above 2^64-1`, `list[0].${field}`);
    }
  }
  return null;
}

const MAX_FEE_HISTORY_BLOCKS = 1024n;
const MAX_UINT64 = 0xffff_ffff_ffff_ffffn;
const INVALID = -1n;

/** The parameter positions that name a block (number, tag or EIP-1898 object), by method. */
const BLOCK_PARAMS: Readonly<Record<string, readonly number[]>> = {
  eth_getBalance: [1],
  eth_getCode: [1],
  eth_getTransactionCount: [1],
  eth_getStorageAt: [2],
  eth_call: [1],
  eth_estimateGas: [1],
  eth_createAccessList: [1],
  eth_getProof: [2],
  eth_simulateV1: [1],
  eth_getBlockByNumber: [0],
  eth_getBlockReceipts: [0],
  eth_getBlockTransactionCountByNumber: [0],
  eth_getUncleCountByBlockNumber: [0],
  eth_getTransactionByBlockNumberAndIndex: [0, 1],
  eth_getUncleByBlockNumberAndIndex: [0, 1],
  eth_feeHistory: [1],
};
/** Where a transaction object is, by method. */
const TX_PARAMS: Readonly<Record<string, number>> = { eth_call: 0, eth_estimateGas: 0, eth_createAccessList: 0 };
const TX_UINT64 = ['gas', 'nonce'] as const;
const FILTER_METHODS: ReadonlySet<string> = new Set(['eth_getLogs', 'eth_newFilter']);

const invalid = (what: string, field: string) => new InvalidParamsError(`Invalid params: ${what}`, { details: { field } });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A quantity as a node reads it (hex `0x..` or decimal, string or number): its value, null when absent or a tag, INVALID when unreadable as one. */
function quantity(v: unknown): bigint | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 ? BigInt(v) : INVALID;
  if (typeof v !== 'string') return null;
  if (/^0x[0-9a-fA-F]{1,}$/.test(v)) return BigInt(v);
  if (/^[0-9]{1,80}$/.test(v)) return BigInt(v);
  return null; // a tag such as "latest": the node's to judge
}

function tooLarge(v: unknown): boolean {
  const q = quantity(v);
  return q !== null && q !== INVALID && q > MAX_UINT64;
}

/** A block parameter above 2^64-1: a number, or an EIP-1898 `{blockNumber}`. */
function blockTooLarge(v: unknown): boolean {
  return isObject(v) ? tooLarge(v.blockNumber) : tooLarge(v);
}

/**
 * The first member name that two members of one object inside `t[from, to)` share as a Go node
 * reads names (escapes decoded, case folded), or null. Each object is checked once, at any depth.
 */
export function repeatedMember(t: string, from: number, to: number): string | null {
  for (let j = from; j < to; j++) {
    const c = t.charCodeAt(j);
    if (c === 0x22) j = skipValue(t, j) - 1;
    else if (c === 0x7b) {
      const r = repeatedIn(t, j);
      if (r !== null) return r;
    }
  }
  return null;
}

/** The repeated member name of the object whose `{` is at `at`, or null. */
function repeatedIn(t: string, at: number): string | null {
  let seen: Set<string> | undefined;
  let first: string | undefined;
  let repeated: string | null = null;
  eachMemberName(
    t,
    (start, end) => {
      const written = t.slice(start, end);
      const name = fold(written);
      if (first === undefined) first = name;
      else {
        seen ??= new Set([first]);
        if (seen.has(name)) {
          repeated = written.length > 64 ? written.slice(0, 64) : written;
          return false;
        }
        seen.add(name);
      }
      return true;
    },
    at,
  );
  return repeated;
}

/** A member name as a Go node compares it: escapes decoded, then case folded (ſ is s, K is k). */
function fold(written: string): string {
  let name = written;
  if (written.includes('\\')) {
    try {
      name = JSON.parse(`"${written}"`) as string;
    } catch {
      return written;
    }
  }
  return name.toUpperCase().toLowerCase();
}
