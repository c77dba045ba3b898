// C34: USD prices of each network's native coin and of configured tokens, from the price source
// in config (a Chainlink-style feed read over eth_call, an HTTP JSON answer, or a fixed number).
//
// A price is either one a source gave, no older than `prices.maxAgeSeconds`, or null: never a
// guess. Each source is read at most once per `prices.cacheSeconds` (asks in the meantime share the
// reading, and concurrent asks share one read). A failed read gives null, unless the last good
// reading of that source is still within maxAgeSeconds: that one is still a real, fresh-enough
// price. How old a reading is counts from the source's own time (a feed's `updatedAt`) where it
// has one, else from when it was read.
import type { Logger } from 'pino';
import type { Hex } from 'viem';
import { decodeFunctionResult, encodeFunctionData } from 'viem/utils';
import type { NetworkConfig, PriceSourceConfig, PricesConfig } from '../config/schema.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { readJsonPrice } from './http-source.ts';
import { PriceSourceError } from '../errors/node.ts';
import { type Clock, systemClock } from '../time/clock.ts';

export interface PricesOptions {
  /** C34: the price settings, and the networks whose price sources are read. */
  settings: { prices: PricesConfig; networks: readonly NetworkConfig[] };
  upstreams: Upstreams;
  logger: Logger;
  /** The clock in ms, for tests of staleness; Date.now by default. */
  now?: Clock;
}

/** The part of Chainlink's AggregatorV3Interface a price needs. */
export const AGGREGATOR_V3_ABI = [
  { type: 'function', name: 'decimals', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'uint8' }] },
  {
    type: 'function',
    name: 'latestRoundData',
    stateMutability: 'view',
    inputs: [],
    outputs: [
      { name: 'roundId', type: 'uint80' },
      { name: 'answer', type: 'int256' },
      { name: 'startedAt', type: 'uint256' },
      { name: 'updatedAt', type: 'uint256' },
      { name: 'answeredInRound', type: 'uint80' },
    ],
  },
] as const;

/** Seconds a failed read is remembered before the source is tried again (at most cacheSeconds). */
const FAILURE_RETRY_SECONDS = 10;

/** One read of a source: the price and its time (the source's own, else when it was read), in ms. */
interface Reading {
  usd: number;
  at: number;
}

interface Entry {
  /** When the source was last read (successfully or not), in ms; undefined: never. */
  readAt: number | undefined;
  /** Whether the last read failed. */
  failed: boolean;
  /** The last good reading. */
  good: Reading | undefined;
  /** The read in progress, shared by every ask that comes meanwhile. */
  pending: Promise<void> | undefined;
  /** A feed's decimals, read once (they never change). */
  decimals: number | undefined;
}

type ReadableSource = Exclude<PriceSourceConfig, { type: 'fixed' }>;

export class Prices {
  readonly #networks: ReadonlyMap<string, NetworkConfig>;
  readonly #upstreams: Upstreams;
  readonly #log: Logger;
  readonly #cacheMs: number;
  readonly #maxAgeMs: number;
  readonly #timeoutMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #closing = new AbortController();
  readonly #now: Clock;

  constructor(opts: PricesOptions) {
    this.#networks = new Map(opts.settings.networks.map((n) => [n.slug, n]));
    this.#upstreams = opts.upstreams;
    this.#log = opts.logger;
    this.#cacheMs = opts.settings.prices.cacheSeconds * 1000;
    this.#maxAgeMs = opts.settings.prices.maxAgeSeconds * 1000;
    this.#timeoutMs = opts.settings.prices.timeoutMs;
    this.#now = opts.now ?? systemClock;
  }

  /** USD per whole native coin of `network`, or null when unknown or stale (never a guess). */
  async nativeUsd(network: string): Promise<number | null> {
    const net = this.#networks.get(network);
    if (!net) return null;
    if (net.price) return this.#price(net.price);
    return net.type === 'testnet' ? 0 : null; // C34: testnet coins are worth 0 USD unless configured
  }

  /** USD per whole token (`token` is the ERC-20's address on `network`), or null. */
  async tokenUsd(network: string, token: string): Promise<number | null> {
    const net = this.#networks.get(network);
    const wanted = token.toLowerCase();
    const t = net?.tokens?.find((x) => x.address.toLowerCase() === wanted);
    if (!net || !t) return null;
    if (t.price) return this.#price(t.price);
    return net.type === 'testnet' ? 0 : null;
  }

  /** Stops reading: reads in flight are aborted, later asks of a read source give null. */
  close(): void {
    this.#closing.abort();
  }

  async #price(source: PriceSourceConfig): Promise<number | null> {
    if (source.type === 'fixed') return source.usd;
    if (this.#closing.signal.aborted) return null;
    const key = source.type === 'chainlink' ? `chainlink:${source.network}:${source.address.toLowerCase()}` : `http:${source.url}#${source.path}`;
    let entry = this.#entries.get(key);
    if (!entry) {
      entry = { readAt: undefined, failed: false, good: undefined, pending: undefined, decimals: undefined };
      this.#entries.set(key, entry);
    }
    const ttl = entry.failed ? Math.min(this.#cacheMs, FAILURE_RETRY_SECONDS * 1000) : this.#cacheMs;
    if (entry.readAt === undefined || this.#now() - entry.readAt >= ttl) {
      entry.pending ??= this.#refresh(source, entry).finally(() => {
        if (entry) entry.pending = undefined;
      });
      await entry.pending;
    }
    const good = entry.good;
    // C34: older than maxAgeSeconds is no price at all, cached or not.
    return good && this.#now() - good.at <= this.#maxAgeMs ? good.usd : null;
  }

  /** Reads the source once and records the outcome in `entry`; never rejects. */
  async #refresh(source: ReadableSource, entry: Entry): Promise<void> {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const signal = AbortSignal.any([timeout, this.#closing.signal]);
    try {
      const reading = source.type === 'chainlink' ? await this.#readFeed(source, entry, signal) : await this.#readHttp(source, signal);
      entry.good = reading;
      if (entry.failed) this.#log.info({ source: describe(source) }, 'price source answers again');
      entry.failed = false;
    } catch (err) {
      const error = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : (err as Error).message;
      // A warning when a source starts failing, not on every retry while it goes on failing.
      if (!this.#closing.signal.aborted) {
        this.#log[entry.failed ? 'debug' : 'warn']({ source: describe(source), error }, 'price source failed');
      }
      entry.failed = true;
    } finally {
      entry.readAt = this.#now();
    }
  }

  /** AggregatorV3 `latestRoundData` (and `decimals`, once) over eth_call through the network's upstream pool. */
  async #readFeed(source: Extract<PriceSourceConfig, { type: 'chainlink' }>, entry: Entry, signal: AbortSignal): Promise<Reading> {
    const pool = this.#upstreams.pool(source.network);
    const call = async (functionName: 'decimals' | 'latestRoundData'): Promise<Hex> => {
      const data = encodeFunctionData({ abi: AGGREGATOR_V3_ABI, functionName });
      return pool.request<Hex>('eth_call', [{ to: source.address, data }, 'latest']);
    };
    const [decimalsHex, roundHex] = await abortable(
      Promise.all([entry.decimals === undefined ? call('decimals') : undefined, call('latestRoundData')]),
      signal,
    );
    if (decimalsHex !== undefined) {
      if (decimalsHex === '0x') throw new PriceSourceError('no contract at the feed address (empty answer)');
      entry.decimals = decodeFunctionResult({ abi: AGGREGATOR_V3_ABI, functionName: 'decimals', data: decimalsHex });
    }
    const decimals = entry.decimals ?? 0;
    if (roundHex === '0x') throw new PriceSourceError('no contract at the feed address (empty answer)');
    const [, answer, , updatedAt] = decodeFunctionResult({ abi: AGGREGATOR_V3_ABI, functionName: 'latestRoundData', data: roundHex });
    if (answer <= 0n) throw new PriceSourceError(`feed answer ${answer} is not a price`);
    if (updatedAt === 0n) throw new PriceSourceError('feed round is not complete (updatedAt 0)');
    const usd = Number(answer) / 10 ** decimals;
    if (!Number.isFinite(usd)) throw new PriceSourceError('feed answer out of range');
    // A timestamp ahead of our clock counts as now: skew never makes a price look fresher than it is.
    return { usd, at: Math.min(Number(updatedAt) * 1000, this.#now()) };
  }

  async #readHttp(source: Extract<PriceSourceConfig, { type: 'http' }>, signal: AbortSignal): Promise<Reading> {
    const usd = await readJsonPrice(source.url, source.path, signal);
    return { usd, at: this.#now() };
  }
}

/** A source for logs: never an HTTP source's query string or credentials, which may hold an API key. */
function describe(source: ReadableSource): string {
  if (source.type === 'chainlink') return `chainlink ${source.network} ${source.address}`;
  try {
    const u = new URL(source.url);
    return `http ${u.origin}${u.pathname} ${source.path}`;
  } catch {
    return `http (invalid URL) ${source.path}`;
  }
}

/** `promise`, or a rejection as soon as `signal` aborts (the work itself cannot be cancelled). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Error('aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
