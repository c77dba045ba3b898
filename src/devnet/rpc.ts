// Plain JSON-RPC calls from the devnet to its own anvil chains (never through the gateway).
import { setTimeout as sleep } from 'node:timers/promises';

/** One JSON-RPC call; throws with the node's message on a JSON-RPC error. */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[], timeoutMs = 5_000): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json()) as { result?: unknown; error?: { message?: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message ?? 'error'}`);
  return body.result as T;
}

/** The fields of a receipt the devnet reads. */
export interface Receipt {
  status: `0x${string}`;
  contractAddress: `0x${string}` | null;
  blockNumber: `0x${string}`;
}

/** Milliseconds between two looks for a receipt: short, as a devnet block comes within a second. */
const RECEIPT_POLL_MS = 25;

/** Polls for a transaction's receipt; throws after `timeoutMs` or when the transaction reverted. */
export async function waitForReceipt(url: string, hash: string, timeoutMs = 15_000): Promise<Receipt> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await rpc<Receipt | null>(url, 'eth_getTransactionReceipt', [hash]);
    if (receipt) {
      if (receipt.status !== '0x1') throw new Error(`transaction ${hash} reverted`);
      return receipt;
    }
    if (Date.now() > deadline) throw new Error(`no receipt for ${hash} within ${timeoutMs} ms`);
    await sleep(RECEIPT_POLL_MS);
  }
}
