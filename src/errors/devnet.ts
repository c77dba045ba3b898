// The error of a local devnet that could not start or answer.
import { BaseError } from './base.ts';

/** The local devnet could not start or answer: anvil missing or exited, a deployment that failed, contracts not compiled. */
export class DevnetError extends BaseError {
  override name = 'DevnetError';
  static override readonly code = 'DEVNET_ERROR';
}
