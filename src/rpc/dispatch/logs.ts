import { InvalidParamsError, type RpcError, toRpcError, UpstreamError } from '../../errors/rpc.ts';
import type { UpstreamPool } from '../../upstreams/pool.ts';
import { errorText } from '../jsonrpc.ts';

export const GET_LOGS = 'eth_getLogs';

/** A network's `eth_getLogs` limits (its own `maxLogsRange`/`maxLogsResults`, else the `rpc` defaults). */
export interface LogsLimits {
  /** Blocks one query sent to a node may span; null: never split. */
  maxRange: number | null;
  /** Logs a split query may answer; null: no limit. */
  maxResults: number | null;
  /** Chunks of one query in flight at once. */
  concurrency: number;
  /** Chunks one query may take; a wider range is refused before anything is sent. */
  maxChunks: number;
}

/** A query wider than `maxRange`, resolved to block numbers and cut into chunks. */
export interface LogsPlan {
  /** The client's filter without its block bounds. */
  filter: Record<string, unknown>;
  from: number;
  to: number;
  /** Inclusive block ranges, in order. */
  chunks: Array<[number, number]>;
}

const QUANTITY = /^0x[0-9a-fA-F]{1,13}$/; // up to 2^52: block numbers, never beyond
const LATEST = new Set(['latest', 'pending']);
// A node behind the best head by up to this many blocks still sees a passed-through range as planned.
const HEAD_SLACK = 8;

type Bound = number | 'latest' | 'safe' | 'finalized' | null;

/** A block bound as written: a number, `earliest` (0), a tag to resolve, or null when it is not one (the node judges). */
function bound(v: unknown): Bound {
  if (v === undefined || v === null) return 'latest';
  if (typeof v !== 'string') return null;
  if (QUANTITY.test(v)) return Number.parseInt(v, 16);
  if (v === 'earliest') return 0;
  if (LATEST.has(v)) return 'latest';
  if (v === 'safe' || v === 'finalized') return v;
  return null;
}

const hex = (n: number) => `0x${n.toString(16)}`;

/**
 * Decides how an `eth_getLogs` call goes (issue 15, point 5): null when it goes to a node as it
 * is (a `blockHash` query, a range within `maxRange`, params the node should judge), a plan of
 * chunks when it is wider, or the -32602 to answer when it would take more than `maxChunks`.
 * Block tags are resolved first, only when they could make the range too wide: `latest` and
 * `pending` by one `eth_blockNumber`, `safe` and `finalized` by the node's block of that tag,
 * `earliest` is 0. When a tag cannot be resolved the call goes on as it is.
 */
export async function planLogs(params: unknown, limits: LogsLimits, pool: UpstreamPool, reqId?: string): Promise<LogsPlan | RpcError | null> {
  const maxRange = limits.maxRange;
  if (maxRange === null || !Array.isArray(params) || params.length !== 1) return null;
  const filter = params[0] as Record<string, unknown> | null;
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter) || filter.blockHash !== undefined) return null;
  let from = bound(filter.fromBlock);
  let to = bound(filter.toBlock);
  if (from === null || to === null || (from === 'latest' && to === 'latest')) return null;
  if (typeof from === 'number' && typeof to === 'number') {
    if (to < from || to - from + 1 <= maxRange) return null;
  } else {
    // From a number to the head: the pool's best head tells whether it can be wide at all.
    const head = pool.head();
    if (typeof from === 'number' && to === 'latest' && head !== null && head - from + 1 + HEAD_SLACK <= maxRange) return null;
    try {
      let latest: number | undefined;
      const resolve = async (b: Bound): Promise<number | null> => {
        if (typeof b === 'number' || b === null) return b;
        if (b === 'latest') return (latest ??= Number.parseInt(await pool.request<string>('eth_blockNumber', [], { reqId }), 16));
        const block = await pool.request<{ number?: unknown } | null>('eth_getBlockByNumber', [b, false], { reqId });
        return typeof block?.number === 'string' ? Number.parseInt(block.number, 16) : null;
      };
      from = await resolve(from);
      to = await resolve(to);
    } catch {
      return null; // no node told: the call goes on as it is and meets the same trouble there
    }
    if (from === null || to === null || !Number.isSafeInteger(from) || !Number.isSafeInteger(to)) return null;
    if (to < from || to - from + 1 <= maxRange) return null;
  }
  const width = to - from + 1;
  const count = Math.ceil(width / maxRange);
  if (count > limits.maxChunks) {
    const most = maxRange * limits.maxChunks;
    return new InvalidParamsError(
      `eth_getLogs over ${width} blocks is more than this network serves in one query: at most ${most} blocks (maxLogsRange ${maxRange} x ${limits.maxChunks} chunks); ask for a narrower range`,
      { details: { limit: 'maxLogsBlocks', maxBlocks: most, requestedBlocks: width } },
    );
  }
  const chunks: Array<[number, number]> = [];
  for (let a = from; a <= to; a += maxRange) chunks.push([a, Math.min(to, a + maxRange - 1)]);
  const rest = { ...filter };
  delete rest.fromBlock;
  delete rest.toBlock;
  return { filter: rest, from, to, chunks };
}

/** The answer to a split query: its text under the client's id and the HTTP status. */
export interface LogsAnswer {
  status: number;
  text: string;
  /** Chunks sent to nodes (the query is metered by its plan, this is what it really cost). */
  sent: number;
}

/**
 * Runs a plan: the chunks go to the pool (failover as any read), at most `concurrency` at once,
 * and their logs are merged in block order into one answer. A node's error on any chunk is the
 * answer (C22: as the node wrote it); more than `maxResults` logs is -32602 naming the limit,
 * with the widest leading range that fits as a suggestion. Nothing more is sent once the outcome
 * is known.
 */
export async function runLogs(plan: LogsPlan, limits: LogsLimits, pool: UpstreamPool, idText: string, reqId?: string): Promise<LogsAnswer> {
  const results: Array<unknown[] | undefined> = plan.chunks.map(() => undefined);
  let next = 0;
  let total = 0;
  let sent = 0;
  let failure: unknown;
  let over = false;
  const worker = async (): Promise<void> => {
    while (failure === undefined && !over && next < plan.chunks.length) {
      const i = next++;
      const [a, b] = plan.chunks[i] as [number, number];
      sent++;
      try {
        const logs = await pool.request<unknown>(GET_LOGS, [{ ...plan.filter, fromBlock: hex(a), toBlock: hex(b) }], { reqId });
        if (!Array.isArray(logs)) throw new UpstreamError('Upstream RPC error: a node answered eth_getLogs without a list of logs');
        results[i] = logs;
        total += logs.length;
        if (limits.maxResults !== null && total > limits.maxResults) over = true;
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limits.concurrency, plan.chunks.length) }, worker));
  if (failure !== undefined) {
    const e = toRpcError(failure);
    return { status: e.httpStatus, text: errorText(idText, e), sent };
  }
  if (over) {
    const max = limits.maxResults as number;
    // The leading chunks that were all read and fit: a range the client can ask for instead.
    let fit = 0;
    let upTo = -1;
    for (let i = 0; i < plan.chunks.length; i++) {
      const r = results[i];
      if (r === undefined || fit + r.length > max) break;
      fit += r.length;
      upTo = (plan.chunks[i] as [number, number])[1];
    }
    const err = new InvalidParamsError(
      `eth_getLogs matched more than ${max} logs (maxLogsResults); ask for a narrower block range or a tighter filter`,
      {
        details: {
          limit: 'maxLogsResults',
          maxLogsResults: max,
          fromBlock: hex(plan.from),
          toBlock: hex(plan.to),
          ...(upTo >= 0 ? { suggestedRange: { fromBlock: hex(plan.from), toBlock: hex(upTo) } } : {}),
        },
      },
    );
    return { status: err.httpStatus, text: errorText(idText, err), sent };
  }
  let body = '';
  for (const r of results) {
    for (const log of r as unknown[]) body += body === '' ? JSON.stringify(log) : `,${JSON.stringify(log)}`;
  }
  return { status: 200, text: `{"jsonrpc":"2.0","id":${idText},"result":[${body}]}`, sent };
}
