// The RPC pipeline: one JSON-RPC message from a transport through parsing, admission, policy,
// metering and dispatch to its answer.
import type { Logger } from 'pino';
import type { Network } from '../chains/networks.ts';
import type { MethodsConfig, RpcConfig } from '../config/schema.ts';
import { InvalidParamsError, InvalidRequestError, ParseError, ResponseTooLargeError, RpcError } from '../errors/rpc.ts';
import type { KeyCache, ResolvedKey } from '../keys/cache.ts';
import { admit, isUsable, Refusal } from '../keys/admission.ts';
import type { Meter, Metered, MeterOutcome } from '../metering/meter.ts';
import { ComputeUnits } from '../metering/weights.ts';
import type { UsageSink } from '../usage/sink.ts';
import type { AnalyticsRecorder } from '../analytics/recorder.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { errorText, messageIdText, parseItem, type RpcItem } from './jsonrpc.ts';
import { arrayElements, idText, nestsDeeperThan } from '../json/lossless.ts';
import type { ResponseCache } from './dispatch/cache.ts';
import { Dispatcher, type DispatcherSettings } from './dispatch/dispatcher.ts';
import { GET_LOGS } from './dispatch/logs.ts';
import { callText, judgeParams } from '../methods/judge.ts';
import { methodFacts } from '../methods/catalogue.ts';
import type { MethodPolicy } from './policy.ts';
import { OTHER_METHOD, type RpcCallMetrics, UNKNOWN_NETWORK } from '../ops/metrics.ts';
import type { TraceSpan, Tracing } from '../ops/tracing.ts';
import { type Caller, type ParsedCall, MAX_NESTING, noAnswer, errorOutput, type Refused, type RpcInput, type RpcOutput, SUBSCRIBE, type SubscriptionDispatcher, UNSUBSCRIBE } from './message.ts';
import { Outcomes, Settlement } from './outcome.ts';

export { type DispatchAnswer, MAX_NESTING, type RpcInput, type RpcOutput, type SubscriptionDispatcher } from './message.ts';

/** A message once read: its text, and its one call when it is not a batch. */
class Message {
  /** The id as the client wrote it, read on first use (see `id`). */
  #id: string | undefined;

  constructor(
    readonly text: string,
    /** The batch's elements as parsed; undefined for a single call. */
    readonly batch: unknown[] | undefined,
    readonly single: RpcItem | undefined,
    /** The method a refusal of the whole message is counted under (a batch: `other`). */
    readonly method: string,
  ) {}

  /**
   * The id to answer a refusal of the whole message under (`null` for a batch; C23), as the
   * client wrote it (an id of the wrong type is answered as null): a call's was read with its
   * member names; a refused one's is read from the text on first use.
   */
  id(): string {
    return (this.#id ??= messageIdText(this.single, this.text));
  }
}

/** The calls of a message that passed the method policy and the key's lists, and the subscription slots they hold. */
interface Judged {
  admitted: ParsedCall[];
  /** eth_subscribe slots taken before the first await, given back if the message is refused later. */
  reserved: number;
}

/** The network's name for the metrics, `unknown` for an address naming none. */
function slugOf(input: RpcInput): string {
  return input.network instanceof RpcError ? UNKNOWN_NETWORK : input.network.slug;
}

/** Whether any of the calls is an eth_getLogs (a loop: no closure per message). */
function hasLogs(items: ParsedCall[]): boolean {
  for (const item of items) if (item.call.method === GET_LOGS) return true;
  return false;
}

/** Gives back the subscription slots a message reserved and will not use. */
function release(judged: Judged, subs: SubscriptionDispatcher | undefined): void {
  for (; judged.reserved > 0; judged.reserved--) subs?.release();
}

/** The settings the pipeline reads: batch and answer sizes, compute units, and what dispatch reads. */
export interface PipelineSettings extends DispatcherSettings {
  rpc: DispatcherSettings['rpc'] & Pick<RpcConfig, 'maxBatchSize' | 'maxResponseBytes'>;
  methods: DispatcherSettings['methods'] & Pick<MethodsConfig, 'computeUnits'>;
}

/**
 * The JSON-RPC pipeline, one for every transport. `handle` runs the stages in order; each either
 * passes the message on or refuses it (the message whole, or calls of a batch one by one), and
 * writes down the outcome of what it refused in the message's Outcomes:
 *
 *   read (parse, nesting) -> admit (network, key, the key's origin/IP/JWT: keys/admission.ts)
 *   -> split (a batch into its calls) -> judge (method policy, C50/C54 parameters, the key's
 *   method and contract lists, subscription slots) -> cost (eth_getLogs plans) -> meter (the
 *   whole call or batch at once) -> dispatch (dispatch/dispatcher.ts) -> record usage (once the
 *   answer is known, C57: not for a WebSocket that can no longer carry it).
 *
 * When the message is answered its outcomes are recorded once (metrics, C46 analytics, log
 * lines: outcome.ts). A single call is forwarded as the client's own bytes and the node's answer
 * goes back as its bytes (C22). For a key in memory with in-process limits the path is
 * synchronous up to dispatch, and an answer from memory comes back without a promise (`handle`).
 */
export class RpcPipeline {
  readonly #settings: PipelineSettings;
  readonly #keys: KeyCache;
  readonly #policy: MethodPolicy;
  readonly #meter: Meter;
  readonly #cu: ComputeUnits;
  readonly #usage: UsageSink;
  readonly #settlement: Settlement;
  readonly #dispatcher: Dispatcher;
  /** C58: spans for the stages; undefined while tracing is off. */
  readonly #tracing: Tracing | undefined;

  constructor(deps: {
    settings: PipelineSettings;
    keys: KeyCache;
    policy: MethodPolicy;
    upstreams: Upstreams;
    logger: Logger;
    meter: Meter;
    usage: UsageSink;
    /** C44: answers that cannot change, and identical concurrent reads. */
    cache?: ResponseCache;
    /** Calls by network, method, outcome and error code. */
    metrics?: RpcCallMetrics;
    /** C46: latency, errors and refusals per key, network, method and hour. */
    analytics?: AnalyticsRecorder;
    /** C58: OpenTelemetry spans; absent while tracing is off. */
    tracing?: Tracing;
  }) {
    this.#settings = deps.settings;
    this.#keys = deps.keys;
    this.#policy = deps.policy;
    this.#meter = deps.meter;
    this.#cu = new ComputeUnits(deps.settings.methods.computeUnits);
    this.#usage = deps.usage;
    this.#settlement = new Settlement({ metrics: deps.metrics, analytics: deps.analytics, logger: deps.logger });
    this.#tracing = deps.tracing;
    this.#dispatcher = new Dispatcher({ settings: deps.settings, upstreams: deps.upstreams, cache: deps.cache, cu: this.#cu, tracing: deps.tracing });
  }

  /**
   * The message's answer: at once when nothing on its way needs waiting for (a key in memory,
   * limits in process, an answer from memory), else a promise of it. May throw; its outcomes are
   * recorded either way.
   */
  handle(input: RpcInput): RpcOutput | Promise<RpcOutput> {
    const outcomes = new Outcomes(slugOf(input), input.requestId);
    if (this.#settlement.timed) outcomes.at = input.arrivedAt ?? performance.now();
    let out: RpcOutput | Promise<RpcOutput>;
    try {
      out = this.#run(input, outcomes);
    } catch (err) {
      this.#settlement.settle(outcomes);
      throw err;
    }
    if (out instanceof Promise) return this.#settledWhenDone(out, outcomes);
    this.#settlement.settle(outcomes);
    return out;
  }

  // The continuations below are async functions that await, not `.then` chains: V8 awaits a
  // native promise without the closures and extra promises a chain makes per message.
  async #settledWhenDone(out: Promise<RpcOutput>, outcomes: Outcomes): Promise<RpcOutput> {
    try {
      return await out;
    } finally {
      this.#settlement.settle(outcomes);
    }
  }

  /**
   * The stages, in order (see the class comment); `outcomes` gets what each refused and what
   * dispatch answered. Each stage that may wait (a key looked up in storage, limits on Redis, a
   * node) goes on in a continuation only when it does.
   */
  #run(input: RpcInput, outcomes: Outcomes): RpcOutput | Promise<RpcOutput> {
    // Stage read.
    const msg = this.#read(input, outcomes);
    if (!(msg instanceof Message)) return this.#unmetered(msg, input);
    outcomes.single = msg.single !== undefined;
    this.#tracing?.annotate(msg.batch ? 'junction.batch_size' : 'rpc.method', msg.batch ? msg.batch.length : msg.method);

    // Stage admit: the network of the address, then the key.
    if (input.network instanceof RpcError) {
      outcomes.refused('admit', msg.method, input.network);
      return this.#unmetered(errorOutput(input.network, msg.id()), input);
    }
    const network = input.network;
    if (input.apiKey === null) return this.#admitted(input, msg, network, null, outcomes);
    const span = this.#tracing?.stage('admission');
    const admitted = admit(this.#keys, input.apiKey, network.slug, input, this.#meter);
    if (admitted instanceof Promise) return this.#admittedWhenLookedUp(admitted, span, input, msg, network, outcomes);
    return this.#afterAdmission(admitted, span, input, msg, network, outcomes);
  }

  async #admittedWhenLookedUp(admitted: Promise<ResolvedKey | Refusal>, span: TraceSpan | undefined, input: RpcInput, msg: Message, network: Network, outcomes: Outcomes): Promise<RpcOutput> {
    return this.#afterAdmission(await admitted, span, input, msg, network, outcomes);
  }

  #afterAdmission(admitted: ResolvedKey | Refusal, span: TraceSpan | undefined, input: RpcInput, msg: Message, network: Network, outcomes: Outcomes): RpcOutput | Promise<RpcOutput> {
    span?.end(admitted instanceof Refusal ? `refused: ${admitted.reason}` : undefined);
    if (admitted instanceof Refusal) return this.#refuseAdmission(admitted, network, input, msg, outcomes);
    return this.#admitted(input, msg, network, admitted, outcomes);
  }

  /** The stages after admission: split, judge, cost, then metering and dispatch. */
  #admitted(input: RpcInput, msg: Message, network: Network, key: ResolvedKey | null, outcomes: Outcomes): RpcOutput | Promise<RpcOutput> {
    outcomes.key = key;
    const caller: Caller = { key, network, ip: input.ip, requestId: input.requestId, connection: input.connection, outcomes };

    // Stage split.
    const refused: Refused[] = [];
    const items = this.#split(caller, msg, refused);
    if (!Array.isArray(items)) return items;

    // Stage judge.
    const subs = input.subscriptions;
    const judged = this.#judge(caller, msg, items, refused, subs);
    if (!('admitted' in judged)) return judged;

    // Stage cost: an eth_getLogs wider than the network's maxLogsRange is planned before it is metered.
    if (hasLogs(judged.admitted)) return this.#plannedThenMetered(caller, msg, judged, refused, subs);
    return this.#metered(caller, msg, judged, refused, subs);
  }

  async #plannedThenMetered(caller: Caller, msg: Message, judged: Judged, refused: Refused[], subs: SubscriptionDispatcher | undefined): Promise<RpcOutput> {
    const out = await this.#planLogs(caller, msg, judged.admitted, refused, () => release(judged, subs));
    if (out) return out;
    return this.#metered(caller, msg, judged, refused, subs);
  }

  /** Stage meter (C10, C23: the whole message at once; one that does not fit is refused whole), then usage and dispatch. */
  #metered(caller: Caller, msg: Message, judged: Judged, refused: Refused[], subs: SubscriptionDispatcher | undefined): RpcOutput | Promise<RpcOutput> {
    const { admitted } = judged;
    // Over a WebSocket eth_unsubscribe is not metered (it only gives back a slot).
    let cu = 0;
    let calls = 0;
    for (const item of admitted) {
      if (subs && item.call.method === UNSUBSCRIBE) continue;
      cu += item.cu ?? this.#cu.of(item.call.method);
      calls++;
    }
    const key = caller.key;
    const who = key ? { key } : { ip: caller.ip };
    const limits = this.#tracing?.stage('limits');
    // In process the limits answer at once; only a shared store (Redis) is awaited.
    const now = this.#meter.rpcNow(who, calls, cu);
    if (now) return this.#dispatch(caller, msg, judged, refused, subs, now, calls, limits);
    return this.#dispatchWhenMetered(this.#meter.rpc(who, calls, cu), caller, msg, judged, refused, subs, calls, limits);
  }

  async #dispatchWhenMetered(metered: Promise<MeterOutcome>, caller: Caller, msg: Message, judged: Judged, refused: Refused[], subs: SubscriptionDispatcher | undefined, calls: number, limits: TraceSpan | undefined): Promise<RpcOutput> {
    return this.#dispatch(caller, msg, judged, refused, subs, await metered, calls, limits);
  }

  /** Metered: refused whole, or the calls dispatched (stage dispatch), their usage recorded once answered. */
  #dispatch(caller: Caller, msg: Message, judged: Judged, refused: Refused[], subs: SubscriptionDispatcher | undefined, metered: MeterOutcome, calls: number, limits: TraceSpan | undefined): RpcOutput | Promise<RpcOutput> {
    limits?.end(metered.error ? `refused: ${metered.error.message}` : undefined);
    const { admitted } = judged;
    const { key, outcomes } = caller;
    const headers = metered.headers;
    if (metered.error) {
      release(judged, subs);
      for (const item of admitted) outcomes.refused('meter', item.call.method, metered.error);
      return { status: metered.error.httpStatus, body: errorText(msg.single ? msg.id() : 'null', metered.error), headers, keyRefused: false, key };
    }
    if (msg.single) {
      const item = admitted[0];
      if (!item) return noAnswer(headers, key);
      const out = this.#dispatcher.single(caller, item, headers, subs);
      return out instanceof Promise ? this.#answeredWhenDone(out, msg, caller, admitted, subs, calls) : this.#answered(out, msg, caller, admitted, subs, calls);
    }
    return this.#answeredWhenDone(this.#dispatcher.batch(caller, msg.batch?.length ?? 1, admitted, refused, headers, subs), msg, caller, admitted, subs, calls);
  }

  async #answeredWhenDone(out: Promise<RpcOutput>, msg: Message, caller: Caller, admitted: ParsedCall[], subs: SubscriptionDispatcher | undefined, calls: number): Promise<RpcOutput> {
    return this.#answered(await out, msg, caller, admitted, subs, calls);
  }

  /**
   * The calls answered: their usage is recorded now, with the answer known and about to be written
   * (C10), unless during a stop the connection they came on can no longer carry it (closed
   * meanwhile, or cut at the drain limit: C57, nothing unanswered is counted; `Connection`). Then
   * the answer's size is bounded.
   */
  #answered(out: RpcOutput, msg: Message, caller: Caller, admitted: ParsedCall[], subs: SubscriptionDispatcher | undefined, calls: number): RpcOutput {
    const key = caller.key;
    if (key !== null && calls > 0 && caller.connection?.answerable() !== false) this.#recordUsage(key, caller.network, admitted, subs !== undefined);
    return this.#bounded(out, msg, caller.outcomes);
  }

  /**
   * C60: an answer larger than `rpc.maxResponseBytes` (a batch's answers together, or one built
   * here from a node's parts) is not sent: the caller gets -32000 "Response too large" instead.
   */
  #bounded(out: RpcOutput, msg: Message, outcomes: Outcomes): RpcOutput {
    const body = out.body;
    if (body === null) return out;
    const max = this.#settings.rpc.maxResponseBytes;
    // A string's bytes are counted only when its length leaves it in doubt (UTF-8: 1 to 3 bytes per UTF-16 unit).
    if (body.length <= max / 3 || (typeof body === 'string' ? body.length <= max && Buffer.byteLength(body) <= max : body.length <= max)) return out;
    const err = new ResponseTooLargeError(max);
    // What was dispatched was answered with this error, not with what the nodes said.
    for (const o of outcomes.list) if (o.stage === 'dispatch') o.err = err;
    // C44: an error is no answer from memory, whatever its calls were.
    return { ...out, status: err.httpStatus, body: errorText(msg.single ? msg.id() : 'null', err), cache: 'MISS' };
  }

  /** Stage read: the body as JSON (C23: not too deeply nested), or the error answered for it. */
  #read(input: RpcInput, outcomes: Outcomes): Message | RpcOutput {
    const text = input.body.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      const err = new ParseError('Parse error: the body is not valid JSON');
      outcomes.refused('read', OTHER_METHOD, err);
      return errorOutput(err, 'null');
    }
    // C23: nesting past MAX_NESTING is refused like a parse error (the params' readers recurse).
    if (nestsDeeperThan(text, MAX_NESTING)) {
      const err = new InvalidRequestError(`Invalid request: JSON nested more than ${MAX_NESTING} levels deep`);
      outcomes.refused('read', OTHER_METHOD, err);
      return errorOutput(err, 'null');
    }
    const batch = Array.isArray(parsed) ? parsed : undefined;
    const single = batch ? undefined : parseItem(parsed, text);
    return new Message(text, batch, single, single?.call?.method ?? OTHER_METHOD);
  }

  /** Stage admit, refused: answered (and counted, C46a); a key that cannot be used here closes a WebSocket. */
  async #refuseAdmission(refusal: Refusal, network: Network, input: RpcInput, msg: Message, outcomes: Outcomes): Promise<RpcOutput> {
    const { error: err, key: known } = refusal;
    // C46a: a batch refused whole counts each of its calls, for the key's account when it has one
    // to count for: an inactive, revoked or expired key, or one refused for the network or its
    // allowlists (an inactive key's caller hears -32001 as for an unknown one; its owner sees the
    // calls under `key`); a key that does not exist, or a refused key lookup (C17), holds none.
    outcomes.key = refusal.key;
    outcomes.refused('admit', msg.method, err, msg.batch?.length ?? 1);
    if (refusal.reason === 'rate') return { ...errorOutput(err, msg.id()), headers: refusal.headers };
    if (refusal.reason === 'key') {
      // C13: a failed lookup's window as it counted this one; otherwise (a key refused from memory,
      // or one storage could not be asked about, with its Retry-After, C48) the window read.
      const out = { ...errorOutput(err, msg.id()), keyRefused: true, headers: refusal.headers };
      return refusal.headers?.['x-ratelimit-limit'] === undefined ? this.#unmetered(out, input) : out;
    }
    const caller: Caller = { key: known, network, ip: input.ip, requestId: input.requestId, connection: input.connection, outcomes };
    if (refusal.reason === 'network') return { ...(await this.#refusal(caller, msg.id(), err)), keyRefused: true };
    // The key's origin, IP and JWT rules refuse the whole message.
    return this.#refusal(caller, msg.id(), err);
  }

  /** C46a: a refused WebSocket upgrade, counted once for the key's account (the upgrade is no call: no metrics, its own log line). */
  countRefusal(refusal: Refusal, slug: string, method: string): void {
    this.#settlement.refusedFor(refusal.key, slug, method, refusal.error);
  }

  /** Stage split: the message's calls with their texts; a batch's malformed items refused one by one (C23). */
  #split(caller: Caller, msg: Message, refused: Refused[]): ParsedCall[] | Promise<RpcOutput> {
    const { single, text } = msg;
    if (single) {
      if (single.error) {
        caller.outcomes.refused('split', OTHER_METHOD, single.error);
        return this.#refusal(caller, msg.id(), single.error);
      }
      return [{ index: 0, text, idText: single.idText ?? idText(text), call: single.call }];
    }
    const list = msg.batch as unknown[];
    if (list.length === 0) {
      const err = new InvalidRequestError('Invalid request: empty batch');
      caller.outcomes.refused('split', OTHER_METHOD, err);
      return this.#refusal(caller, 'null', err);
    }
    const max = this.#settings.rpc.maxBatchSize;
    if (list.length > max) {
      const err = new InvalidRequestError(`Invalid request: a batch holds at most ${max} calls`, { details: { maxBatchSize: max } });
      caller.outcomes.refused('split', OTHER_METHOD, err, list.length);
      return this.#refusal(caller, 'null', err);
    }
    const elements = arrayElements(text);
    const items: ParsedCall[] = [];
    list.forEach((raw, index) => {
      const itemText = elements[index] ?? 'null';
      const item = parseItem(raw, itemText);
      if (item.error) {
        refused.push({ index, id: item.id !== null ? idText(itemText) : 'null', err: item.error });
        caller.outcomes.refused('split', OTHER_METHOD, item.error);
      } else items.push({ index, text: itemText, idText: item.idText ?? idText(itemText), call: item.call });
    });
    return items;
  }

  /**
   * Stage judge: the method policy, the C50 parameter guards and the key's method and contract
   * lists, call by call; subscription slots are taken here, before the first await (a batch of
   * 60 eth_subscribe cannot pass a limit of 50). A refused single call answers the message.
   */
  #judge(caller: Caller, msg: Message, items: ParsedCall[], refused: Refused[], subs: SubscriptionDispatcher | undefined): Judged | Promise<RpcOutput> | RpcOutput {
    const { key, network } = caller;
    const access = key?.access ?? null;
    const tier = key?.tier ?? null;
    // The calls admitted: `items` itself while every call so far was, a list of their own from
    // the first that is not (a single call's message makes no second list).
    let admitted: ParsedCall[] | undefined;
    let reserved = 0;
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as ParsedCall;
      const { call } = item;
      const notification = call.id === undefined;
      let err: RpcError | null;
      if (subs && (call.method === SUBSCRIBE || call.method === UNSUBSCRIBE) && key) {
        // A subscription without an id could never be told its id: nothing to do.
        if (call.method === SUBSCRIBE && notification) {
          admitted ??= items.slice(0, i);
          continue;
        }
        // The key's method and contract lists first, so a refused call takes no slot.
        // C50, C54: the params judged once, before anything else reads them.
        err = judge(item) ?? (access !== null ? access.checkCall(call) : null);
        if (!err && call.method === SUBSCRIBE) {
          err = subs.reserve(key);
          if (!err) reserved++;
        }
      } else {
        err = this.#policy.check(call.method, network.native, tier);
        // C50, C54: before the key's lists judge the params, so they judge what the node will run.
        if (err === null) err = judge(item);
        // The key's method and contract lists (C50 for contracts), item by item like the method policy.
        if (err === null && access !== null) err = access.checkCall(call);
      }
      if (err) {
        caller.outcomes.refused('judge', call.method, err);
        if (msg.single) return notification ? noAnswer(undefined, key) : this.#refusal(caller, msg.id(), err);
        if (!notification) refused.push({ index: item.index, id: item.idText, err });
        admitted ??= items.slice(0, i);
        continue;
      }
      admitted?.push(item);
    }
    return { admitted: admitted ?? items, reserved };
  }

  /**
   * Stage cost, for eth_getLogs (C26): each is planned (tags resolved, chunks counted) and
   * costs its weight per chunk; one too wide is refused (-32602) and leaves `admitted`. Answers
   * the message when that refusal is its single call.
   */
  async #planLogs(caller: Caller, msg: Message, admitted: ParsedCall[], refused: Refused[], release: () => void): Promise<RpcOutput | null> {
    for (let i = 0; i < admitted.length; i++) {
      const item = admitted[i] as ParsedCall;
      if (item.call.method !== GET_LOGS) continue;
      const err = await this.#dispatcher.planLogs(caller, item);
      if (!err) continue;
      caller.outcomes.refused('cost', GET_LOGS, err);
      if (msg.single) {
        release();
        return item.call.id === undefined ? noAnswer(undefined, caller.key) : this.#refusal(caller, msg.id(), err);
      }
      if (item.call.id !== undefined) refused.push({ index: item.index, id: item.idText, err });
      admitted.splice(i--, 1);
    }
    return null;
  }

  /** Stage usage: each metered call of a key, with its compute units (C10). */
  #recordUsage(key: ResolvedKey, network: Network, admitted: ParsedCall[], ws: boolean): void {
    for (const item of admitted) {
      const m = item.call.method;
      if (ws && m === UNSUBSCRIBE) continue;
      this.#usage.record({ userId: key.userId, keyId: key.keyId, network: network.slug, method: m, computeUnits: item.cu ?? this.#cu.of(m) });
    }
  }

  /**
   * C13: the four headers of an answer given before the caller is metered (a body that does not
   * parse, an unknown network, a body over the size limit, a key that cannot be used), read without
   * consuming anything: on the public endpoint the client address's window (C18); for a usable key
   * in memory, its limits; for any other key (missing, unknown, inactive, revoked, expired, or not
   * in memory, which is not looked up for this), the address's failed-key-lookup window (C17).
   */
  limitHeaders(apiKey: string | null | undefined, ip: string): Record<string, string> | Promise<Record<string, string>> {
    if (apiKey === null) return this.#peek({ ip });
    const known = this.#keys.peek(apiKey);
    if (known && isUsable(known)) return this.#peek({ key: known });
    return this.#meter.keyLookupHeaders(ip);
  }

  #peek(who: Metered): Record<string, string> | Promise<Record<string, string>> {
    const now = this.#meter.rpcNow(who, 0, 0);
    return now ? now.headers : this.#meter.rpc(who, 0, 0).then((o) => o.headers);
  }

  /** `out` with the caller's C13 headers (`limitHeaders`) under its own; a WebSocket message sends no headers and reads none. */
  #unmetered(out: RpcOutput, input: RpcInput): RpcOutput | Promise<RpcOutput> {
    if (input.subscriptions) return out;
    const read = this.limitHeaders(input.apiKey, input.ip);
    const merge = (h: Record<string, string>): RpcOutput => ({ ...out, headers: out.headers ? { ...h, ...out.headers } : h });
    return read instanceof Promise ? read.then(merge) : merge(read);
  }

  /** An answer that sends nothing upstream: it consumes nothing but still reports the limits (C13). */
  async #refusal(caller: Caller, id: string, err: RpcError): Promise<RpcOutput> {
    const headers = await this.#peek(caller.key ? { key: caller.key } : { ip: caller.ip });
    return { status: err.httpStatus, body: errorText(id, err), headers, keyRefused: false, key: caller.key };
  }
}

/**
 * C50, C53, C54: the call's params read once the way nodes read them and checked; when a value
 * was not in its canonical form the call's text is written anew from what was judged, so the node
 * runs exactly what the gateway (and a key's lists after it) judged. The -32602 when refused.
 */
function judge(item: ParsedCall): InvalidParamsError | null {
  const { call } = item;
  const judged = judgeParams(methodFacts(call.method), call.params, item.text);
  if (judged instanceof InvalidParamsError) return judged;
  item.block = judged.block;
  if (!judged.rewritten) return null;
  const text = callText(call.id === undefined ? null : item.idText, call.method, judged.params);
  if (text instanceof InvalidParamsError) return text;
  item.call = { id: call.id, method: call.method, params: judged.params };
  item.text = text;
  return null;
}
