// What a node (or another outside source) answered that a background feature cannot use. Each
// pins the code its feature reports it with; the message names no upstream address.
import { BaseError } from './base.ts';

/** A node's answer the block follower cannot use: garbage, an error object, a block of the wrong shape (C33). */
export class BlockReadError extends BaseError {
  override name = 'BlockReadError';
  static override readonly code = 'UPSTREAM_ERROR';
  /** True when the node refused or failed the batch as a whole (a smaller batch may pass). */
  readonly batchLevel: boolean;

  constructor(message: string, batchLevel = false) {
    super(message);
    this.batchLevel = batchLevel;
  }
}

/** The network's node gave no usable answer to a balance read. */
export class BalanceReadError extends BaseError {
  override name = 'BalanceReadError';
  static override readonly code = 'UPSTREAM_ERROR';
}

/** A price source (a feed contract or an HTTP API, C34) answered something that is not a price. */
export class PriceSourceError extends BaseError {
  override name = 'PriceSourceError';
  static override readonly code = 'PRICE_SOURCE_ERROR';
}

/**
 * Errors of the plain JSON-RPC client (json/rpc-client.ts) that the devnet and the settler
 * deployment use to talk to a node directly, never through the gateway's upstream pools.
 */

/** The node answered the call with a JSON-RPC error: an answer, so never tried again. */
export class NodeCallError extends BaseError {
  override name = 'NodeCallError';
  static override code = 'NODE_CALL_ERROR';
  /** The JSON-RPC error's code, when the node gave one. */
  readonly rpcCode: number | undefined;

  constructor(method: string, error: { code?: number; message?: string }) {
    super(`${method}: ${error.message ?? 'error'}`);
    this.rpcCode = error.code;
  }
}

/** A relay in front of the node answered with an HTTP 5xx: no answer from the node. */
export class NodeHttpError extends BaseError {
  override name = 'NodeHttpError';
  static override code = 'NODE_HTTP_ERROR';
  readonly status: number;

  constructor(method: string, status: number, body: string) {
    super(`${method}: HTTP ${status} ${body.slice(0, 200)}`);
    this.status = status;
  }
}

/** A transaction was mined with status 0. */
export class TransactionRevertedError extends BaseError {
  override name = 'TransactionRevertedError';
  static override code = 'TRANSACTION_REVERTED';

  constructor(hash: string) {
    super(`transaction ${hash} reverted`, { details: { hash } });
  }
}

/** No receipt came for a transaction within the time given. */
export class ReceiptTimeoutError extends BaseError {
  override name = 'ReceiptTimeoutError';
  static override code = 'RECEIPT_TIMEOUT';

  constructor(hash: string, timeoutMs: number) {
    super(`no receipt for ${hash} within ${timeoutMs} ms`, { details: { hash, timeoutMs } });
  }
}

/** A settler deployment that cannot go on: the URL is another chain, or a deployment made no contract (C42). */
export class DeploymentError extends BaseError {
  override name = 'DeploymentError';
  static override code = 'DEPLOYMENT_FAILED';
}
