/**
 * Plain JSON-RPC over HTTP to one node, never through the gateway: the devnet talking to its own
 * anvil chains, and the settler deployment (`npm run deploy:settlers`, also on real networks).
 * It sits at the bottom (beside the JSON scanners, below devnet and the features) so that both
 * may use it without a feature depending on the devnet or the other way round.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { NodeCallError, NodeHttpError, ReceiptTimeoutError, TransactionRevertedError } from '../errors/node.ts';

export interface CallOptions {
  /** Milliseconds to wait for one answer; default 5,000. */
  timeoutMs?: number;
  /**
   * Tries in all when no answer came (a timeout, a dropped connection, a 5xx from a relay);
   * default 1. Only for calls that may be repeated safely: reads, and signed transactions (their
   * second sending changes nothing), never `eth_sendTransaction`.
   */
  attempts?: number;
}

/**
 * One call. A JSON-RPC error is the node's answer and throws NodeCallError at once; no answer
 * throws the last attempt's error (NodeHttpError for a relay's 5xx).
 */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[], opts: CallOptions = {}): Promise<T> {
  const attempts = opts.attempts ?? 1;
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 5_000),
      });
      // A 5xx is a relay's failure (the devnet's responder in front of anvil, a load balancer), not the node's answer.
      if (res.status >= 500) throw new NodeHttpError(method, res.status, await res.text());
      const body = (await res.json()) as { result?: T; error?: { code?: number; message?: string } };
      if (body.error) throw new NodeCallError(method, body.error);
      return body.result as T;
    } catch (err) {
      if (err instanceof NodeCallError || attempt >= attempts) throw err;
    }
  }
}

/** Sends a signed transaction; a repeat that the node already has (sent by an attempt whose answer was lost) is no error. */
export async function sendRawTransaction(url: string, raw: string, opts: CallOptions = {}): Promise<void> {
  try {
    await rpc<string>(url, 'eth_sendRawTransaction', [raw], opts);
  } catch (err) {
    if (!(err instanceof NodeCallError) || !/already known|already imported|known transaction|nonce too low/i.test(err.message)) throw err;
  }
}

/** The fields of a receipt read here. */
export interface Receipt {
  status: `0x${string}`;
  contractAddress: `0x${string}` | null;
  blockNumber: `0x${string}`;
}

export interface ReceiptOptions {
  /** Milliseconds to wait for the receipt; default 15,000. */
  timeoutMs?: number;
  /** Milliseconds between two looks; default 25 (a devnet block comes within a second). */
  pollMs?: number;
  /** How each look is called. */
  call?: CallOptions;
}

/** Polls for a transaction's receipt; throws ReceiptTimeoutError after `timeoutMs`, TransactionRevertedError when it reverted. */
export async function waitForReceipt(url: string, hash: string, opts: ReceiptOptions = {}): Promise<Receipt> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await rpc<Receipt | null>(url, 'eth_getTransactionReceipt', [hash], opts.call);
    if (receipt) {
      if (receipt.status !== '0x1') throw new TransactionRevertedError(hash);
      return receipt;
    }
    if (Date.now() > deadline) throw new ReceiptTimeoutError(hash, timeoutMs);
    await sleep(opts.pollMs ?? 25);
  }
}
