// Refusals of the product features. Each pins the REST code (C7) its route answers with, so a
// route maps the class to its answer by that code: `new HttpError(CooldownError.code, ...)`.
import { BaseError } from './base.ts';

/** Seconds until each C29 cooldown ends; 0 when it is not running. */
export interface CooldownWait {
  address: number;
  account: number;
}

/** Why a faucet grant could not be reserved: a cooldown is running (C29). */
export class CooldownError extends BaseError {
  override readonly name = 'CooldownError';
  static override readonly code = 'FAUCET_COOLDOWN';
  constructor(readonly wait: CooldownWait) {
    super('faucet cooldown');
  }
}

/** The destination wallet cannot take one more intent of this size (C41). */
export class LiquidityError extends BaseError {
  override readonly name = 'LiquidityError';
  static override readonly code = 'INSUFFICIENT_LIQUIDITY';
  constructor(
    /** Wei the wallet has left after what open intents reserve. */
    readonly availableWei: bigint,
    readonly neededWei: bigint,
  ) {
    super('insufficient solver liquidity');
  }
}

/** Which share of the solver's liquidity a new intent would go beyond (C51), by setting. */
export type ReserveCap = 'maxReservePerIntent' | 'maxReservePerAccount' | 'maxReserveAwaitingOpen';

/**
 * A new intent would reserve more of a destination wallet's liquidity than one of the C51 shares
 * allows: the wallet could cover it, but one intent, one account or the intents waiting for their
 * open may not hold that much of it.
 */
export class ReserveCapError extends BaseError {
  override readonly name = 'ReserveCapError';
  static override readonly code = 'INSUFFICIENT_LIQUIDITY';
  constructor(
    readonly cap: ReserveCap,
    /** The setting's value, in percent of the wallet's liquidity. */
    readonly percent: number,
    /** The share in wei: `percent` of the wallet's liquidity (its balance) now. */
    readonly limitWei: bigint,
    /** What the intents this share counts already reserve (0 for one intent). */
    readonly reservedWei: bigint,
    readonly neededWei: bigint,
  ) {
    super(`intent over intents.${cap}`);
  }
}

/** The account already has as many intents waiting for their open as it may (C41). */
export class AwaitingOpenError extends BaseError {
  override readonly name = 'AwaitingOpenError';
  static override readonly code = 'CONFLICT';
  constructor(readonly max: number) {
    super('too many intents awaiting their open');
  }
}

/** A webhook target refused by the address guard (C38): 400 on create; a failed attempt at send time. */
export class ForbiddenTargetError extends BaseError {
  override name = 'ForbiddenTargetError';
  static override readonly code = 'VALIDATION_ERROR';
}

/** A key's JWT public key that is not one (a private key, garbage): reported as a field problem. */
export class NotAPublicKeyError extends BaseError {
  override name = 'NotAPublicKeyError';
  static override readonly code = 'VALIDATION_ERROR';
}
