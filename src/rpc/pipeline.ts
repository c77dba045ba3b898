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
import { errorText, parseItem, type RpcCall, type RpcItem, resultText } from './jsonrpc.ts';
import { arrayElements, idSpan, idText, withId } from './lossless.ts';
import { callNativeMethod, nodeCallFromPool } from './dispatch/native.ts';
import type { MethodPolicy } from './policy.ts';
import type { Meter } from '../metering/meter.ts';
import { ComputeUnits } from '../metering/weights.ts';
import type { UsageSink } from '../usage/sink.ts';
import type { UpstreamPools } from '../upstreams/upstreams.ts';
import { NoUpstreamError, UpstreamRpcError } from '../upstreams/pool.ts';

/** What goes back to the client: a status and a body (bytes from a node go through untouched). */
export interface RpcReply {
  status: number;
  /** null: nothing to answer (notifications only), sent as 204. */
  body: Buffer | string | null;
  /** Rate-limit headers (C13), once the caller is known. */
  headers?: Record<string, string>;
}

/** Marks a body that was not valid JSON. */
export const UNPARSABLE: unique symbol = Symbol('unparsable');

export interface RpcRequest {
  network: Network | RpcError;
  /** The API key as sent; `null` on the public endpoint (no key). */
  apiKey: string | undefined | null;
  parsed: unknown;
  raw: Buffer;
  /** The client's address (trusted proxies honoured): the public endpoint's limit key (C18). */
  ip: string;
}

/** The caller of one request, known after authentication. */
export interface Caller {
  key: ResolvedKey | null;
  network: Network;
  ip: string;
}

const failure = (idText: string, err: RpcError): RpcReply => ({ status: err.httpStatus, body: errorText(idText, err) });
const NOTHING = (): RpcReply => ({ status: 204, body: null });

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
  readonly #meter: Meter;
  readonly #cu: ComputeUnits;
  readonly #usage: UsageSink;

  constructor(deps: {
    config: Config;
    keys: KeyCache;
    policy: MethodPolicy;
    pools: UpstreamPools;
    logger: Logger;
    meter: Meter;
    usage: UsageSink;
  }) {
    this.#config = deps.config;
    this.#keys = deps.keys;
    this.#policy = deps.policy;
    this.#pools = deps.pools;
    this.#log = deps.logger;
    this.#meter = deps.meter;
    this.#cu = new ComputeUnits(deps.config);
    this.#usage = deps.usage;
  }

  async handle(req: RpcRequest): Promise<RpcReply> {
    if (req.parsed === UNPARSABLE) return failure('null', new ParseError('Parse error: the body is not valid JSON'));
    const isBatch = Array.isArray(req.parsed);
    const single = isBatch ? undefined : parseItem(req.parsed);
    // The id as the client wrote it (an id of the wrong type is answered as null); read from the
    // text only when the gateway writes the answer itself: a forwarded call needs none of it.
    let idCache: string | undefined;
    const requestId = () => (idCache ??= single && (single.call || single.id !== null) ? idText(req.raw.toString('utf8')) : 'null');

    if (req.network instanceof RpcError) return failure(requestId(), req.network);
    let key: ResolvedKey | null = null;
    if (req.apiKey !== null) {
      const auth = await this.#keys.authenticate(req.apiKey);
      if (auth instanceof RpcError) return failure(requestId(), auth);
      key = auth;
    }
    const caller: Caller = { key, network: req.network, ip: req.ip };
    const headers: Record<string, string> = {};
    let reply: RpcReply;
    if (key && !key.networks.has(req.network.slug)) {
      const err = new NetworkNotAllowedError(`API key not authorized for network ${req.network.slug}`, {
        data: { network: req.network.slug, allowed: [...key.networks] },
      });
      reply = await this.#refusal(caller, requestId(), err, headers);
    } else if (!single) {
      reply = await this.#batch(caller, req.parsed as unknown[], req.raw.toString('utf8'), headers);
    } else if (single.error) {
      reply = await this.#refusal(caller, requestId(), single.error, headers);
    } else {
      reply = await this.#single(caller, single.call, req.raw, requestId, headers);
    }
    reply.headers = headers;
    return reply;
  }

  /**
   * Meters the calls about to be sent (C10–C13): each counts one request and its compute units.
   * Refused: the error reply (429, Retry-After). Admitted: null, the calls recorded as usage.
   */
  async #admit(caller: Caller, calls: readonly RpcCall[], idText: string | (() => string), headers: Record<string, string>): Promise<RpcReply | null> {
    let cu = 0;
    for (const c of calls) cu += this.#cu.of(c.method);
    const who = caller.key ? { key: caller.key } : { ip: caller.ip };
    const outcome = await this.#meter.rpc(who, calls.length, cu);
    Object.assign(headers, outcome.headers);
    if (outcome.error) return failure(typeof idText === 'function' ? idText() : idText, outcome.error);
    const key = caller.key;
    if (key) {
      for (const c of calls) {
        this.#usage.record({ userId: key.userId, keyId: key.keyId, network: caller.network.slug, method: c.method, computeUnits: this.#cu.of(c.method) });
      }
    }
    return null;
  }

  /** An answer that sends nothing upstream: it consumes nothing but still reports the limits (C13). */
  async #refusal(caller: Caller, idText: string, err: RpcError, headers: Record<string, string>): Promise<RpcReply> {
    await this.#admit(caller, [], idText, headers);
    return failure(idText, err);
  }

  async #single(caller: Caller, call: RpcCall, raw: Buffer, id: () => string, headers: Record<string, string>): Promise<RpcReply> {
    const notification = call.id === undefined;
    const refused = this.#policy.check(call.method, caller.network.native, caller.key?.tier ?? null);
    if (refused) return notification ? NOTHING() : this.#refusal(caller, id(), refused, headers);
    const limited = await this.#admit(caller, [call], id, headers);
    if (limited) return notification ? NOTHING() : limited;
    const pool = this.#pools.get(caller.network.slug);
    try {
      if (call.method.startsWith('nat_')) {
        const result = await callNativeMethod(call.method, call.params, this.#config.methods.native, nodeCallFromPool(pool));
        return notification ? NOTHING() : { status: 200, body: resultText(id(), result) };
      }
      // The client's bytes go to the node and the node's bytes come back (C22: 200, unchanged).
      const res = await pool.forward(raw, [call.method], { expectAnswer: !notification });
      return notification ? NOTHING() : { status: 200, body: res.body };
    } catch (err) {
      if (!(err instanceof UpstreamRpcError) && !(err instanceof RpcError)) this.#logFailure(caller, [call.method], err);
      return notification ? NOTHING() : failure(id(), upstreamFailure(err));
    }
  }

  async #batch(caller: Caller, items: unknown[], text: string, headers: Record<string, string>): Promise<RpcReply> {
    if (items.length === 0) return this.#refusal(caller, 'null', new InvalidRequestError('Invalid request: empty batch'), headers);
    const max = this.#config.rpc.maxBatchSize;
    if (items.length > max) {
      const err = new InvalidRequestError(`Invalid request: a batch holds at most ${max} calls`, { data: { maxBatchSize: max } });
      return this.#refusal(caller, 'null', err, headers);
    }
    const elements = arrayElements(text);
    const answers: Array<string | undefined> = new Array(items.length);
    const ids: string[] = new Array(items.length);
    const forward: Array<{ index: number; call: RpcCall }> = [];
    const native: Array<{ index: number; call: RpcCall }> = [];
    const tier = caller.key?.tier ?? null;
    items.forEach((raw, index) => {
      const item: RpcItem = parseItem(raw);
      const id = item.call || item.id !== null ? idText(elements[index] ?? '') : 'null';
      ids[index] = id;
      if (item.error) {
        answers[index] = errorText(id, item.error);
        return;
      }
      const refused = this.#policy.check(item.call.method, caller.network.native, tier);
      if (refused) answers[index] = item.call.id === undefined ? undefined : errorText(id, refused);
      else if (item.call.method.startsWith('nat_')) native.push({ index, call: item.call });
      else forward.push({ index, call: item.call });
    });

    // C23: a batch that does not fit the remaining rate or quota is refused whole, with one error.
    const limited = await this.#admit(caller, [...forward, ...native].map((x) => x.call), 'null', headers);
    if (limited) return limited;
    const pool = this.#pools.get(caller.network.slug);
    let allFailedUpstream = forward.length > 0 && native.length === 0;
    await Promise.all([
      forward.length > 0 &&
        (async () => {
          // Each call goes out under its position as id, so answers map back exactly even when
          // the client reused an id or the node reorders; the client's own id is put back after.
          const body = `[${forward.map((f) => (f.call.id === undefined ? elements[f.index] : withId(elements[f.index] as string, String(f.index)))).join(',')}]`;
          const expectAnswer = forward.some((f) => f.call.id !== undefined);
          try {
            const res = await pool.forward(body, forward.map((f) => f.call.method), { expectAnswer });
            if (expectAnswer) this.#matchBatch(forward, res.body, ids, answers);
            allFailedUpstream = false;
          } catch (err) {
            const e = upstreamFailure(err);
            this.#logFailure(caller, forward.map((f) => f.call.method), err);
            for (const f of forward) if (f.call.id !== undefined) answers[f.index] = errorText(ids[f.index] as string, e);
          }
        })(),
      ...native.map(async ({ index, call }) => {
        try {
          const result = await callNativeMethod(call.method, call.params, this.#config.methods.native, nodeCallFromPool(pool));
          if (call.id !== undefined) answers[index] = resultText(ids[index] as string, result);
        } catch (err) {
          if (call.id !== undefined) answers[index] = errorText(ids[index] as string, upstreamFailure(err));
        }
      }),
    ]);

    const out = answers.filter((a) => a !== undefined);
    if (out.length === 0) return NOTHING();
    return { status: allFailedUpstream ? UpstreamError.httpStatus : 200, body: `[${out.join(',')}]` };
  }

  /** Puts the node's answers (ids = positions) back in request order under the client's ids, bytes otherwise untouched. */
  #matchBatch(forward: Array<{ index: number; call: RpcCall }>, body: Buffer, ids: string[], answers: Array<string | undefined>): void {
    const text = body.toString('utf8');
    const expected = new Set(forward.filter((f) => f.call.id !== undefined).map((f) => f.index));
    const trimmed = text.trimStart();
    if (trimmed.startsWith('[')) {
      for (const el of arrayElements(trimmed)) {
        const span = idSpan(el);
        const index = span ? Number(el.slice(span[0], span[1])) : Number.NaN;
        if (!expected.has(index)) continue;
        expected.delete(index);
        answers[index] = withId(el, ids[index] as string);
      }
    } else {
      // One error for the whole batch (some nodes refuse batches): every call gets it.
      let nodeError: unknown;
      try {
        nodeError = (JSON.parse(text) as { error?: unknown }).error;
      } catch {}
      const err = nodeError && typeof nodeError === 'object' ? JSON.stringify(nodeError) : JSON.stringify(new UpstreamError('Upstream RPC error: invalid batch answer').toJSON());
      for (const index of expected) answers[index] = `{"jsonrpc":"2.0","id":${ids[index]},"error":${err}}`;
      return;
    }
    for (const index of expected) answers[index] = errorText(ids[index] as string, new UpstreamError('Upstream RPC error: no answer for this call'));
  }

  #logFailure(caller: Caller, methods: string[], err: unknown): void {
    const attempts = err instanceof NoUpstreamError ? err.attempts : undefined;
    this.#log.warn({ network: caller.network.slug, methods: methods.slice(0, 5), attempts, error: (err as Error).name }, 'upstream call failed');
  }
}
