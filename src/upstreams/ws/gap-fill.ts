// After an upstream WebSocket reconnects, fetches what a topic missed and passes it on (C26).
import type { TopicState } from './topic-state.ts';

// Blocks of a gap fill requested at once over the upstream connection.
const FILL_CONCURRENCY = 8;

/** What a gap fill needs of its hub. */
export interface FillHost {
  /** A JSON-RPC call over the hub's current upstream connection. */
  request(method: string, params: readonly unknown[]): Promise<unknown>;
  /** Still the connection and the topic the fill began on: what it fetched may be passed on. */
  current(): boolean;
  /** Passes a header, log or held notification on to the topic's subscribers (duplicates dropped). */
  deliver(text: string, live: boolean): void;
  /** The fill failed on a current connection: the topic goes on live. */
  failed(err: Error): void;
}

/**
 * After a reconnect, fetches what a topic missed while the hub was away and passes it on, in
 * order, before the live notifications that arrive meanwhile (held in `st.buffer` until then;
 * C26): for newHeads the blocks after the last one passed on, by number; for logs
 * one eth_getLogs from the last block known covered to the node's head. At most `maxBlocks`
 * blocks, the latest ones. Requests go over the new connection; when it drops again, the next
 * reconnect fills from where this one got.
 */
export function fillGap(st: TopicState, maxBlocks: number, host: FillHost): void {
  const since = st.kind === 'newHeads' ? (st.lastNumber === null ? null : st.lastNumber + 1) : st.kind === 'logs' ? st.mark : null;
  if (maxBlocks <= 0 || since === null) return;
  const held: string[] = [];
  st.buffer = held;
  void (async () => {
    try {
      const head = Number.parseInt(String(await host.request('eth_blockNumber', [])), 16);
      const from = Math.max(since, head - maxBlocks + 1);
      if (!Number.isSafeInteger(head) || from > head || !host.current()) return;
      if (st.kind === 'newHeads') {
        const numbers = Array.from({ length: head - from + 1 }, (_, i) => from + i);
        const blocks: unknown[] = new Array<unknown>(numbers.length).fill(null);
        let next = 0;
        const worker = async () => {
          while (next < numbers.length) {
            const i = next++;
            blocks[i] = await host.request('eth_getBlockByNumber', [`0x${(numbers[i] as number).toString(16)}`, false]);
          }
        };
        await Promise.all(Array.from({ length: Math.min(FILL_CONCURRENCY, numbers.length) }, worker));
        if (!host.current()) return;
        for (const b of blocks) {
          if (typeof b !== 'object' || b === null) break; // a node behind: the rest comes live
          host.deliver(JSON.stringify(headerOf(b as Record<string, unknown>, st.headerKeys)), false);
        }
      } else {
        const filter = (st.topic.params[1] ?? {}) as Record<string, unknown>;
        const logs = await host.request('eth_getLogs', [{ ...filter, fromBlock: `0x${from.toString(16)}`, toBlock: `0x${head.toString(16)}` }]);
        if (!host.current() || !Array.isArray(logs)) return;
        for (const log of logs) host.deliver(JSON.stringify(log), false);
        if (st.mark === null || head > st.mark) st.mark = head;
      }
    } catch (err) {
      if (host.current()) host.failed(err as Error);
    } finally {
      // On a connection already gone, the held notifications go too: the next fill covers them.
      if (st.buffer === held) {
        st.buffer = null;
        if (host.current()) for (const t of held) host.deliver(t, true);
      }
    }
  })();
}

/** A block fetched by number, cut to the members of a live newHeads header (nodes send the header, not the block). */
function headerOf(block: Record<string, unknown>, keys: readonly string[] | null): Record<string, unknown> {
  if (keys === null) {
    const { transactions: _t, uncles: _u, ...header } = block;
    return header;
  }
  const out: Record<string, unknown> = {};
  for (const k of keys) if (k in block) out[k] = block[k];
  return out;
}
