import { BaseError } from './base.ts';

// What a node (or another outside source) answered that a background feature cannot use. Each
// pins the code its feature reports it with; the message names no upstream address.

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
