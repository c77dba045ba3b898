// JSON-RPC errors (C22): the pinned codes and the HTTP status each answers with.
import { BaseError } from './base.ts';
import { AnswerRoomError, AnswerTooLargeError, inWords, NoUpstreamError, UpstreamRpcError } from './upstream.ts';

/**
 * JSON-RPC errors with pinned codes (spec section 7) and the HTTP status each answers with (C22).
 */
export class RpcError extends BaseError {
  override name = 'RpcError';
  static override code: number = -32603;
  static httpStatus = 500;
  /** Machine-readable details (C22), sent as the error object's `data`. */
  constructor(message: string, opts: { details?: unknown; cause?: unknown } = {}) {
    super(message, opts);
  }
  get code(): number {
    return (this.constructor as typeof RpcError).code;
  }
  get httpStatus(): number {
    return (this.constructor as typeof RpcError).httpStatus;
  }
  toJSON(): { code: number; message: string; data?: unknown } {
    return { code: this.code, message: this.message, ...(this.details === undefined ? {} : { data: this.details }) };
  }
}

export class ParseError extends RpcError {
  static override code = -32700;
  static override httpStatus = 400;
}
export class InvalidRequestError extends RpcError {
  static override code = -32600;
  static override httpStatus = 400;
}
export class MethodNotSupportedError extends RpcError {
  static override code = -32601;
  static override httpStatus = 200;
}
export class InvalidParamsError extends RpcError {
  static override code = -32602;
  static override httpStatus = 200;
}
export class InvalidApiKeyError extends RpcError {
  static override code = -32001;
  static override httpStatus = 401;
}
export class ApiKeyRevokedError extends RpcError {
  static override code = -32002;
  static override httpStatus = 401;
}
export class NetworkNotAllowedError extends RpcError {
  static override code = -32003;
  static override httpStatus = 403;
}
export class UnknownNetworkError extends RpcError {
  static override code = -32004;
  static override httpStatus = 404;
}
export class RateLimitedError extends RpcError {
  static override code = -32005;
  static override httpStatus = 429;
}
export class QuotaExceededError extends RpcError {
  static override code = -32006;
  static override httpStatus = 429;
}
export class UpstreamError extends RpcError {
  static override code = -32000;
  static override httpStatus = 502;
}
/**
 * C49: the upstreams asked for a consensus read gave no answer a majority agrees on: -32000 with
 * HTTP 502 like other upstream failures, `data.reason` "no_consensus".
 */
export class NoConsensusError extends UpstreamError {
  static override code = -32000;
  static override httpStatus = 502;
  constructor(network: string, method: string) {
    super('Upstream RPC error: the nodes do not agree on the answer', { details: { reason: 'no_consensus', network, method } });
  }
}
/**
 * C49: a consensus read that fewer nodes than `consensus.nodes` agreed on, without contradiction:
 * the others failed, gave a provider error (throttled, missing state), were late, or none was left
 * to ask. -32000 with HTTP 502 like other upstream failures, `data.reason` "too_few_nodes",
 * `data.needed` (`consensus.nodes`) and `data.answered` (the nodes that gave an answer, all
 * agreeing). Not "no_consensus": no node contradicted another; asked again shortly, it may pass.
 */
export class TooFewNodesError extends UpstreamError {
  static override code = -32000;
  static override httpStatus = 502;
  constructor(network: string, method: string, needed: number, answered: number) {
    super(`Upstream RPC error: too few nodes answered to confirm the answer (${answered} of the ${needed} needed)`, {
      details: { reason: 'too_few_nodes', network, method, needed, answered },
    });
  }
}
/**
 * C60: an answer larger than `rpc.maxResponseBytes`, whether one node's answer or a whole batch's
 * answer to the client: -32000 with HTTP 502 like other calls no node could answer (C22), with
 * `data.reason` "response_too_large" and `data.maxBytes`. Asking again the same way gets the same;
 * the caller asks for less (a narrower block range, fewer calls per batch).
 */
export class ResponseTooLargeError extends UpstreamError {
  static override code = -32000;
  static override httpStatus = 502;
  constructor(maxBytes: number) {
    super(`Response too large: the answer is larger than ${maxBytes} bytes (rpc.maxResponseBytes); ask for less per call or per batch`, {
      details: { reason: 'response_too_large', maxBytes },
    });
  }
}
/** Seconds a call refused with {@link GatewayBusyError} is told to wait (`Retry-After`, `data.retryAfter`). */
export const GATEWAY_BUSY_RETRY_AFTER_S = 1;
/**
 * C60: the instance had no room for a large answer (answers being read from nodes and waiting for
 * clients together at `server.maxPendingBytes`): -32603 with HTTP 503, `Retry-After` and
 * `data.retryAfter`, like the gateway's other refusals of the moment (C48, C57). Asked again
 * shortly, the same call may pass.
 */
export class GatewayBusyError extends RpcError {
  static override code = -32603;
  static override httpStatus = 503;
  constructor() {
    super('Gateway busy: too many large answers in memory; retry shortly', { details: { reason: 'gateway_busy', retryAfter: GATEWAY_BUSY_RETRY_AFTER_S } });
  }
}
export class InternalRpcError extends RpcError {
  static override code = -32603;
  static override httpStatus = 500;
}
/**
 * C48: a key that only the database can tell about while the database is unreachable: -32603
 * with HTTP 503 and `data.retryAfter`, not a 500 (keys already in memory keep being served).
 */
export class StorageUnavailableRpcError extends RpcError {
  static override code = -32603;
  static override httpStatus = 503;
}
/**
 * C57: a call that arrived while the gateway is stopping: -32603 with HTTP 503, `Retry-After` and
 * `data.retryAfter`, answered before anything else runs (nothing is metered or counted).
 */
export class ShuttingDownRpcError extends RpcError {
  static override code = -32603;
  static override httpStatus = 503;
  constructor(retryAfter: number) {
    super('The gateway is shutting down; retry shortly', { details: { retryAfter } });
  }
}
/** Which of a key's lists refused a call (`data.reason`). */
export type AccessReason = 'origin' | 'ip' | 'method' | 'contract' | 'jwt';

/**
 * A call the key's own allowlists or JWT option refuse: -32003 with HTTP 403 (C22), like a
 * network the key does not cover, with `data.reason` naming the list. Refused before metering,
 * so it is counted nowhere (C10, C27).
 */
export class KeyAccessDeniedError extends NetworkNotAllowedError {
  static override code = -32003;
  static override httpStatus = 403;
  readonly reason: AccessReason;
  constructor(reason: AccessReason, message: string, details: Record<string, unknown> = {}) {
    super(message, { details: { reason, ...details } });
    this.reason = reason;
  }
}
/** An error a node answered (revert, bad params): passed on with the node's own code and HTTP 200 (C22). */
export class NodeAnsweredError extends RpcError {
  static override httpStatus = 200;
  readonly #nodeCode: number;
  constructor(code: number, message: string, opts: { details?: unknown } = {}) {
    super(message, opts);
    this.#nodeCode = code;
  }
  override get code(): number {
    return this.#nodeCode;
  }
}

/**
 * The one translation of any failure into the JSON-RPC error a client sees (C22): RPC errors as
 * they are, a node's own error with its code (HTTP 200), no answer from any node -32000 (502),
 * anything else -32603 without internals. Never a URL, a stack or SQL.
 */
export function toRpcError(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  if (err instanceof AnswerTooLargeError) return new ResponseTooLargeError(err.maxBytes);
  if (err instanceof AnswerRoomError) return new GatewayBusyError();
  if (err instanceof NoUpstreamError) {
    const message = err.maybeSent
      ? 'Upstream RPC error: the transaction may have been sent; check it by hash'
      : 'Upstream RPC error: no node could answer';
    // Why no node answered, node by node (its position in the network's list and the failure in
    // words: refused, DNS, timeout, HTTP status), never a URL.
    const reasons = err.attempts.slice(0, 16).map((a) => ({ upstream: a.upstream, reason: inWords(a.reason).slice(0, 160) }));
    return new UpstreamError(message, { details: { network: err.network, maybeSent: err.maybeSent, reasons }, cause: err });
  }
  if (err instanceof UpstreamRpcError) return new NodeAnsweredError(err.code, err.message, { details: err.details });
  return new InternalRpcError('Internal error', { cause: err });
}
