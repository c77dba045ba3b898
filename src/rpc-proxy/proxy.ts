import type { Logger } from 'pino';
import type { Network } from '../chains/registry.ts';
import type { Config } from '../config/schema.ts';
import {
  InternalRpcError,
  InvalidRequestError,
  NetworkNotAllowedError,
  NodeAnsweredError,
  ParseError,
  RpcError,
  UpstreamError,
} from '../errors/rpc.ts';
import type { KeyCache, ResolvedKey } from '../keys/cache.ts';
import { errorObject, idKey, parseItem, type RpcCall, type RpcId, type RpcItem, resultObject } from './jsonrpc.ts';
import { callNativeMethod, nodeCallFromPool } from './native-methods.ts';
import type { MethodPolicy } from './policy.ts';
import type { UpstreamPools } from './pools.ts';
import { NoUpstreamError, UpstreamRpcError } from './upstream-pool.ts';

/** What goes back to the client: a status and a body (bytes from a node go through untouched). */
export interface RpcReply {
  status: number;
  /** null: nothing to answer (notifications only), sent as 204. */
  body: Buffer | string | null;
}

/** Marks a body that was not valid JSON. */
export const UNPARSABLE: unique symbol = Symbol('unparsable');

export interface RpcRequest {
  network: Network | RpcError;
  /** The API key as sent; `null` on the public endpoint (no key). */
  apiKey: string | undefined | null;
  parsed: unknown;
  raw: Buffer;
}

/** The caller of one request, known after authentication. */
export interface Caller {
  key: ResolvedKey | null;
  network: Network;
}

const json = (status: number, body: unknown): RpcReply => ({ status, body: JSON.stringify(body) });
const failure = (id: RpcId | undefined, err: RpcError): RpcReply => json(err.httpStatus, errorObject(id, err));

/** Turns an upstream failure into the JSON-RPC error the client sees (C22): never a URL. */
function upstreamFailure(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  if (err instanceof NoUpstreamError) {
    return new UpstreamError(err.maybeSent ? 'Upstream RPC error: the transaction may have been sent; check it by hash' : 'Upstream RPC error: no node could answer', {
      data: { network: err.network, maybeSent: err.maybeSent },
    });
  }
  if (err instanceof UpstreamRpcError) {
    // A node's own error, passed on as the node said it (C22: 200).
    return new NodeAnsweredError(err.code, err.message, { data: err.data });
  }
  return new InternalRpcError('Internal error');
}

/**
 * The JSON-RPC core (C22–C25): validates calls, authenticates the key, applies the method
 * policy, translates `nat_*` calls and forwards the rest to the network's upstream pool. A single
 * call is forwarded as the client's own bytes and the node's answer goes back as its bytes.
 */
export class RpcProxy {
  readonly #config: Config;
  readonly #keys: KeyCache;
  readonly #policy: MethodPolicy;
  readonly #pools: UpstreamPools;
  readonly #log: Logger;

  constructor(deps: { config: Config; keys: KeyCache; policy: MethodPolicy; pools: UpstreamPools; logger: Logger }) {
    this.#config = deps.config;
    this.#keys = deps.keys;
    this.#policy = deps.policy;
    this.#pools = deps.pools;
    this.#log = deps.logger;
  }

  async handle(req: RpcRequest): Promise<RpcReply> {
    if (req.parsed === UNPARSABLE) return failure(null, new ParseError('Parse error: the body is not valid JSON'));
    const isBatch = Array.isArray(req.parsed);
    const single = isBatch ? undefined : parseItem(req.parsed);
    const requestId = single ? (single.call ? single.call.id : single.id) : null;

    if (req.network instanceof RpcError) return failure(requestId, req.network);
    let key: ResolvedKey | null = null;
    if (req.apiKey !== null) {
      const auth = await this.#keys.authenticate(req.apiKey);
      if (auth instanceof RpcError) return failure(requestId, auth);
      key = auth;
      if (!key.networks.has(req.network.slug)) {
        return failure(
          requestId,
          new NetworkNotAllowedError(`API key not authorized for network ${req.network.slug}`, {
            data: { network: req.network.slug, allowed: [...key.networks] },
          }),
        );
      }
    }
    const caller: Caller = { key, network: req.network };

    if (single) {
      if (single.error) return failure(single.id, single.error);
      return this.#single(caller, single.call, req.raw);
    }
    return this.#batch(caller, req.parsed as unknown[]);
  }

  async #single(caller: Caller, call: RpcCall, raw: Buffer): Promise<RpcReply> {
    const refused = this.#policy.check(call.method, caller.network.native, caller.key?.tier ?? null);
    if (refused) return call.id === undefined ? { status: 204, body: null } : failure(call.id, refused);
    const pool = this.#pools.get(caller.network.slug);
    try {
      if (call.method.startsWith('nat_')) {
        const result = await callNativeMethod(call.method, call.params, this.#config.methods.native, nodeCallFromPool(pool));
        return call.id === undefined ? { status: 204, body: null } : json(200, resultObject(call.id, result));
      }
      const res = await pool.forward(raw, [call.method]);
      // C22: whatever the node answered in JSON-RPC form goes back unchanged, with 200.
      return call.id === undefined ? { status: 204, body: null } : { status: 200, body: res.body };
    } catch (err) {
      const e = upstreamFailure(err);
      if (!(err instanceof UpstreamRpcError) && !(err instanceof RpcError)) this.#logFailure(caller, [call.method], err);
      return call.id === undefined ? { status: 204, body: null } : failure(call.id, e);
    }
  }

  async #batch(caller: Caller, items: unknown[]): Promise<RpcReply> {
    if (items.length === 0) return failure(null, new InvalidRequestError('Invalid request: empty batch'));
    const max = this.#config.rpc.maxBatchSize;
    if (items.length > max) {
      return failure(null, new InvalidRequestError(`Invalid request: a batch holds at most ${max} calls`, { data: { maxBatchSize: max } }));
    }
    const parsed: RpcItem[] = items.map(parseItem);
    const answers: Array<unknown | undefined> = new Array(items.length);
    const forward: Array<{ index: number; call: RpcCall }> = [];
    const native: Array<{ index: number; call: RpcCall }> = [];
    const tier = caller.key?.tier ?? null;
    parsed.forEach((item, index) => {
      if (item.error) {
        answers[index] = errorObject(item.id, item.error);
        return;
      }
      const refused = this.#policy.check(item.call.method, caller.network.native, tier);
      if (refused) answers[index] = item.call.id === undefined ? undefined : errorObject(item.call.id, refused);
      else if (item.call.method.startsWith('nat_')) native.push({ index, call: item.call });
      else forward.push({ index, call: item.call });
    });

    const pool = this.#pools.get(caller.network.slug);
    let allFailedUpstream = forward.length > 0 && native.length === 0;
    await Promise.all([
      forward.length > 0 &&
        (async () => {
          try {
            const res = await pool.forward(
              JSON.stringify(forward.map((f) => f.call.raw)),
              forward.map((f) => f.call.method),
            );
            this.#matchBatch(forward, res.body, answers);
            allFailedUpstream = false;
          } catch (err) {
            const e = upstreamFailure(err);
            this.#logFailure(caller, forward.map((f) => f.call.method), err);
            for (const f of forward) if (f.call.id !== undefined) answers[f.index] = errorObject(f.call.id, e);
          }
        })(),
      ...native.map(async ({ index, call }) => {
        try {
          const result = await callNativeMethod(call.method, call.params, this.#config.methods.native, nodeCallFromPool(pool));
          if (call.id !== undefined) answers[index] = resultObject(call.id, result);
        } catch (err) {
          if (call.id !== undefined) answers[index] = errorObject(call.id, upstreamFailure(err));
        }
      }),
    ]);

    const out = answers.filter((a) => a !== undefined);
    if (out.length === 0) return { status: 204, body: null };
    return json(allFailedUpstream ? UpstreamError.httpStatus : 200, out);
  }

  /** Puts the node's answers to a forwarded batch in request order (positionally if they line up, else by id). */
  #matchBatch(forward: Array<{ index: number; call: RpcCall }>, body: Buffer, answers: Array<unknown | undefined>): void {
    let reply: unknown;
    try {
      reply = JSON.parse(body.toString('utf8'));
    } catch {
      reply = undefined;
    }
    const expecting = forward.filter((f) => f.call.id !== undefined);
    if (!Array.isArray(reply)) {
      // One error for the whole batch (some nodes refuse batches): every call gets it.
      const err =
        reply && typeof reply === 'object' && 'error' in reply
          ? (reply as { error: unknown }).error
          : new UpstreamError('Upstream RPC error: invalid batch answer').toJSON();
      for (const f of expecting) answers[f.index] = { jsonrpc: '2.0', id: f.call.id, error: err };
      return;
    }
    const inOrder =
      reply.length === expecting.length &&
      expecting.every((f, i) => idKey((reply as Array<{ id?: unknown }>)[i]?.id) === idKey(f.call.id));
    if (inOrder) {
      expecting.forEach((f, i) => {
        answers[f.index] = (reply as unknown[])[i];
      });
      return;
    }
    const byId = new Map<string, unknown[]>();
    for (const r of reply) {
      const k = idKey((r as { id?: unknown })?.id);
      const list = byId.get(k) ?? [];
      list.push(r);
      byId.set(k, list);
    }
    for (const f of expecting) {
      const hit = byId.get(idKey(f.call.id))?.shift();
      answers[f.index] = hit ?? errorObject(f.call.id, new UpstreamError('Upstream RPC error: no answer for this call'));
    }
  }

  #logFailure(caller: Caller, methods: string[], err: unknown): void {
    const attempts = err instanceof NoUpstreamError ? err.attempts : undefined;
    this.#log.warn({ network: caller.network.slug, methods: methods.slice(0, 5), attempts, error: (err as Error).name }, 'upstream call failed');
  }
}
