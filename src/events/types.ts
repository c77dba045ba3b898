// What the block follower hands on and to whom: the types its consumers (whale alerts, webhooks,
// intents) and its parts (the per-network follower, the block reader) share, in a file of their
// own so that none of them imports another in a circle.
import type { Db } from '../storage/db.ts';

/** A transaction of a followed block, as the consumers need it. */
export interface FollowedTransaction {
  hash: string;
  /** Lower-case 0x address. */
  from: string;
  /** Lower-case 0x address; null for a contract creation. */
  to: string | null;
  /** Wei. */
  value: bigint;
  /** Position in the block. */
  index: number;
  /** Calldata (0x...). */
  input: string;
}

export interface FollowedBlock {
  network: string;
  chainId: number;
  number: number;
  hash: string;
  /** The block's timestamp, seconds since the epoch. */
  timestamp: number;
  /** The hash of the block before it (lower-case 0x). */
  parentHash?: string;
  transactions: readonly FollowedTransaction[];
}

/** Someone who wants blocks: whale alerts, webhooks' address activity, intents. */
export interface BlockConsumer {
  /** For logs and metrics. */
  readonly name: string;
  /** The networks this consumer wants followed now; asked again every few seconds. */
  networks(): Iterable<string> | Promise<Iterable<string>>;
  /**
   * Called once per block of a wanted network, in order, inside the storage transaction that
   * moves the network's cursor past it (while catching up, one transaction holds a run of
   * blocks): what the consumer writes with `tx` commits with the cursor or not at all, so a
   * restart neither loses nor repeats a block. A throw rolls the block back; it is offered again
   * later, after a back-off.
   */
  onBlock(block: FollowedBlock, tx: Db): Promise<void>;
  /**
   * Called before the transaction that hands `blocks` on, outside it: what the consumer must read
   * from nodes or price sources for them is read here, so the storage transaction (on PGlite, the
   * only connection) never waits on the network. A throw counts as `onBlock`'s would.
   */
  prepare?(blocks: readonly FollowedBlock[]): Promise<void>;
  /** Called after the block's transaction committed (e.g. to wake a sender). */
  afterCommit?(block: FollowedBlock): void;
}
