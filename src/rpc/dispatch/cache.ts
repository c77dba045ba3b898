// The response cache (C44): answers that cannot change, and identical concurrent reads shared.
import { answerMembersPlain, memberSpan, skipValue, withId } from '../../json/lossless.ts';
import { type BlockParam, type MethodFacts, methodFacts } from '../../methods/catalogue.ts';
import { blockNumberOf, isHash, readBlock } from '../../methods/values.ts';

/**
 * C44: answers that cannot change, served from memory, and identical concurrent reads sharing
 * one upstream call.
 *
 * What is stored, per network (the node's `result` text, never re-serialised):
 * - `eth_chainId`, `net_version`: always.
 * - By block hash: `eth_getBlockByHash`, `eth_getBlockTransactionCountByHash`,
 *   `eth_getTransactionByBlockHashAndIndex`, `eth_getUncleCountByBlockHash`,
 *   `eth_getUncleByBlockHashAndIndex`, `eth_getBlockReceipts` by hash: a hash fixes the content.
 * - `eth_getTransactionByHash`, `eth_getTransactionReceipt`: only once the block the answer names
 *   is at or below the safe block. Before that a pending transaction has no block and a reorg
 *   may move a mined one, so the same hash can answer differently.
 * - By block number (a hex quantity at or below the safe block): `eth_getBlockByNumber`,
 *   `eth_getBlockTransactionCountByNumber`, `eth_getTransactionByBlockNumberAndIndex`,
 *   `eth_getUncleCountByBlockNumber`, `eth_getUncleByBlockNumberAndIndex`, `eth_getBlockReceipts`.
 * - State at a fixed block (a safe number or an EIP-1898 `{blockHash}`): `eth_call`,
 *   `eth_getBalance`, `eth_getCode`, `eth_getStorageAt`, `eth_getTransactionCount`,
 *   `eth_getProof`. C44 forbids `eth_call` on a moving block; a block 64 deep no longer moves.
 * - `eth_getLogs` with a `blockHash`, or with `fromBlock` and `toBlock` both safe numbers.
 *
 * The safe block is `head - safeDepth`, or the node's `finalized` block when that is higher.
 * Never stored: tags (`latest`, `pending`, `safe`, `finalized`, and `earliest`, which some
 * clients resolve to the oldest block they still hold), errors, and `null` results (an unknown
 * block or transaction may appear later).
 *
 * Coalescing covers these reads and the other side-effect-free ones (the catalogue's `flight`
 * rule, src/methods/catalogue.ts, which holds every method's cache rule), whatever
 * their block: a call that joins a flight started a moment earlier gets that flight's answer, as
 * if it had arrived a round trip sooner (what eRPC does). Never coalesced: transactions, filters
 * and subscriptions, whose calls each mean something on their own.
 */

export interface CacheOptions {
  /** False: nothing is stored nor coalesced; every call goes to a node. */
  readonly enabled: boolean;
  /** Bound of one network's LRU, counted as key length + result text length (characters). */
  readonly maxBytesPerNetwork: number;
  /** Blocks below the head from which a block's answers no longer change. */
  readonly safeDepth: number;
}

/** What one lookup found out about a call; from `ResponseCache.plan`. */
export interface CachePlan {
  readonly slug: string;
  /** Network, method and params: the LRU key and the flight key. */
  readonly key: string;
  /** True: a success may be stored and looked up; false: the call is only coalesced. */
  readonly cacheable: boolean;
  /**
   * Transactions and receipts by hash: stored only when the result's `blockNumber` is at or
   * below this block (null: the safe block is unknown, nothing is stored). Undefined: no check.
   */
  readonly settledAt?: number | null;
}

/** One answer from `ResponseCache.serve`: the body with the caller's id, and whether memory held it. */
export interface CachedAnswer {
  body: string | Buffer;
  hit: boolean;
}

export interface NetworkCacheStats {
  /** Lookups of cacheable calls answered from memory. */
  hits: number;
  /** Lookups of cacheable calls that went to a node (or joined a flight). */
  misses: number;
  /** Calls that joined an identical call already in flight instead of calling a node. */
  coalesced: number;
  /** Answers stored. */
  stored: number;
  /** Entries pushed out by the byte bound. */
  evicted: number;
  /** Key + result characters held now; never above `maxBytesPerNetwork`. */
  bytes: number;
  entries: number;
}

/** A block parameter (read as nodes read it, C54): 'hash' (fixed content), a block number, or null (a tag, missing, malformed). */
function blockRef(v: unknown, hashAllowed: boolean): 'hash' | number | null {
  const ref = readBlock(v, hashAllowed);
  // EIP-1898 requireCanonical may turn a later call into an error once the block leaves the chain, so it is not stored.
  if (ref.kind === 'hash') return ref.requireCanonical ? null : 'hash';
  return ref.kind === 'number' ? blockNumberOf(ref) : null;
}

/** Whether the filter of an `eth_getLogs` call names a fixed set of blocks. */
function logsSettled(filter: unknown, safe: number | null): boolean {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) return false;
  const f = filter as { blockHash?: unknown; fromBlock?: unknown; toBlock?: unknown };
  if (f.blockHash !== undefined) return isHash(f.blockHash) && f.fromBlock === undefined && f.toBlock === undefined;
  if (safe === null) return false;
  const from = blockRef(f.fromBlock, false);
  const to = blockRef(f.toBlock, false);
  return typeof from === 'number' && typeof to === 'number' && to <= safe;
}

const WS_CODES = new Set([0x20, 0x0a, 0x0d, 0x09]);

function skipWs(t: string, i: number): number {
  while (i < t.length && WS_CODES.has(t.charCodeAt(i))) i++;
  return i;
}

/**
 * The raw text of the `result` of a successful JSON-RPC answer, in one pass over its members and
 * without re-serialising. Null for an error answer, a `null` result, or text that is not one
 * well-formed answer object (nothing doubtful is stored).
 */
export function successResult(answer: string): string | null {
  // C54: an answer whose members repeat or hide behind escapes or case is not one answer: never stored.
  if (!answerMembersPlain(answer)) return null;
  let i = skipWs(answer, 0);
  if (answer.charCodeAt(i) !== 0x7b) return null;
  i = skipWs(answer, i + 1);
  let result: string | null = null;
  while (answer.charCodeAt(i) === 0x22) {
    const keyEnd = skipValue(answer, i);
    const name = answer.slice(i + 1, keyEnd - 1);
    i = skipWs(answer, keyEnd);
    if (answer.charCodeAt(i) !== 0x3a) return null;
    const start = skipWs(answer, i + 1);
    const end = skipValue(answer, start);
    if (end <= start) return null;
    if (name === 'error') return null;
    if (name === 'result') result = answer.slice(start, end);
    i = skipWs(answer, end);
    if (answer.charCodeAt(i) !== 0x2c) break;
    i = skipWs(answer, i + 1);
  }
  // The object must close right here: a truncated or garbled body is not stored.
  if (answer.charCodeAt(i) !== 0x7d || skipWs(answer, i + 1) !== answer.length) return null;
  return result === 'null' ? null : result;
}

/** A success answer with the caller's id exactly as written (C23) and a stored result text. */
export function answerText(idText: string, resultText: string): string {
  return `{"jsonrpc":"2.0","id":${idText},"result":${resultText}}`;
}

/** One network's answers, least recently used first (a Map keeps insertion order). */
class ByteLru {
  readonly #map = new Map<string, string>();
  /** The key added or moved last (the end of the map's order), or undefined when not known. */
  #newest: string | undefined;
  bytes = 0;
  constructor(
    readonly maxBytes: number,
    /** An entry bigger than this is not stored, so one answer cannot empty the whole cache. */
    readonly maxEntryBytes: number,
  ) {}

  get size(): number {
    return this.#map.size;
  }

  get(key: string): string | undefined {
    const value = this.#map.get(key);
    // Moved to the end as the most recently used; the entry already there stays (a hot key asked
    // over and over would otherwise be deleted and added again on every hit).
    if (value !== undefined && key !== this.#newest) {
      this.#map.delete(key);
      this.#map.set(key, value);
      this.#newest = key;
    }
    return value;
  }

  /** Stores and returns how many entries were evicted, or -1 when the entry is too big. */
  set(key: string, value: string): number {
    const size = key.length + value.length;
    if (size > this.maxEntryBytes) return -1;
    const old = this.#map.get(key);
    if (old !== undefined) {
      this.#map.delete(key);
      this.bytes -= key.length + old.length;
    }
    let evicted = 0;
    while (this.bytes + size > this.maxBytes) {
      const oldest = this.#map.entries().next();
      if (oldest.done) break;
      const [k, v] = oldest.value;
      this.#map.delete(k);
      this.bytes -= k.length + v.length;
      evicted++;
    }
    this.#map.set(key, value);
    this.#newest = key;
    this.bytes += size;
    return evicted;
  }
}

interface Counters {
  hits: number;
  misses: number;
  coalesced: number;
  stored: number;
  evicted: number;
}

/** Per gateway: one byte-bounded LRU per network and the table of reads in flight (C44). */
export class ResponseCache {
  readonly #options: CacheOptions;
  readonly #lrus = new Map<string, ByteLru>();
  readonly #counters = new Map<string, Counters>();
  readonly #flights = new Map<string, Promise<unknown>>();
  /** Keys of the `always` methods, by method and network (bounded by the catalogue and the networks). */
  readonly #alwaysKeys = new Map<MethodFacts, Map<string, string>>();

  constructor(options: CacheOptions) {
    this.#options = options;
  }

  /** The highest block whose answers no longer change, or null when it is not known. */
  safeBlock(head: number | null, finalized: number | null = null): number | null {
    const byDepth = head === null ? null : head - this.#options.safeDepth;
    if (finalized === null) return byDepth;
    return byDepth === null ? finalized : Math.max(byDepth, finalized);
  }

  /**
   * How the gateway may answer one call: from memory and into it (`cacheable`), only by joining
   * an identical call in flight, or (null) neither. `head` is the network's best known head,
   * `finalized` the node's finalized block where it has one.
   */
  plan(network: { readonly slug: string }, method: string, params: unknown, head: number | null, finalized: number | null = null): CachePlan | null {
    if (!this.#options.enabled) return null;
    const facts = methodFacts(method);
    const rule = facts?.cache ?? null;
    if (rule === null) return null;
    if (rule === 'flight') return { slug: network.slug, key: keyText(network.slug, method, params), cacheable: false };
    if (rule === 'always') return { slug: network.slug, key: this.#alwaysKey(network.slug, facts as MethodFacts), cacheable: true };
    const key = keyText(network.slug, method, params);
    const list = Array.isArray(params) ? (params as unknown[]) : null;
    let cacheable = false;
    let settledAt: number | null | undefined;
    if (list !== null) {
      if (rule === 'hash' || rule === 'hashSettled') {
        cacheable = isHash(list[0]);
        if (rule === 'hashSettled') settledAt = this.safeBlock(head, finalized);
      } else if (rule === 'block') {
        const param = (facts as MethodFacts).blocks[0] as BlockParam;
        const ref = blockRef(list[param.at], param.hash);
        if (ref === 'hash') cacheable = true;
        else if (ref !== null) {
          const safe = this.safeBlock(head, finalized);
          cacheable = safe !== null && ref <= safe;
        }
      } else {
        cacheable = list.length === 1 && logsSettled(list[0], this.safeBlock(head, finalized));
      }
    }
    return settledAt === undefined ? { slug: network.slug, key, cacheable } : { slug: network.slug, key, cacheable, settledAt };
  }

  /**
   * The key of a method answered the same whatever its params, made once per network and method:
   * the same string every call, so the lookup hashes nothing new.
   */
  #alwaysKey(slug: string, facts: MethodFacts): string {
    let bySlug = this.#alwaysKeys.get(facts);
    if (!bySlug) {
      bySlug = new Map();
      this.#alwaysKeys.set(facts, bySlug);
    }
    let key = bySlug.get(slug);
    if (key === undefined) {
      key = `${slug} ${facts.name}`;
      bySlug.set(slug, key);
    }
    return key;
  }

  /** The stored result text for `key`, counted as a hit or a miss; marks it recently used. */
  get(network: { readonly slug: string }, key: string): string | null {
    return this.#lookup(network.slug, key);
  }

  #lookup(slug: string, key: string): string | null {
    const value = this.#lrus.get(slug)?.get(key);
    const c = this.#count(slug);
    if (value === undefined) {
      c.misses++;
      return null;
    }
    c.hits++;
    return value;
  }

  /**
   * Stores the result of one answer (`{"jsonrpc":"2.0","id":…,"result":…}`, as a node sent it
   * or a batch element) when the plan allows it and the answer is a non-null success.
   * Returns whether it was stored.
   */
  put(plan: CachePlan, answer: string | Buffer): boolean {
    if (!plan.cacheable) return false;
    const result = successResult(typeof answer === 'string' ? answer : answer.toString('utf8'));
    if (result === null) return false;
    if (plan.settledAt !== undefined && !minedAtOrBelow(result, plan.settledAt)) return false;
    let lru = this.#lrus.get(plan.slug);
    if (!lru) {
      const max = this.#options.maxBytesPerNetwork;
      lru = new ByteLru(max, Math.floor(max / 8));
      this.#lrus.set(plan.slug, lru);
    }
    const evicted = lru.set(plan.key, result);
    if (evicted < 0) return false;
    const c = this.#count(plan.slug);
    c.stored++;
    c.evicted += evicted;
    return true;
  }

  /**
   * Identical concurrent reads share one call: while a `fetch` for `key` is in flight, others
   * with the same key wait for it and get its value, or its failure. Nothing is kept after it
   * settles, failures included: the next call fetches again.
   */
  coalesce<T>(key: string, fetch: () => Promise<T>): Promise<T> {
    const inFlight = this.#flights.get(key);
    if (inFlight !== undefined) {
      this.#count(key.slice(0, key.indexOf(' '))).coalesced++;
      return inFlight as Promise<T>;
    }
    let flight: Promise<T>;
    try {
      flight = fetch();
    } catch (err) {
      flight = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    const done = (): void => {
      if (this.#flights.get(key) === flight) this.#flights.delete(key);
    };
    flight.then(done, done);
    this.#flights.set(key, flight);
    return flight;
  }

  /**
   * Answers one call with an id: from memory (hit), else through `fetch` (the node's answer body
   * for this call), shared with identical calls in flight and stored when the plan allows.
   * The body carries the caller's own id; a node error is passed on, under that id, unstored.
   * `fetch` failures (no node answered) reject, for every caller of the flight.
   */
  async serve(plan: CachePlan, idText: string, fetch: () => Promise<string | Buffer>): Promise<CachedAnswer> {
    const hit = this.hit(plan, idText);
    if (hit !== null) return { body: hit, hit: true };
    return { body: await this.shared(plan, idText, fetch), hit: false };
  }

  /**
   * The answer from memory under the caller's id, at once, or null (counted as a miss) when the
   * plan allows no stored answer or none is stored: what {@link serve} answers first, for callers
   * that answer a hit without awaiting anything.
   */
  hit(plan: CachePlan, idText: string): string | null {
    if (!plan.cacheable) return null;
    const hit = this.#lookup(plan.slug, plan.key);
    return hit === null ? null : answerText(idText, hit);
  }

  /**
   * The part of {@link serve} after memory had nothing: the answer body for this caller through
   * `fetch`, shared with identical calls in flight, stored when the plan allows.
   */
  async shared(plan: CachePlan, idText: string, fetch: () => Promise<string | Buffer>): Promise<string | Buffer> {
    let led = false;
    const body = await this.coalesce(plan.key, async () => {
      led = true;
      const b = await fetch();
      this.put(plan, b);
      return b;
    });
    // The flight's own caller sent its bytes to the node, whose answer carries its id already: it
    // gets the node's bytes as they came (C60: no text made of a large answer); the others, the
    // text under their own ids.
    return led ? body : withId(typeof body === 'string' ? body : body.toString('utf8'), idText);
  }

  /** Counts per network, for metrics. */
  stats(): Record<string, NetworkCacheStats> {
    const out: Record<string, NetworkCacheStats> = {};
    for (const slug of new Set([...this.#counters.keys(), ...this.#lrus.keys()])) {
      const lru = this.#lrus.get(slug);
      out[slug] = { ...this.#count(slug), bytes: lru?.bytes ?? 0, entries: lru?.size ?? 0 };
    }
    return out;
  }

  #count(slug: string): Counters {
    let c = this.#counters.get(slug);
    if (!c) {
      c = { hits: 0, misses: 0, coalesced: 0, stored: 0, evicted: 0 };
      this.#counters.set(slug, c);
    }
    return c;
  }
}

function keyText(slug: string, method: string, params: unknown): string {
  return `${slug} ${method} ${params === undefined || params === null ? '[]' : JSON.stringify(params)}`;
}

/** Whether a transaction or receipt result names a block at or below `safe`. */
function minedAtOrBelow(result: string, safe: number | null): boolean {
  if (safe === null) return false;
  const span = memberSpan(result, 'blockNumber');
  if (!span) return false;
  const v = result.slice(span[0], span[1]);
  if (v.charCodeAt(0) !== 0x22) return false;
  const n = blockNumberOf(readBlock(v.slice(1, -1), false));
  return n !== null && n <= safe;
}
