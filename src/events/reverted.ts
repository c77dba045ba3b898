// Which transactions of a block reverted, read from their receipts, so they count as no transfer (C35).
import type { UpstreamPool } from '../upstreams/http/pool.ts';

/**
 * The hashes (lower case) of those of `txs` whose receipt says they reverted (status 0x0): they
 * moved no coin (C35). A receipt no node could give counts as a success, so the transfer is kept
 * rather than lost; `onMissing` is told about it. Read before a block's storage transaction (C33).
 */
export async function revertedOf(pool: UpstreamPool, txs: ReadonlyArray<{ hash: string }>, onMissing: (hash: string, err: Error) => void): Promise<Set<string>> {
  const reverted = new Set<string>();
  await Promise.all(
    txs.map(async (t) => {
      try {
        const receipt = await pool.request<{ status?: string } | null>('eth_getTransactionReceipt', [t.hash]);
        if (receipt?.status === '0x0') reverted.add(t.hash.toLowerCase());
      } catch (err) {
        onMissing(t.hash, err as Error);
      }
    }),
  );
  return reverted;
}
