// REST errors (C7): the closed list of codes, their HTTP status and the error class.
import { BaseError } from './base.ts';

/**
 * The closed list of REST error codes and their HTTP status (C7).
 * One place maps a code to a status, so a route cannot pick a status of its own.
 */
export const HTTP_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  INVALID_CREDENTIALS: 401,
  TOKEN_EXPIRED: 401,
  TOKEN_REUSED: 401,
  PLAN_LIMIT: 403,
  PLAN_FEATURE: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  EMAIL_TAKEN: 409,
  INSUFFICIENT_LIQUIDITY: 409,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  HEADERS_TOO_LARGE: 431,
  FAUCET_COOLDOWN: 429,
  INTERNAL_ERROR: 500,
  UPSTREAM_ERROR: 502,
  SERVICE_UNAVAILABLE: 503,
  FAUCET_EMPTY: 503,
} as const;

export type ErrorCode = keyof typeof HTTP_STATUS;

/** A REST error rendered as `{success:false, error:{code, message, details}}` (C7). */
export class HttpError extends BaseError {
  override name = 'HttpError';
  /** Each instance carries the code it answers with (`code` below); the class's own is the catch-all. */
  static override code: ErrorCode = 'INTERNAL_ERROR';
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;
  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: unknown; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message, opts);
    this.code = code;
    this.headers = opts.headers ?? {};
  }
  get statusCode(): number {
    return HTTP_STATUS[this.code];
  }
}

export const notFound = (what = 'resource') => new HttpError('NOT_FOUND', `No such ${what}`);
export const unauthorized = (message = 'Missing or invalid access token') => new HttpError('UNAUTHORIZED', message);
export const badRequest = (message: string, details?: unknown) =>
  new HttpError('VALIDATION_ERROR', message, { details });

export interface ErrorEnvelope {
  success: false;
  error: { code: ErrorCode; message: string; details?: unknown };
}

export function envelope(err: HttpError): ErrorEnvelope {
  return {
    success: false,
    error: { code: err.code, message: err.message, ...(err.details === undefined ? {} : { details: err.details }) },
  };
}
