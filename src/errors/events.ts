// How a network's block follower (C33) stops a round early; caught by its own loop, never answered.
import { BaseError } from './base.ts';

/** The follower is stopping: the round ends without a retry. */
export class FollowerStoppedError extends BaseError {
  override name = 'FollowerStoppedError';
  static override readonly code = 'FOLLOWER_STOPPED';
  constructor() {
    super('the follower is stopping');
  }
}

/** The follower's lease on its network lapsed or its cursor moved elsewhere: another instance follows it now. */
export class LeaseLostError extends BaseError {
  override name = 'LeaseLostError';
  static override readonly code = 'LEASE_LOST';
  constructor() {
    super('the lease lapsed or the cursor moved elsewhere');
  }
}

/** A consumer's `onBlock` failed: the block's transaction rolled back. */
export class ConsumerFailedError extends BaseError {
  override name = 'ConsumerFailedError';
  static override readonly code = 'CONSUMER_FAILED';
  readonly consumer: string;
  readonly block: number;
  constructor(consumer: string, block: number, cause: unknown) {
    super(`consumer ${consumer} failed on block ${block}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.consumer = consumer;
    this.block = block;
  }
}
