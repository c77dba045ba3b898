// eth_getLogs limits: a range wider than the network's maxLogsRange is split into chunks.
import { InvalidParamsError, type RpcError, toRpcError, UpstreamError } from '../../errors/rpc.ts';
import type { UpstreamPool } from '../../upstreams/http/pool.ts';
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
  /**
   * Bounds named by a tag: planned (and metered) at the network's agreed head, and resolved by a
   * node only when the plan runs, after the meter admitted the call.
   */
  tags?: { from?: Tag; to?: Tag };
}

type Tag = 'latest' | 'safe' | 'finalized';

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
 * Decides how an `eth_getLogs` call goes (C26): null when it goes to a node as it
 * is (a `blockHash` query, a range within `maxRange`, params the node should judge), a plan of
 * chunks when it is wider, or the -32602 to answer when it would take more than `maxChunks`.
 * It runs before the meter, so it asks no node: a tag (`latest`, `pending`, `safe`, `finalized`)
 * is planned and metered at the pool's agreed head and resolved by a node in {@link runLogs},
 * once the call is admitted; `earliest` is 0. With no head known yet the call goes on as it is.
 */
export function planLogs(params: unknown, limits: LogsLimits, pool: UpstreamPool): LogsPlan | RpcError | null {
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
    // Tags resolve from the pool's known head (issue of nodes called before the meter: the plan is
    // made before the call is metered, so it asks no node). `safe` and `finalized` are at most the
    // head: planned up to it and resolved when the plan runs. No head known: the call goes on as it is.
    const head = pool.head();
    if (head === null) return null;
    const tags: NonNullable<LogsPlan['tags']> = {};
    if (typeof from !== 'number') tags.from = from;
    if (typeof to !== 'number') tags.to = to;
    from = typeof from === 'number' ? from : head;
    to = typeof to === 'number' ? to : head;
    // A node may be a little ahead of the agreed head: a range that could reach past it by that much is not planned as narrow.
    if (to < from || to - from + 1 + (tags.to === 'latest' ? HEAD_SLACK : 0) <= maxRange) return null;
    const plan = cut(filter, from, to, maxRange, limits);
    if ('chunks' in plan) plan.tags = tags;
    return plan;
  }
  return cut(filter, from, to, maxRange, limits);
}

/** The plan of `from`..`to` in chunks of `maxRange`, or the -32602 for a range wider than `maxChunks` allow. */
function cut(filter: Record<string, unknown>, from: number, to: number, maxRange: number, limits: LogsLimits): LogsPlan | RpcError {
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
export async function runLogs(planned: LogsPlan, limits: LogsLimits, pool: UpstreamPool, idText: string, reqId?: string): Promise<LogsAnswer> {
  let plan = planned;
  if (plan.tags) {
    // Now that the call is metered: the tags as a node knows them.
    let resolved: LogsPlan | RpcError;
    try {
      const at = async (tag: Tag | undefined, planned: number): Promise<number> => {
        if (tag === undefined) return planned;
        if (tag === 'latest') return Number.parseInt(await pool.request<string>('eth_blockNumber', [], { reqId }), 16);
        const block = await pool.request<{ number?: unknown } | null>('eth_getBlockByNumber', [tag, false], { reqId });
        if (typeof block?.number !== 'string') throw new UpstreamError(`Upstream RPC error: no ${tag} block known to the node`);
        return Number.parseInt(block.number, 16);
      };
      const from = await at(plan.tags.from, plan.from);
      const to = await at(plan.tags.to, plan.to);
      if (to < from) return { status: 200, text: `{"jsonrpc":"2.0","id":${idText},"result":[]}`, sent: 0 };
      resolved = cut(plan.filter, from, to, limits.maxRange ?? to - from + 1, limits);
    } catch (err) {
      const e = toRpcError(err);
      return { status: e.httpStatus, text: errorText(idText, e), sent: 0 };
    }
    if (!('chunks' in resolved)) return { status: resolved.httpStatus, text: errorText(idText, resolved), sent: 0 };
    plan = resolved;
  }
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
