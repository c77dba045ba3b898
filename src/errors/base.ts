/** The one base error: a short message, optional details for the caller, and the cause for logs. */
export class BaseError extends Error {
  override name = 'BaseError';
  readonly details: unknown;
  constructor(message: string, opts: { details?: unknown; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.details = opts.details;
  }
}
