/**
 * Which calls want an archive node (issue 15, point 6): a full node keeps the state of the last
 * `pruneDepthBlocks` blocks only, so state reads at an older block go to upstreams marked
 * `archive` first. Blocks, receipts and logs stay on full nodes and are not routed here.
 */

/** Position of the block parameter of the state-reading methods (C26). */
const BLOCK_PARAM: Readonly<Record<string, number>> = {
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_getTransactionCount: 1,
  eth_getStorageAt: 2,
  eth_call: 1,
  eth_estimateGas: 1,
  eth_createAccessList: 1,
  debug_traceCall: 1,
  debug_traceBlockByNumber: 0,
  trace_call: 2,
  trace_block: 0,
  trace_replayBlockTransactions: 0,
};

/** Methods that go to archive nodes first whatever their block: many full nodes serve proofs of recent blocks only. */
const ALWAYS_ARCHIVE: ReadonlySet<string> = new Set(['eth_getProof']);

/** True when one of `methods` may need state older than a full node keeps (cheap: no parsing). */
export function mayNeedArchive(methods: readonly string[]): boolean {
  for (const m of methods) if (ALWAYS_ARCHIVE.has(m) || BLOCK_PARAM[m] !== undefined) return true;
  return false;
}

/**
 * True when the request (a single call or a batch, as sent) reads state at a block more than
 * `pruneDepth` blocks below `head`, or is a method that always prefers archive nodes. Unknown
 * head, tags (`latest`, `safe`, ...) and block hashes count as recent: nothing proves them old.
 */
export function needsArchive(body: string | Buffer, methods: readonly string[], head: number | null, pruneDepth: number): boolean {
  if (methods.some((m) => ALWAYS_ARCHIVE.has(m))) return true;
  if (head === null) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return false;
  }
  const calls = Array.isArray(parsed) ? parsed : [parsed];
  for (const c of calls) {
    if (typeof c !== 'object' || c === null) continue;
    const { method, params } = c as { method?: unknown; params?: unknown };
    if (typeof method !== 'string' || !Array.isArray(params)) continue;
    const at = BLOCK_PARAM[method];
    if (at === undefined) continue;
    const n = blockNumber(params[at]);
    if (n !== null && head - n > pruneDepth) return true;
  }
  return false;
}

/** The number a block parameter names: a hex quantity, `earliest`, or an EIP-1898 `{blockNumber}`. */
function blockNumber(p: unknown): number | null {
  if (p === 'earliest') return 0;
  if (typeof p === 'object' && p !== null) p = (p as { blockNumber?: unknown }).blockNumber;
  if (typeof p !== 'string' || !/^0x[0-9a-fA-F]{1,15}$/.test(p)) return null;
  return Number.parseInt(p, 16);
}
