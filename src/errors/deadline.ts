// The error of something outside the process that did not answer within its time.
import { BaseError } from './base.ts';

/** Something outside the process (a node, the database, Redis, a consumer) did not answer within its time. */
export class DeadlineError extends BaseError {
  override name = 'DeadlineError';
  static override readonly code = 'TIMEOUT';
}
