/**
 * The one base error: a short message, optional details for the caller, and the cause for logs.
 * Every class thrown in src/ extends it and pins a static `code`: a JSON-RPC number on RPC errors
 * (errors/rpc.ts), an UPPER_SNAKE string elsewhere, so callers map errors by class code, never
 * by message or literal.
 */
export class BaseError extends Error {
  override name = 'BaseError';
  static code: string | number = 'INTERNAL_ERROR';
  readonly details: unknown;
  constructor(message: string, opts: { details?: unknown; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.details = opts.details;
  }
}
