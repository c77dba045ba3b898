/**
 * The method catalogue (C53, C24, C44, C26, C50, C10): everything the gateway knows about a
 * JSON-RPC method, in one table that every other module asks. Whether a method is passed,
 * refused (and why) or answered by the gateway; its block parameters and the forms each takes;
 * how its answers are cached; whether it changes chain state, may be hedged, works on a filter,
 * wants an archive node; how a key's contract list judges it; the bounds of its parameters; its
 * default compute units.
 *
 * The standard part follows the Ethereum execution-apis specification (`src/eth/*.yaml`); the
 * names it holds are checked against a copy of that list by test/methods/catalogue.test.ts.
 */

/**
 * How a method may be called.
 * - `standard`: passed to the nodes, for every plan and network (the default of `methods.standard`).
 * - `plan`: a node namespace (`debug_*`, `trace_*`, `txpool_*`) a plan opens by name (`methods.planExtras`).
 * - `websocket`: answered by the gateway on a WebSocket only (subscriptions).
 * - `native`: a `nat_*` method the gateway translates on the native networks (C25).
 * - `refused`: never passed, whatever the config says; `why` says why (C24, C53).
 */
export type Access = 'standard' | 'plan' | 'websocket' | 'native' | 'refused';

/** One block parameter: its position, and whether a 32-byte hash and the EIP-1898 objects are allowed there. */
export interface BlockParam {
  readonly at: number;
  /** `BlockNumberOrTagOrHash`: a hash, `{blockHash, requireCanonical}` and `{blockNumber}` too (C53). */
  readonly hash: boolean;
}

/**
 * C44: how answers of a method are kept.
 * - `always`: one answer per network (the chain id).
 * - `hash`: param 0 is a hash that fixes the content; `settle`: only once the answer's block is safe.
 * - `block`: state or content at the method's block parameter, stored when that block is safe or named by hash.
 * - `logs`: an `eth_getLogs` whose range is fixed.
 * - `flight`: never stored, but identical calls in flight share one node call.
 */
export type CacheRule = 'always' | 'hash' | 'hashSettled' | 'block' | 'logs' | 'flight';

/**
 * C50: how a key with a contract allowlist judges each method; a method without a rule is refused.
 * - `none`: names no contract (chain data, an account's balance and nonce, fees, filters by id).
 * - `call`: param 0 is a transaction whose `to` must be listed; no override in later params.
 * - `logs`: param 0 is a log filter whose `address` (one or a list) must all be listed.
 * - `account`: param 0 is the address whose code or storage is read.
 * - `accounts`: param 0 is an object whose member names are the addresses read (eth_getStorageValues).
 * - `simulate`: every call of every block of `eth_simulateV1`; no override anywhere.
 * - `subscribe`: a `logs` subscription as `logs`; `newHeads`, `newPendingTransactions`, `syncing` free.
 * - `rawTx`: the signed transaction's `to`, read from its encoding.
 * - `refused`: runs code or replays transactions at addresses the gateway cannot bound (tracers).
 */
export type ContractRule = 'none' | 'call' | 'logs' | 'account' | 'accounts' | 'simulate' | 'subscribe' | 'rawTx' | 'refused';

/** C26: `always`, reads that prefer archive nodes whatever their block; `block`, when their block is older than full nodes keep. */
export type ArchiveRule = 'always' | 'block' | null;

/** What the gateway knows about one method. */
export interface MethodFacts {
  readonly name: string;
  readonly access: Access;
  /** For `refused`: the reason given to the caller. */
  readonly why: string | null;
  /** In the execution-apis specification. */
  readonly spec: boolean;
  readonly blocks: readonly BlockParam[];
  readonly cache: CacheRule | null;
  /** Changes chain state: never repeated on a second node once it may have reached the first (C26). */
  readonly stateChanging: boolean;
  /** A slow answer may be asked of a second node too (C26 hedging). */
  readonly hedge: boolean;
  /** Works on a filter kept by one node: `new` makes one, `use` reads or removes one. */
  readonly filter: 'new' | 'use' | null;
  /** Param 0 is a log filter (`fromBlock`, `toBlock`, `blockHash`, `address`, `topics`). */
  readonly logFilter: boolean;
  readonly archive: ArchiveRule;
  readonly contract: ContractRule;
  /** Position of a transaction object (`gas`, `nonce`, `authorizationList[].nonce` are 64-bit: C50), or null. */
  readonly tx: number | null;
  /** Position of a state override, address to account (`nonce` is 64-bit: C50), or null. */
  readonly stateOverrides: number | null;
  /** Position of block overrides (`number`, `time`, `gasLimit` and the withdrawals' `index`, `validatorIndex`, `amount` are 64-bit: C50), or null. */
  readonly blockOverrides: number | null;
  /** Position of debug_traceCall's options, whose `stateOverrides` and `blockOverrides` are the objects above, or null. */
  readonly callOptions: number | null;
  /** Positions of 64-bit quantities (an index into a block: C50). */
  readonly uint64: readonly number[];
  /** Position of a block count bounded by `maxBlockCount` (eth_feeHistory, C50), or null. */
  readonly blockCount: number | null;
  /** Default compute units (C10), null for the config's `default`; `methods.computeUnits` may set others. */
  readonly cu: number | null;
  /** Whether any value of its params is judged (a block, a bound, a transaction, override, filter or simulation object). */
  readonly judged: boolean;
}

/** C50: eth_feeHistory's block count at most this (a huge one makes a node allocate without bound). */
export const MAX_FEE_HISTORY_BLOCKS = 1024;

const NODE_ACCOUNT = 'needs an account held by the node; sign in your app and use eth_sendRawTransaction';

type Entry = Partial<Omit<MethodFacts, 'name' | 'blocks' | 'cu'>> & { blocks?: ReadonlyArray<readonly [number, 'tag' | 'hash']>; cu?: number };

const state = (at: number, extra: Entry = {}): Entry => ({ blocks: [[at, 'hash']], cache: 'block', archive: 'block', ...extra });
const S = true; // in the specification

// One row per method. Defaults: standard, not in the spec, no block, not cached, hedged, contract rule none, the default CU.
const TABLE: Readonly<Record<string, Entry>> = {
  // Client and chain.
  eth_chainId: { spec: S, cache: 'always' },
  net_version: { spec: S, cache: 'always' },
  eth_blockNumber: { spec: S, cache: 'flight' },
  eth_syncing: { spec: S, cache: 'flight' },
  eth_capabilities: { spec: S, cache: 'flight' },
  eth_config: { spec: S, cache: 'flight' },
  eth_coinbase: { spec: S, access: 'refused', why: NODE_ACCOUNT },
  eth_accounts: { spec: S, access: 'refused', why: NODE_ACCOUNT },
  eth_protocolVersion: { cache: 'flight' },
  eth_mining: { cache: 'flight' },
  net_listening: { cache: 'flight' },
  net_peerCount: { cache: 'flight' },
  web3_clientVersion: { cache: 'flight' },
  web3_sha3: { cache: 'flight' },
  // Blocks.
  eth_getBlockByHash: { spec: S, cache: 'hash' },
  eth_getBlockByNumber: { spec: S, blocks: [[0, 'tag']], cache: 'block' },
  eth_getBlockTransactionCountByHash: { spec: S, cache: 'hash' },
  eth_getBlockTransactionCountByNumber: { spec: S, blocks: [[0, 'tag']], cache: 'block' },
  eth_getBlockReceipts: { spec: S, blocks: [[0, 'hash']], cache: 'block', cu: 5 },
  eth_getBlockAccessList: { spec: S, blocks: [[0, 'hash']], cache: 'block', cu: 5 },
  eth_getUncleByBlockHashAndIndex: { cache: 'hash', uint64: [1] },
  eth_getUncleByBlockNumberAndIndex: { blocks: [[0, 'tag']], cache: 'block', uint64: [1] },
  eth_getUncleCountByBlockHash: { cache: 'hash' },
  eth_getUncleCountByBlockNumber: { blocks: [[0, 'tag']], cache: 'block' },
  // Execution. The spec names BlockNumberOrTag for estimateGas and createAccessList; nodes take a hash there too.
  // The overrides after the block are where geth reads them (internal/ethapi: Call, EstimateGas, CreateAccessList).
  eth_call: state(1, { spec: S, contract: 'call', tx: 0, stateOverrides: 2, blockOverrides: 3, cu: 2 }),
  eth_estimateGas: state(1, { spec: S, cache: 'flight', contract: 'call', tx: 0, stateOverrides: 2, blockOverrides: 3, cu: 2 }),
  eth_createAccessList: state(1, { spec: S, cache: 'flight', contract: 'call', tx: 0, stateOverrides: 2, cu: 2 }),
  eth_simulateV1: state(1, { spec: S, cache: 'flight', contract: 'simulate', cu: 10 }),
  eth_fillTransaction: { spec: S, cache: 'flight', contract: 'call', tx: 0, cu: 2 },
  // Fees.
  eth_gasPrice: { spec: S, cache: 'flight' },
  eth_baseFee: { spec: S, cache: 'flight' },
  eth_blobBaseFee: { spec: S, cache: 'flight' },
  eth_maxPriorityFeePerGas: { spec: S, cache: 'flight' },
  eth_feeHistory: { spec: S, blocks: [[1, 'tag']], cache: 'flight', blockCount: 0, cu: 2 },
  // Filters and logs: a filter lives on the node that made it, so none is hedged.
  eth_newFilter: { spec: S, filter: 'new', logFilter: true, hedge: false, contract: 'logs' },
  eth_newBlockFilter: { spec: S, filter: 'new', hedge: false },
  eth_newPendingTransactionFilter: { spec: S, filter: 'new', hedge: false },
  eth_uninstallFilter: { spec: S, filter: 'use', hedge: false },
  eth_getFilterChanges: { spec: S, filter: 'use', hedge: false },
  eth_getFilterLogs: { spec: S, filter: 'use', hedge: false },
  eth_getLogs: { spec: S, logFilter: true, cache: 'logs', contract: 'logs', cu: 10 },
  // Signing with the node's accounts.
  eth_sign: { spec: S, access: 'refused', why: NODE_ACCOUNT },
  eth_signTransaction: { spec: S, access: 'refused', why: NODE_ACCOUNT },
  eth_signTypedData: { access: 'refused', why: NODE_ACCOUNT },
  eth_signTypedData_v3: { access: 'refused', why: NODE_ACCOUNT },
  eth_signTypedData_v4: { access: 'refused', why: NODE_ACCOUNT },
  eth_sendTransaction: { spec: S, access: 'refused', why: NODE_ACCOUNT, stateChanging: true, hedge: false },
  eth_sendTransactionSync: { access: 'refused', why: NODE_ACCOUNT, stateChanging: true, hedge: false },
  eth_sendUnsignedTransaction: { access: 'refused', why: NODE_ACCOUNT, stateChanging: true, hedge: false },
  // State.
  eth_getBalance: state(1, { spec: S }),
  eth_getStorageAt: state(2, { spec: S, contract: 'account' }),
  eth_getStorageValues: state(1, { spec: S, contract: 'accounts', cu: 2 }),
  eth_getTransactionCount: state(1, { spec: S }),
  eth_getCode: state(1, { spec: S, contract: 'account' }),
  eth_getProof: state(2, { spec: S, contract: 'account', archive: 'always', cu: 5 }),
  // Transactions.
  eth_sendRawTransaction: { spec: S, stateChanging: true, hedge: false, contract: 'rawTx', cu: 5 },
  eth_sendRawTransactionSync: { stateChanging: true, hedge: false, contract: 'rawTx', cu: 5 },
  eth_sendRawTransactionConditional: { stateChanging: true, hedge: false, contract: 'rawTx', cu: 5 },
  eth_getTransactionByHash: { spec: S, cache: 'hashSettled' },
  eth_getTransactionByBlockHashAndIndex: { spec: S, cache: 'hash', uint64: [1] },
  eth_getTransactionByBlockNumberAndIndex: { spec: S, blocks: [[0, 'tag']], cache: 'block', uint64: [1] },
  eth_getTransactionReceipt: { spec: S, cache: 'hashSettled' },
  // Subscriptions: the gateway's own, over a WebSocket.
  eth_subscribe: { access: 'websocket', hedge: false, contract: 'subscribe' },
  eth_unsubscribe: { access: 'websocket', hedge: false },
  // The native networks' methods as the gateway translates them (C25): blocks, epochs and rewards, no contract.
  nat_getBlockByNumber: { access: 'native' },
  nat_getCandidates: { access: 'native', cu: 2 },
  nat_getMasternodes: { access: 'native', cu: 2 },
  nat_getValidatorReward: { access: 'native', cu: 4 },
  nat_getVoterReward: { access: 'native', cu: 4 },
  // Node namespaces a plan may open (tracers run code the gateway cannot bound for a contract list).
  // C10: tracing costs more than reading: one call or transaction re-executed 10-20, a block's
  // or a range's worth 20-50 (the structured debug tracers weigh more than trace_*'s flat ones).
  // trace_call's param 3 is a state override to reth and a trace config to Erigon: not judged as either.
  debug_traceCall: { access: 'plan', blocks: [[1, 'hash']], archive: 'block', contract: 'refused', tx: 0, callOptions: 2, cu: 20 },
  debug_traceTransaction: { access: 'plan', contract: 'refused', cu: 20 },
  debug_traceBlockByNumber: { access: 'plan', blocks: [[0, 'tag']], archive: 'block', contract: 'refused', cu: 50 },
  debug_traceBlockByHash: { access: 'plan', contract: 'refused', cu: 50 },
  trace_call: { access: 'plan', blocks: [[2, 'hash']], archive: 'block', contract: 'refused', tx: 0, cu: 10 },
  trace_callMany: { access: 'plan', contract: 'refused', cu: 20 },
  trace_rawTransaction: { access: 'plan', contract: 'refused', cu: 10 },
  trace_replayTransaction: { access: 'plan', contract: 'refused', cu: 20 },
  trace_replayBlockTransactions: { access: 'plan', blocks: [[0, 'tag']], archive: 'block', contract: 'refused', cu: 50 },
  trace_transaction: { access: 'plan', contract: 'refused', cu: 10 },
  trace_block: { access: 'plan', blocks: [[0, 'tag']], archive: 'block', contract: 'refused', cu: 20 },
  trace_filter: { access: 'plan', contract: 'refused', cu: 50 },
  txpool_content: { access: 'plan', contract: 'refused' },
  txpool_contentFrom: { access: 'plan', contract: 'refused' },
  txpool_inspect: { access: 'plan', contract: 'refused' },
  txpool_status: { access: 'plan', contract: 'refused' },
};

// C24: whole namespaces refused whatever the config says, each with the reason it gives.
const REFUSED_NAMESPACES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^personal_/, NODE_ACCOUNT],
  [/^(anvil|hardhat|evm|ganache|tenderly)_/, 'is a devnet control method and is not available through the gateway'],
  [/^(admin|miner|engine)_/, 'controls the node and is not available'],
];
/** Node namespaces a plan may open, method by method, in `methods.planExtras` (C24). */
const PLAN_NAMESPACE = /^(debug|trace|txpool)_/;

function facts(name: string, e: Entry): MethodFacts {
  const judged =
    (e.blocks ?? []).length > 0 ||
    e.blockCount !== undefined ||
    (e.uint64 ?? []).length > 0 ||
    e.tx !== undefined ||
    e.stateOverrides !== undefined ||
    e.blockOverrides !== undefined ||
    e.callOptions !== undefined ||
    e.logFilter === true ||
    e.contract === 'simulate';
  return Object.freeze({
    judged,
    name,
    access: e.access ?? 'standard',
    why: e.why ?? null,
    spec: e.spec ?? false,
    blocks: Object.freeze((e.blocks ?? []).map(([at, form]) => Object.freeze({ at, hash: form === 'hash' }))),
    cache: e.cache ?? null,
    stateChanging: e.stateChanging ?? false,
    hedge: e.hedge ?? !(e.stateChanging ?? false),
    filter: e.filter ?? null,
    logFilter: e.logFilter ?? false,
    archive: e.archive ?? null,
    contract: e.contract ?? (e.access === 'refused' ? 'refused' : 'none'),
    tx: e.tx ?? null,
    stateOverrides: e.stateOverrides ?? null,
    blockOverrides: e.blockOverrides ?? null,
    callOptions: e.callOptions ?? null,
    uint64: Object.freeze([...(e.uint64 ?? [])]),
    blockCount: e.blockCount ?? null,
    cu: e.cu ?? null,
  });
}

const CATALOGUE: ReadonlyMap<string, MethodFacts> = new Map(Object.entries(TABLE).map(([name, e]) => [name, facts(name, e)]));

/**
 * The facts of a method the catalogue names, or undefined. A name it does not know (a node's own
 * extension, a plan-opened `debug_*` not listed) has no block parameter, no cache, is hedged, and
 * is refused to a key with a contract list.
 */
export function methodFacts(name: string): MethodFacts | undefined {
  return CATALOGUE.get(name);
}

/** Every method the catalogue names. */
export function catalogue(): IterableIterator<MethodFacts> {
  return CATALOGUE.values();
}

/** Why a method is refused whatever the config says (C24, C53), or null. */
export function refusedWhy(name: string): string | null {
  const f = CATALOGUE.get(name);
  if (f?.access === 'refused') return f.why;
  for (const [re, why] of REFUSED_NAMESPACES) if (re.test(name)) return why;
  return null;
}

/** Whether a plan may open the method by name (`debug_*`, `trace_*`, `txpool_*`). */
export function planMayOpen(name: string): boolean {
  return PLAN_NAMESPACE.test(name) && refusedWhy(name) === null;
}

/** The default of `methods.standard`: every method the catalogue passes to the nodes on every plan. */
export const STANDARD_METHODS: readonly string[] = Object.freeze([...CATALOGUE.values()].filter((f) => f.access === 'standard').map((f) => f.name));

/** Methods the gateway answers itself on a WebSocket (subscriptions). */
export const WEBSOCKET_METHODS: readonly string[] = Object.freeze([...CATALOGUE.values()].filter((f) => f.access === 'websocket').map((f) => f.name));

/**
 * C55: whether a method's answers can be checked against another node at a fixed block: a read
 * (not state-changing, no filter, not a subscription) with a block parameter.
 */
export function checkableAtBlock(name: string): boolean {
  const f = CATALOGUE.get(name);
  return f !== undefined && f.blocks.length > 0 && !f.stateChanging && f.filter === null && (f.access === 'standard' || f.access === 'plan');
}

/**
 * C55: whether a method's answers are sampled by default: a state read at a block (its answers are
 * kept by block and routed to archive nodes for old blocks), whose answer every honest node gives
 * alike: eth_getBalance, eth_call, eth_getCode, eth_getStorageAt, eth_getTransactionCount...
 */
export function sampledByDefault(name: string): boolean {
  const f = CATALOGUE.get(name);
  return f !== undefined && checkableAtBlock(name) && f.cache === 'block' && f.archive !== null;
}

/** The default compute units of every method that does not cost the config's `default` (C10). */
export function defaultComputeUnits(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const f of CATALOGUE.values()) if (f.cu !== null) out[f.name] = f.cu;
  return out;
}
