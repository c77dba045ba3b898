// Filters (C26): a filter stays on the node that made it, under an id of the gateway's own.
import { randomBytes } from 'node:crypto';
import { InvalidParamsError, NodeAnsweredError, type RpcError, toRpcError } from '../../errors/rpc.ts';
import { answerIdIsNull, withId } from '../../json/lossless.ts';
import { methodFacts } from '../../methods/catalogue.ts';
import type { UpstreamPool } from '../../upstreams/http/pool.ts';
import { errorText, resultText } from '../jsonrpc.ts';

/** Whether a method works on a filter kept by one node (the catalogue's `filter`: new or use). */
export const isFilterMethod = (method: string): boolean => (methodFacts(method)?.filter ?? null) !== null;

/** A filter as the gateway keeps it: the node that made it and the node's own id for it. */
interface Pin {
  network: string;
  /** The account (or `public`) that made it: nobody else can read or remove it. */
  owner: string;
  /** Config index of the upstream that made it. */
  upstream: number;
  nodeId: string;
  usedAt: number;
}

export interface FilterPinsOptions {
  /** Milliseconds a filter lives without being polled (geth's own timeout: 5 minutes). */
  idleMs?: number;
  /** Filters kept at once, all networks together; past it the least recently used goes. */
  maxFilters?: number;
  /** Filters one account keeps at once; past it its least recently used goes. */
  maxPerOwner?: number;
}

/** What the dispatcher answers for one filter call: the answer text (null for a notification) and its HTTP status. */
export interface FilterAnswer {
  status: number;
  text: string | null;
}

/** One filter call as the pipeline hands it over. */
export interface FilterCall {
  method: string;
  params: unknown;
  /** The call's JSON text (the client's bytes). */
  text: string;
  /** The id as the client wrote it; null for a notification. */
  idText: string | null;
  reqId: string | undefined;
}

/** geth's answer for a filter id it does not hold; clients (viem, ethers) make a new filter on it. */
const notFound = () => new NodeAnsweredError(-32000, 'filter not found');
const FILTER_ID = /^0x[0-9a-fA-F]{1,64}$/;

/**
 * Filters stay on the node that made them (C26). A filter made by `eth_newFilter`,
 * `eth_newBlockFilter` or `eth_newPendingTransactionFilter` lives on one node only, so the client
 * gets a gateway id (16 random bytes, as geth's) pinned to that upstream and to the node's own
 * id; `eth_getFilterChanges`, `eth_getFilterLogs` and `eth_uninstallFilter` go to that node only
 * (no failover, no hedging, never cached: C44). An id the gateway does not hold, one of another
 * account, one idle for longer than `idleMs`, or one whose node cannot be reached is answered as
 * geth answers an unknown filter (`-32000 filter not found`; `false` for `eth_uninstallFilter`),
 * never with another node's filter. Gateway ids also keep two nodes that number their filters
 * alike (Nethermind counts 0x1, 0x2, ...) apart.
 */
export class FilterPins {
  readonly #pins = new Map<string, Pin>();
  readonly #perOwner = new Map<string, number>();
  readonly #idleMs: number;
  readonly #max: number;
  readonly #maxPerOwner: number;

  constructor(opts: FilterPinsOptions = {}) {
    this.#idleMs = opts.idleMs ?? 5 * 60_000;
    this.#max = opts.maxFilters ?? 100_000;
    this.#maxPerOwner = opts.maxPerOwner ?? 1_000;
  }

  /** Filters held now (tests and metrics). */
  get size(): number {
    return this.#pins.size;
  }

  /** Answers one filter call of `network` for `owner` (an account id, or `public`). */
  async handle(pool: UpstreamPool, owner: string, call: FilterCall): Promise<FilterAnswer> {
    this.#sweep(Date.now());
    try {
      return methodFacts(call.method)?.filter === 'new' ? await this.#create(pool, owner, call) : await this.#use(pool, owner, call);
    } catch (err) {
      const e = toRpcError(err);
      return { status: e.httpStatus, text: call.idText === null ? null : errorText(call.idText, e) };
    }
  }

  async #create(pool: UpstreamPool, owner: string, call: FilterCall): Promise<FilterAnswer> {
    // Any healthy node may make it (failover as for a read); the one that answered keeps it.
    const res = await pool.forward(call.text, [call.method], { expectAnswer: call.idText !== null, reqId: call.reqId });
    if (call.idText === null) return { status: 204, text: null };
    let nodeId: unknown;
    try {
      nodeId = (JSON.parse(res.body.toString('utf8')) as { result?: unknown }).result;
    } catch {
      nodeId = undefined;
    }
    // A node's error (bad filter params) goes back as the node wrote it (C22).
    if (typeof nodeId !== 'string') {
      // C23: a node that could not read the call answers id null; the answer goes back under the caller's.
      const text = res.body.toString('utf8');
      return { status: 200, text: call.idText !== 'null' && answerIdIsNull(text) ? withId(text, call.idText) : text };
    }
    const id = `0x${randomBytes(16).toString('hex')}`;
    this.#add(id, { network: pool.network, owner, upstream: res.upstream, nodeId, usedAt: Date.now() });
    return { status: 200, text: resultText(call.idText, id) };
  }

  async #use(pool: UpstreamPool, owner: string, call: FilterCall): Promise<FilterAnswer> {
    const id = Array.isArray(call.params) ? (call.params[0] as unknown) : undefined;
    if (!Array.isArray(call.params) || call.params.length !== 1 || typeof id !== 'string' || !FILTER_ID.test(id)) {
      const err = new InvalidParamsError(`Invalid params: ${call.method} takes [filterId], the id eth_new*Filter answered`);
      return this.#answer(call, err);
    }
    const uninstall = call.method === 'eth_uninstallFilter';
    const key = id.toLowerCase();
    const pin = this.#pins.get(key);
    if (!pin || pin.network !== pool.network || pin.owner !== owner) {
      // geth: an unknown filter cannot be removed (false), nor read (filter not found).
      return uninstall ? this.#answer(call, false) : this.#answer(call, notFound());
    }
    const idText = call.idText ?? '1';
    const body = `{"jsonrpc":"2.0","id":${idText},"method":"${call.method}","params":[${JSON.stringify(pin.nodeId)}]}`;
    let answer: string;
    try {
      answer = (await pool.forwardTo(pin.upstream, body, [call.method], { reqId: call.reqId })).body.toString('utf8');
    } catch {
      // The node that holds it cannot be reached: the filter is gone for the client, who makes a
      // new one (on a node that answers). Another node's filters are never tried.
      this.#delete(key);
      return uninstall ? this.#answer(call, true) : this.#answer(call, notFound());
    }
    if (uninstall || /filter not found/i.test(answer.slice(0, 512))) this.#delete(key);
    else this.#touch(key, pin);
    return { status: 200, text: call.idText === null ? null : answer };
  }

  #answer(call: FilterCall, outcome: RpcError | boolean): FilterAnswer {
    if (call.idText === null) return { status: 204, text: null };
    if (typeof outcome === 'boolean') return { status: 200, text: resultText(call.idText, outcome) };
    return { status: outcome.httpStatus, text: errorText(call.idText, outcome) };
  }

  #add(id: string, pin: Pin): void {
    const held = this.#perOwner.get(pin.owner) ?? 0;
    if (held >= this.#maxPerOwner) {
      // The account's least recently used filter makes room (Map order is least recently used first).
      for (const [k, p] of this.#pins) {
        if (p.owner === pin.owner) {
          this.#delete(k);
          break;
        }
      }
    }
    if (this.#pins.size >= this.#max) {
      const oldest = this.#pins.keys().next().value;
      if (oldest !== undefined) this.#delete(oldest);
    }
    this.#pins.set(id, pin);
    this.#perOwner.set(pin.owner, (this.#perOwner.get(pin.owner) ?? 0) + 1);
  }

  #touch(key: string, pin: Pin): void {
    pin.usedAt = Date.now();
    this.#pins.delete(key);
    this.#pins.set(key, pin);
  }

  #delete(key: string): void {
    const pin = this.#pins.get(key);
    if (!pin) return;
    this.#pins.delete(key);
    const left = (this.#perOwner.get(pin.owner) ?? 1) - 1;
    if (left > 0) this.#perOwner.set(pin.owner, left);
    else this.#perOwner.delete(pin.owner);
  }

  /** Forgets filters idle for longer than `idleMs` (the oldest come first in the map). */
  #sweep(now: number): void {
    for (const [k, p] of this.#pins) {
      if (now - p.usedAt <= this.#idleMs) break;
      this.#delete(k);
    }
  }
}
