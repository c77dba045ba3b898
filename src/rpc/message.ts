// The shapes one JSON-RPC message takes through the pipeline (rpc/pipeline.ts): what a transport
// hands in, what it gets back, and what the stages pass each other.
import type { Network } from '../chains/networks.ts';
import type { RpcError } from '../errors/rpc.ts';
import type { ResolvedKey } from '../keys/cache.ts';
import type { LogsPlan } from './dispatch/logs.ts';
import type { BlockRef } from '../methods/values.ts';
import { errorText, type RpcCall } from './jsonrpc.ts';
import type { Outcomes } from './outcome.ts';

/**
 * What a transport hands the pipeline: the bytes of one HTTP body or one WebSocket message, and
 * who sent them. Transports only frame; everything JSON-RPC happens here (docs/decisions.md C22-C24).
 */
export interface RpcInput {
  /** The network of the address, or the error for an unknown one (-32004). */
  network: Network | RpcError;
  /** The API key as sent; `null` on the public endpoint (no key, per-IP limit, C18). */
  apiKey: string | undefined | null;
  body: Buffer;
  /** The client's address (trusted proxies honoured). */
  ip: string;
  /** The `Origin` and `Authorization` headers as sent, for a key's allowlists and JWT option. */
  origin?: string | undefined;
  authorization?: string | undefined;
  /** For log lines that belong to this request. */
  requestId?: string;
  /** WebSocket only: serves eth_subscribe / eth_unsubscribe. Absent on HTTP, where they are -32601. */
  subscriptions?: SubscriptionDispatcher;
  /** The connection the answer goes back on (C57: whether it can still carry it); absent: always. */
  connection?: Connection;
  /** C46: `performance.now()` when the request arrived (default: when `handle` is called). */
  arrivedAt?: number;
}

export interface RpcOutput {
  /** The HTTP status of C22 (the HTTP transport sends it; a WebSocket ignores it). */
  status: number;
  /** null: nothing to answer (notifications only). Node bytes go through untouched. */
  body: Buffer | string | null;
  /** The C13 rate-limit headers, once the caller is known. */
  headers: Record<string, string> | undefined;
  /** The key cannot be used here (unknown, inactive, revoked, expired, network withdrawn): a WebSocket closes. */
  keyRefused: boolean;
  /** The key as checked for this request (a WebSocket keeps the latest). */
  key: ResolvedKey | null;
  /** C44: 'HIT' when the response cache gave the whole answer (a call, or a batch every call of which); otherwise sent as MISS. */
  cache?: 'HIT' | 'MISS';
  /** Runs once the answer is on its way (a new subscription starts delivering after its id was sent). */
  after?: () => void;
}

/** What a subscription dispatcher answers for one call. */
export interface DispatchAnswer {
  text: string | null;
  after?: () => void;
}

/** The connection a message came on, as the pipeline asks about it (an HTTP exchange, a WebSocket). */
export interface Connection {
  /**
   * C57: whether a call answered now counts: false during a stop on a connection that can no
   * longer carry the answer (cut at the drain limit, or closed meanwhile). The pipeline records a
   * call's usage once its answer is known, and not when this is false: nothing the stop left
   * unanswered is counted. Outside a stop a call counts whatever became of its client: the node
   * did the work (a transaction sent, a trace run).
   */
  answerable(): boolean;
}

/** The WebSocket's `eth_subscribe` / `eth_unsubscribe` dispatcher. */
export interface SubscriptionDispatcher {
  /** Takes a subscription slot now, before any await, or answers why not (limit per connection). */
  reserve(key: ResolvedKey): RpcError | null;
  /** Gives back a reserved slot that will not be used. */
  release(): void;
  /** Subscribes on a reserved slot (the slot is released if it fails). */
  subscribe(params: unknown, idText: string, key: ResolvedKey): Promise<DispatchAnswer>;
  unsubscribe(params: unknown): boolean | RpcError;
}

export const SUBSCRIBE = 'eth_subscribe';
/** C23: levels of arrays and objects a message may nest, its batch array and call object included. */
export const MAX_NESTING = 128;
export const UNSUBSCRIBE = 'eth_unsubscribe';

/** One call of a message, once parsed. */
export interface ParsedCall {
  index: number;
  /** The item's JSON text (the whole body for a single call). */
  text: string;
  /** The call's id exactly as written in `text` (C23), `null` when it has none: what its answer carries. */
  idText: string;
  call: RpcCall;
  /** C53: the call's (first) block parameter as judged; set by the judge stage. */
  block?: BlockRef;
  /** Answer text, once known. */
  answer?: string | null;
  /** An eth_getLogs wider than the network's maxLogsRange: the chunks it is split into. */
  logs?: LogsPlan;
  /** Compute units when not the method's weight (a split eth_getLogs: its weight x chunks). */
  cu?: number;
}

export interface Caller {
  key: ResolvedKey | null;
  network: Network;
  ip: string;
  requestId: string | undefined;
  /** The connection the answer goes back on (RpcInput.connection). */
  connection: Connection | undefined;
  /** What became of the message's calls, written down by each stage and recorded once at the end (outcome.ts). */
  outcomes: Outcomes;
}

export interface Refused {
  index: number;
  /** The id text to answer under. */
  id: string;
  err: RpcError;
}

// C44: what a single call answered by the cache adds to its output (a stored answer is a result).
export const HIT: Partial<RpcOutput> = { cache: 'HIT' };
export const MISS: Partial<RpcOutput> = { cache: 'MISS' };

/** The output of a message with nothing to answer (notifications only): 204, no body. */
export const noAnswer = (headers: Record<string, string> | undefined, key: ResolvedKey | null): RpcOutput => ({ status: 204, body: null, headers, keyRefused: false, key });
/** The output of a message answered with the gateway's error `err` under `id`, before any key or limits are known. */
export const errorOutput = (err: RpcError, id: string): RpcOutput => ({ status: err.httpStatus, body: errorText(id, err), headers: undefined, keyRefused: false, key: null });
