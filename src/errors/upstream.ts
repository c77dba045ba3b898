// Errors of the upstream nodes (C22, C26): no node answered, a network down, a node's own error.
import { BaseError } from './base.ts';

/** One failed try on one upstream: its config index (never its URL) and why. */
export interface FailedAttempt {
  upstream: number;
  reason: string;
}

/**
 * No upstream of the network gave an answer; clients see -32000 with HTTP 502 (C22).
 * `maybeSent`: a state-changing call may have reached a node before it failed, so the client must
 * not assume it was not sent (C26).
 */
export class NoUpstreamError extends BaseError {
  override name = 'NoUpstreamError';
  static override readonly code = 'UPSTREAM_ERROR';
  readonly network: string;
  readonly attempts: readonly FailedAttempt[];
  readonly maybeSent: boolean;

  constructor(network: string, attempts: readonly FailedAttempt[], maybeSent = false) {
    super(
      maybeSent
        ? `upstream of network ${network} did not answer; the transaction may have been sent`
        : `no upstream of network ${network} could answer`,
      { details: { network, maybeSent } },
    );
    this.network = network;
    this.attempts = attempts;
    this.maybeSent = maybeSent;
  }
}

/**
 * C60: a node's answer was larger than `rpc.maxResponseBytes` and was not read further; no other
 * node would answer smaller, so the call ends here (-32000 "Response too large" for the client).
 */
export class AnswerTooLargeError extends NoUpstreamError {
  override name = 'AnswerTooLargeError';
  readonly maxBytes: number;

  constructor(network: string, attempts: readonly FailedAttempt[], maxBytes: number) {
    super(network, attempts);
    this.maxBytes = maxBytes;
  }
}

/**
 * C60: a node's answer was not read further because the instance had no room for it (answers
 * being read from nodes and waiting for clients together at `server.maxPendingBytes`). Not the
 * node's doing; asked again shortly, the same call may pass (503 with Retry-After for the client).
 */
export class AnswerRoomError extends NoUpstreamError {
  override name = 'AnswerRoomError';
}

/** A JSON-RPC error object a node answered (its `data` in `details`), for internal callers of the pools (faucet, follower). */
export class UpstreamRpcError extends BaseError {
  override name = 'UpstreamRpcError';
  static override readonly code = 'UPSTREAM_ERROR';
  readonly code: number;
  readonly upstream: number;

  constructor(code: number, message: string, details: unknown, upstream: number) {
    super(message, { details });
    this.code = code;
    this.upstream = upstream;
  }
}

/**
 * Every upstream of the network is known to be down (its latest call or probe failed) while the
 * probes run: a call fails at once (-32000) instead of waiting out the timeouts, and the first
 * probe that gets an answer brings the network back. `attempts` gives each upstream's last error.
 */
export class NetworkDownError extends NoUpstreamError {
  override name = 'NetworkDownError';
}

/**
 * A node answered a JSON-RPC error to one of a subscription hub's requests over its upstream
 * WebSocket (`eth_subscribe`, or a gap fill's reads). `error` is the node's error object as sent.
 */
export class UpstreamWsRpcError extends BaseError {
  override name = 'UpstreamWsRpcError';
  static override code = 'UPSTREAM_WS_RPC_ERROR';
  readonly error: { code?: unknown; message?: unknown; data?: unknown };

  constructor(error: { code?: unknown; message?: unknown; data?: unknown }) {
    super(typeof error.message === 'string' ? error.message : 'upstream error');
    this.error = error;
  }
}

/**
 * A subscription hub's request over its upstream WebSocket got no answer: the connection was not
 * open, was lost while waiting, or the node did not answer in time.
 */
export class UpstreamWsNoAnswerError extends BaseError {
  override name = 'UpstreamWsNoAnswerError';
  static override code = 'UPSTREAM_WS_NO_ANSWER';
}

/** Failure codes of a node attempt, in words. */
const CODE_WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the node',
  EPIPE: 'connection closed by the node',
  UND_ERR_SOCKET: 'connection closed by the node',
  UND_ERR_CLOSED: 'connection closed',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed for now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  CERT_HAS_EXPIRED: 'TLS certificate expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate is self-signed',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate cannot be verified',
};

/** A failure reason as an operator reads it: "connection refused (ECONNREFUSED)", "no answer within 5000 ms". */
export function inWords(reason: string): string {
  const words = CODE_WORDS[reason];
  if (words) return `${words} (${reason})`;
  let m = /^timeout after (\d+) ms$/.exec(reason);
  if (m) return `no answer within ${m[1]} ms`;
  m = /^HTTP (\d+)$/.exec(reason);
  if (m) return `the node answered HTTP ${m[1]}${m[1] === '429' ? ' (too many requests)' : ''}`;
  m = /^invalid body \(HTTP (\d+)\)( to eth_blockNumber)?$/.exec(reason);
  if (m) return m[2] ? `the answer to eth_blockNumber is not a block number (HTTP ${m[1]})` : `the answer is not JSON-RPC (HTTP ${m[1]})`;
  if (reason === 'request failed') return 'the request failed';
  return /^[A-Z][A-Z0-9_]+$/.test(reason) ? `request failed (${reason})` : reason;
}
