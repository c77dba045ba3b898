// Judges one call's params (C50, C53, C54) and writes them back in canonical form for the node.
import { InvalidParamsError } from '../errors/rpc.ts';
import { eachMemberName, memberSpan, skipValue } from '../json/lossless.ts';
import { MAX_FEE_HISTORY_BLOCKS, type MethodFacts } from './catalogue.ts';
import { type BlockRef, blockValue, canonicalMember, fold, isHash, MAX_UINT64, type MemberSet, members, quantityText, readBlock, readQuantity } from './values.ts';

/**
 * One call's params judged once and made canonical (C50, C53, C54). Every value the gateway
 * judges (block references, bounded quantities, the members of transaction, filter and
 * simulation objects, addresses a contract list reads) is read the way nodes read it, checked,
 * and written back canonically, so what the gateway judged is what the node runs: a spelling
 * cannot mean one thing here and another at the node. A call already in canonical form (the
 * common case) is left as it is, bytes and all.
 */
export interface JudgedParams {
  /** The params as judged: the caller's own object when nothing was rewritten. */
  readonly params: unknown;
  /** The method's (first) block parameter as read; absent when it names none (`latest` at the node). */
  readonly block: BlockRef;
  /** True when a value was rewritten: the call must be forwarded from `params`, not as its text. */
  readonly rewritten: boolean;
}

const NO_BLOCK: BlockRef = Object.freeze({ kind: 'absent' });
const UNCHANGED_EMPTY: JudgedParams = Object.freeze({ params: undefined, block: NO_BLOCK, rewritten: false });

// Members of the objects inside params that the gateway judges, as nodes spell them.
const TX = members(
  'from', 'to', 'gas', 'gasPrice', 'maxFeePerGas', 'maxPriorityFeePerGas', 'maxFeePerBlobGas', 'value', 'data', 'input', 'nonce', 'chainId',
  'accessList', 'type', 'blobVersionedHashes', 'blobs', 'commitments', 'proofs', 'authorizationList',
);
const FILTER = members('fromBlock', 'toBlock', 'blockHash', 'address', 'topics');
const SIMULATE = members('blockStateCalls', 'traceTransfers', 'validation', 'returnFullTransactions');
const BLOCK_STATE = members('blockOverrides', 'stateOverrides', 'calls');
const BLOCK_OVERRIDES = members('number', 'difficulty', 'time', 'gasLimit', 'feeRecipient', 'prevRandao', 'baseFeePerGas', 'blobBaseFee', 'beaconRoot', 'withdrawals');
const ACCOUNT_OVERRIDE = members('nonce', 'balance', 'code', 'state', 'stateDiff', 'movePrecompileToAddress');
const AUTHORIZATION = members('chainId', 'address', 'nonce', 'yParity', 'r', 's');
const WITHDRAWAL = members('index', 'validatorIndex', 'address', 'amount');
const CALL_OPTIONS = members('stateOverrides', 'blockOverrides');
/** A state override's member names are addresses: none is renamed. */
const ADDRESS_KEYS: MemberSet = members();
/** The members of a transaction object, of eth_simulateV1's payload and of one of its blocks, by their canonical names. */
export const TRANSACTION_MEMBERS: ReadonlySet<string> = new Set(TX.values());
export const SIMULATE_MEMBERS: ReadonlySet<string> = new Set(SIMULATE.values());
export const BLOCK_STATE_MEMBERS: ReadonlySet<string> = new Set(BLOCK_STATE.values());

/** An object the gateway judges: its members as nodes spell them, and those nodes read as 64-bit integers (C50). */
interface Shape {
  readonly members: MemberSet;
  readonly uint64: ReadonlySet<string>;
}
const shape = (set: MemberSet, uint64: readonly string[]): Shape => ({ members: set, uint64: new Set(uint64) });
/*
 * C50: the members nodes read as 64-bit integers, bounded at 2^64-1 in every method that takes the
 * object (eth_call, eth_estimateGas, eth_createAccessList, eth_simulateV1, debug_traceCall). As
 * the execution-apis spec types them (src/schemas/execute.yaml: GenericCallTransaction, BlockOverrides,
 * AccountOverride, Withdrawal: uint64) and geth reads them (hexutil.Uint64: TransactionArgs.Gas
 * and Nonce, override.BlockOverrides.Time and GasLimit, override.OverrideAccount.Nonce,
 * types.SetCodeAuthorization.Nonce, types.Withdrawal.Index, Validator and Amount). A block
 * override's `number` is a block number: uint64 in the spec (geth alone holds it in a big.Int).
 * 256-bit members (value, fees, chainId, balance, storage, difficulty, baseFeePerGas, blobBaseFee,
 * an authorization's r and s) are not bounded here.
 */
const TX_SHAPE = shape(TX, ['gas', 'nonce']);
const AUTHORIZATION_SHAPE = shape(AUTHORIZATION, ['nonce']);
const BLOCK_OVERRIDES_SHAPE = shape(BLOCK_OVERRIDES, ['number', 'time', 'gasLimit']);
const WITHDRAWAL_SHAPE = shape(WITHDRAWAL, ['index', 'validatorIndex', 'amount']);
const ACCOUNT_OVERRIDE_SHAPE = shape(ACCOUNT_OVERRIDE, ['nonce']);
const ADDRESS = /^0[xX][0-9a-fA-F]{40}$/;

/** The -32602 for a judged value, thrown from deep inside the params and answered by {@link judgeParams}. */
const invalid = (what: string, field: string) => new InvalidParamsError(`Invalid params: ${what}`, { details: { field } });

/** The params of one call judged (see {@link JudgedParams}), or the -32602 to answer. `callText`: the call as sent, for its member names as written. */
export function judgeParams(facts: MethodFacts | undefined, params: unknown, callText: string): JudgedParams | InvalidParamsError {
  if (params === undefined || params === null) return UNCHANGED_EMPTY;
  // C50: two members a Go node reads as one (case, escapes) would be judged on one and run on the other.
  const span = callText.includes('{', 1) ? memberSpan(callText, 'params') : null;
  if (span) {
    const repeated = repeatedMember(callText, span[0], span[1]);
    if (repeated !== null) {
      return new InvalidParamsError(`Invalid params: member "${repeated}" appears more than once in one object (names are compared as a node reads them: case and escapes ignored)`, {
        details: { member: repeated },
      });
    }
  }
  // Nothing of these params is judged (eth_blockNumber, eth_chainId, ...): nothing to read or rewrite.
  if (facts === undefined || !facts.judged || !Array.isArray(params)) return { params, block: NO_BLOCK, rewritten: false };
  try {
    return judgeList(facts, params as unknown[]);
  } catch (err) {
    if (err instanceof InvalidParamsError) return err;
    throw err;
  }
}

function judgeList(facts: MethodFacts, list: unknown[]): JudgedParams {
  let out: unknown[] | null = null;
  const set = (i: number, v: unknown): void => {
    out ??= [...list];
    out[i] = v;
  };
  let block: BlockRef = NO_BLOCK;
  for (let b = 0; b < facts.blocks.length; b++) {
    const { at, hash } = facts.blocks[b] as { at: number; hash: boolean };
    const v = list[at];
    const ref = readBlock(v, hash);
    if (ref.kind === 'invalid') throw invalid(`${ref.why} (param ${at})`, `params[${at}]`);
    if (b === 0) block = ref;
    const canonical = blockValue(ref, v);
    if (!same(canonical, v)) set(at, canonical);
  }
  if (facts.blockCount !== null) {
    const at = facts.blockCount;
    const n = readQuantity(list[at]);
    if (n === null || n > BigInt(MAX_FEE_HISTORY_BLOCKS)) throw invalid(`${facts.name} blockCount must be a quantity of at most ${MAX_FEE_HISTORY_BLOCKS}`, 'blockCount');
    if (list[at] !== quantityText(n)) set(at, quantityText(n));
  }
  for (const at of facts.uint64) {
    const v = list[at];
    if (v === undefined || v === null) continue;
    const text = uint64Text(v, 'params', at);
    if (text !== v) set(at, text);
  }
  judgeObject(list, facts.tx, transaction, set);
  judgeObject(list, facts.stateOverrides, stateOverrides, set);
  judgeObject(list, facts.blockOverrides, blockOverrides, set);
  judgeObject(list, facts.callOptions, callOptions, set);
  judgeObject(list, facts.logFilter ? 0 : null, logFilter, set);
  judgeObject(list, facts.contract === 'simulate' ? 0 : null, simulation, set);
  return { params: out ?? list, block, rewritten: out !== null };
}

/** The object at `at` of the params, when there is one, judged by `judge`; `set` takes it when it changed. */
function judgeObject(list: unknown[], at: number | null, judge: (o: Record<string, unknown>, field: string) => Record<string, unknown>, set: (i: number, v: unknown) => void): void {
  if (at === null) return;
  const v = list[at];
  if (!isObject(v)) return;
  const judged = judge(v, `params[${at}]`);
  if (judged !== v) set(at, judged);
}

/**
 * A 64-bit quantity as its canonical text (C50), refused when unreadable or larger, naming it
 * `field[member]` or `field.member` (the name is made only for a refusal: nothing per call).
 */
function uint64Text(v: unknown, field: string, member: string | number): string {
  const n = readQuantity(v);
  if (n !== null && n <= MAX_UINT64) return quantityText(n);
  const at = typeof member === 'number' ? `${field}[${member}]` : `${field}.${member}`;
  throw invalid(n === null ? `${at} must be a quantity (0x hex)` : `${at} above 2^64-1`, at);
}

/**
 * An object with its known member names canonical (a Go node matches them case-insensitively),
 * then `each` over the members; the same object when nothing changed.
 */
function canonicalObject(o: Record<string, unknown>, set: MemberSet, each: (name: string, value: unknown) => unknown): Record<string, unknown> {
  let out: Record<string, unknown> | null = null;
  const names = Object.keys(o);
  for (let i = 0; i < names.length; i++) {
    const written = names[i] as string;
    const name = canonicalMember(written, set) ?? written;
    const value = o[written];
    const judged = each(name, value);
    if (out === null && (name !== written || judged !== value)) {
      out = {};
      for (let j = 0; j < i; j++) out[names[j] as string] = o[names[j] as string];
    }
    if (out !== null) out[name] = judged;
  }
  return out ?? o;
}

/**
 * An object of one shape: its known member names canonical, its 64-bit members bounded (C50),
 * `inner` over the other members; the same object when nothing changed.
 */
function shaped(o: Record<string, unknown>, s: Shape, field: string, inner?: (name: string, value: unknown) => unknown): Record<string, unknown> {
  return canonicalObject(o, s.members, (name, value) => {
    if (s.uint64.has(name)) return value === undefined || value === null ? value : uint64Text(value, field, name);
    return inner === undefined ? value : inner(name, value);
  });
}

/** Each object of a list judged by `judge` (anything else as it is); the same list when nothing changed. */
function objects(list: unknown, field: string, judge: (o: Record<string, unknown>, field: string) => Record<string, unknown>): unknown {
  return Array.isArray(list) ? mapSame(list, (v, i) => (isObject(v) ? judge(v, `${field}[${i}]`) : v)) : list;
}

/** A transaction object (eth_call and its kin, each call of eth_simulateV1): 64-bit members bounded (its authorizations' too), addresses canonical. */
function transaction(tx: Record<string, unknown>, field: string): Record<string, unknown> {
  return shaped(tx, TX_SHAPE, field, (name, value) => {
    if (name === 'to' || name === 'from') return address(value);
    if (name === 'authorizationList') return objects(value, `${field}.authorizationList`, (a, f) => shaped(a, AUTHORIZATION_SHAPE, f));
    return value;
  });
}

/** Block overrides (eth_call, eth_estimateGas, debug_traceCall, each block of eth_simulateV1): 64-bit members bounded, the withdrawals' too. */
function blockOverrides(o: Record<string, unknown>, field: string): Record<string, unknown> {
  return shaped(o, BLOCK_OVERRIDES_SHAPE, field, (name, value) =>
    name === 'withdrawals' ? objects(value, `${field}.withdrawals`, (w, f) => shaped(w, WITHDRAWAL_SHAPE, f)) : value,
  );
}

/** A state override, address to account (eth_call and its kin, debug_traceCall, each block of eth_simulateV1): each account's nonce bounded. */
function stateOverrides(o: Record<string, unknown>, field: string): Record<string, unknown> {
  return canonicalObject(o, ADDRESS_KEYS, (account, value) => (isObject(value) ? shaped(value, ACCOUNT_OVERRIDE_SHAPE, `${field}[${JSON.stringify(account.slice(0, 64))}]`) : value));
}

/** A `stateOverrides` or `blockOverrides` member (debug_traceCall's options, a block of eth_simulateV1) judged as such. */
function overrides(name: string, value: unknown, field: string): unknown {
  if (!isObject(value)) return value;
  if (name === 'stateOverrides') return stateOverrides(value, field);
  if (name === 'blockOverrides') return blockOverrides(value, field);
  return value;
}

/** debug_traceCall's options: its state and block overrides judged; the tracer's own members are the node's. */
function callOptions(o: Record<string, unknown>, field: string): Record<string, unknown> {
  return canonicalObject(o, CALL_OPTIONS, (name, value) => overrides(name, value, `${field}.${name}`));
}

/** A log filter: block bounds read as blocks (no hash there), the block hash and addresses canonical. */
function logFilter(f: Record<string, unknown>, field: string): Record<string, unknown> {
  return canonicalObject(f, FILTER, (name, value) => {
    if (name === 'fromBlock' || name === 'toBlock') {
      const ref = readBlock(value, false);
      if (ref.kind === 'invalid') throw invalid(`${name}: ${ref.why}`, `${field}.${name}`);
      return ref.kind === 'absent' ? value : blockValue(ref, value);
    }
    if (name === 'blockHash') return isHash(value) ? value.toLowerCase() : value;
    if (name === 'address') return Array.isArray(value) ? mapSame(value, address) : address(value);
    return value;
  });
}

/** eth_simulateV1's payload: every call as a transaction, each block's block and state overrides as eth_call's. */
function simulation(s: Record<string, unknown>, field: string): Record<string, unknown> {
  return canonicalObject(s, SIMULATE, (name, value) => {
    if (name !== 'blockStateCalls') return value;
    return objects(value, `${field}.blockStateCalls`, (block, at) =>
      canonicalObject(block, BLOCK_STATE, (member, v) => (member === 'calls' ? objects(v, `${at}.calls`, transaction) : overrides(member, v, `${at}.${member}`))),
    );
  });
}

/** An address in lower case when it is one (a contract list compares it so, and nodes read hex in any case). */
function address(v: unknown): unknown {
  return typeof v === 'string' && ADDRESS.test(v) ? `0x${v.slice(2).toLowerCase()}` : v;
}

/** `list.map(f)`, or the same array when `f` changed nothing. */
function mapSame<T>(list: T[], f: (v: T, i: number) => unknown): unknown[] {
  let out: unknown[] | null = null;
  for (let i = 0; i < list.length; i++) {
    const v = f(list[i] as T, i);
    if (v !== list[i]) (out ??= [...list])[i] = v;
  }
  return out ?? list;
}

function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  // A canonical EIP-1898 object equals the caller's when the members and values are the same.
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => a[k] === b[k]);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

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
      const name = decodedFold(written);
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

/** A member name as written, escapes decoded, then case folded. */
export function decodedFold(written: string): string {
  let name = written;
  if (written.includes('\\')) {
    try {
      name = JSON.parse(`"${written}"`) as string;
    } catch {
      return written;
    }
  }
  return fold(name);
}

/**
 * The call's text to forward, written from the judged params when they were rewritten: the
 * caller's id exactly as written (C23), the method, the canonical params. A number the caller
 * wrote that JSON.parse cannot hold exactly (an integer above 2^53) cannot be written back, so such
 * a call is refused rather than changed.
 */
export function callText(idText: string | null, method: string, params: unknown): string | InvalidParamsError {
  let inexact = false;
  const json = JSON.stringify(params, (_k, v: unknown) => {
    if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) inexact = true;
    return v;
  });
  if (inexact) return new InvalidParamsError('Invalid params: an integer above 2^53 written as a JSON number cannot be forwarded exactly; send quantities as 0x hex strings', { details: { field: 'params' } });
  return `{"jsonrpc":"2.0",${idText === null ? '' : `"id":${idText},`}"method":${JSON.stringify(method)},"params":${json}}`;
}
