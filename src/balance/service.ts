// C40: the unified balance of an address over many networks: native coins and configured ERC-20
// tokens, read in parallel through the upstream pools, grouped by symbol, valued in USD.
import type { Logger } from 'pino';
import type { Address } from 'viem';
import { formatUnits } from 'viem/utils';
import type { Network, Networks } from '../chains/networks.ts';
import { badRequest, HttpError } from '../errors/http.ts';
import { DeadlineError } from '../errors/deadline.ts';
import { BalanceReadError } from '../errors/node.ts';
import { NoUpstreamError } from '../errors/upstream.ts';
import { parseAddress } from '../onchain/addresses.ts';
import { usdCents } from '../prices/money.ts';
import type { Prices } from '../prices/prices.ts';
import type { Upstreams } from '../upstreams/upstreams.ts';
import { type NetworkRead, readNetwork } from './read.ts';

/** C40: milliseconds one network may take before it is listed in `errors`. */
export const NETWORK_BUDGET_MS = 3_000;
/** C40: milliseconds a network's read of an address is reused. */
export const CACHE_MS = 5_000;
/** Reads kept at most; past it the oldest go first (all live the same 5 s). */
const CACHE_MAX_ENTRIES = 10_000;

export interface BalanceQuery {
  testnets?: boolean | undefined;
  /** Comma-separated slugs. */
  networks?: string | undefined;
}

export interface ChainBalance {
  network: string;
  chainId: number;
  /** Whole units, exact. */
  balance: string;
  /** Smallest units, exact. */
  balanceRaw: string;
  usd: number | null;
  blockNumber: number;
}

export interface AssetBalance {
  symbol: string;
  /** True for coins of testnets: never one asset with a mainnet coin of the same symbol. */
  testnet: boolean;
  balance: string;
  usd: number | null;
  chains: ChainBalance[];
}

export interface BalanceError {
  network: string;
  /** `TIMEOUT`: no answer within 3 s; `UPSTREAM_ERROR`: no node answered or the answer was unusable; `TOKEN_ERROR`: one token could not be read (the rest of the network is listed). */
  code: 'TIMEOUT' | 'UPSTREAM_ERROR' | 'TOKEN_ERROR';
  message: string;
}

export interface UnifiedBalance {
  address: Address;
  totalUsd: number;
  /** When the oldest read in the answer was made (reads are cached 5 s). */
  updatedAt: string;
  assets: AssetBalance[];
  errors: BalanceError[];
}

export interface BalanceServiceOptions {
  networks: Networks;
  upstreams: Upstreams;
  prices: Prices;
  logger: Logger;
}

/** An amount of one symbol on one chain, before grouping. */
interface Holding {
  symbol: string;
  network: Network;
  /** The network's place in the config, for ordering. */
  position: number;
  raw: bigint;
  decimals: number;
  blockNumber: number;
  /** USD cents; null when there is no price. */
  cents: bigint | null;
}

/**
 * The address a balance is asked for: 0x or xdc (any network's), mixed case only with a valid
 * EIP-55 checksum (C28's rule); unlike the faucet, the zero address may be asked about.
 * @throws HttpError VALIDATION_ERROR naming `params.address`.
 */
export function parseBalanceAddress(text: string): Address {
  if (/^(0x|xdc)0{40}$/i.test(text)) return '0x0000000000000000000000000000000000000000';
  const parsed = parseAddress(text, true);
  if (!parsed.startsWith('0x')) throw badRequest(`Invalid request: params.address ${parsed}`, [{ field: 'params.address', message: parsed }]);
  return parsed as Address;
}

/** Sums exact amounts of different decimals (USDC has 6 on most chains, 18 on BNB Chain); returns whole units as a decimal string. */
export function sumUnits(parts: ReadonlyArray<{ raw: bigint; decimals: number }>): string {
  const scale = Math.max(0, ...parts.map((p) => p.decimals));
  const total = parts.reduce((acc, p) => acc + p.raw * 10n ** BigInt(scale - p.decimals), 0n);
  return formatUnits(total, scale);
}

const dollars = (cents: bigint): number => Number(cents) / 100;

/**
 * The unified balance (C40). Each network's read of an address is cached 5 s and shared by
 * concurrent requests; a network that fails or takes over 3 s is reported in `errors` while the
 * others answer; when none answers, the request fails with 502.
 */
export class BalanceService {
  readonly #networks: Networks;
  readonly #upstreams: Upstreams;
  readonly #prices: Prices;
  readonly #log: Logger;
  readonly #position: ReadonlyMap<string, number>;
  /** `${slug} ${address}` -> the read, in flight or done (then `expires` is set). */
  readonly #cache = new Map<string, { read: Promise<NetworkRead>; expires: number }>();

  constructor(opts: BalanceServiceOptions) {
    this.#networks = opts.networks;
    this.#upstreams = opts.upstreams;
    this.#prices = opts.prices;
    this.#log = opts.logger;
    this.#position = new Map(opts.networks.all.map((n, i) => [n.slug, i]));
  }

  /**
   * The networks a query names: `networks` (comma-separated slugs, any type), else every testnet
   * with `testnets`, else every mainnet.
   * @throws HttpError VALIDATION_ERROR for an unknown slug, an empty list, or both parameters.
   */
  networksOf(query: BalanceQuery): Network[] {
    if (query.networks === undefined) {
      const type = query.testnets === true ? 'testnet' : 'mainnet';
      return this.#networks.all.filter((n) => n.type === type);
    }
    if (query.testnets !== undefined) {
      throw badRequest('Invalid request: give either networks or testnets, not both', [
        { field: 'querystring.testnets', message: 'must not be given with networks' },
      ]);
    }
    const slugs = [...new Set(query.networks.split(',').map((s) => s.trim()))];
    const unknown = slugs.filter((s) => !this.#networks.has(s));
    if (slugs.length === 0 || unknown.length > 0) {
      const message = unknown.some((s) => s !== '')
        ? `unknown network ${unknown.map((s) => `"${s}"`).join(', ')} (GET /networks lists them)`
        : 'must be network slugs separated by commas';
      throw badRequest(`Invalid request: querystring.networks ${message}`, [{ field: 'querystring.networks', message }]);
    }
    // In config order, whatever order they were asked in.
    return this.#networks.all.filter((n) => slugs.includes(n.slug));
  }

  /**
   * The unified balance of `addressText` over the networks `query` names (C40).
   * @throws HttpError 400 VALIDATION_ERROR for a bad address or query; 502 UPSTREAM_ERROR when no network answered.
   */
  async balance(addressText: string, query: BalanceQuery): Promise<UnifiedBalance> {
    const address = parseBalanceAddress(addressText);
    const networks = this.networksOf(query);
    const outcomes = await Promise.all(networks.map((n) => this.#network(n, address)));

    const holdings: Holding[] = [];
    const errors: BalanceError[] = [];
    let oldest = Number.POSITIVE_INFINITY;
    for (const o of outcomes) {
      if ('error' in o) {
        errors.push(o.error);
        continue;
      }
      oldest = Math.min(oldest, o.readAt);
      holdings.push(...o.holdings);
      errors.push(...o.tokenErrors);
    }
    if (oldest === Number.POSITIVE_INFINITY) {
      throw new HttpError('UPSTREAM_ERROR', `No network answered (${networks.map((n) => n.slug).join(', ')}); try again later`, {
        details: { errors },
      });
    }
    const assets = group(holdings);
    const totalCents = assets.reduce((acc, a) => acc + a.cents, 0n);
    return {
      address,
      totalUsd: dollars(totalCents),
      updatedAt: new Date(oldest).toISOString(),
      assets: assets.map((a) => a.asset),
      errors,
    };
  }

  /** One network within its budget: holdings (native always, tokens when not zero) or its error. */
  async #network(
    network: Network,
    address: Address,
  ): Promise<{ holdings: Holding[]; tokenErrors: BalanceError[]; readAt: number } | { error: BalanceError }> {
    const deadline = Date.now() + NETWORK_BUDGET_MS;
    let read: NetworkRead;
    try {
      read = await withDeadline(this.#read(network, address), deadline);
    } catch (err) {
      return { error: this.#failure(network, err) };
    }
    const holdings: Holding[] = [];
    const tokenErrors: BalanceError[] = [];
    const priced = async (raw: bigint, decimals: number, price: () => Promise<number | null>): Promise<bigint | null> => {
      if (raw === 0n) return 0n; // nothing is worth nothing, price or not
      const usd = await withDeadline(price(), deadline).catch(() => null);
      return usd === null ? null : usdCents(raw, decimals, usd);
    };
    const { decimals, symbol } = network.currency;
    const position = this.#position.get(network.slug) ?? 0;
    const nativeCents = priced(read.native, decimals, () => this.#prices.nativeUsd(network.slug));
    const tokenParts = read.tokens.map(async (t) => {
      if ('error' in t) {
        tokenErrors.push({ network: network.slug, code: 'TOKEN_ERROR', message: `${t.token.symbol} (${t.token.address}): ${t.error}` });
        return;
      }
      // Keeps the answer small: a token is listed where it is held (C40 choice; the native coin always is).
      if (t.raw === 0n) return;
      const cents = await priced(t.raw, t.token.decimals, () => this.#prices.tokenUsd(network.slug, t.token.address));
      holdings.push({ symbol: t.token.symbol, network, position, raw: t.raw, decimals: t.token.decimals, blockNumber: read.blockNumber, cents });
    });
    holdings.push({ symbol, network, position, raw: read.native, decimals, blockNumber: read.blockNumber, cents: await nativeCents });
    await Promise.all(tokenParts);
    return { holdings, tokenErrors, readAt: read.readAt };
  }

  /** The read of `address` on `network`: from the 5 s cache, joined while in flight, or new. */
  #read(network: Network, address: Address): Promise<NetworkRead> {
    const key = `${network.slug} ${address}`;
    const now = Date.now();
    const hit = this.#cache.get(key);
    if (hit && (hit.expires === 0 || hit.expires > now)) return hit.read;
    if (hit) this.#cache.delete(key);
    this.#evict(now);
    const entry = { read: readNetwork(this.#upstreams.pool(network.slug), address, network.tokens ?? []), expires: 0 };
    this.#cache.set(key, entry);
    entry.read.then(
      (r) => {
        // Counted from the answer, so a slow read is not served stale for less than 5 s.
        if (this.#cache.get(key) === entry) entry.expires = r.readAt + CACHE_MS;
      },
      () => {
        // A failure is not cached: the next request asks again.
        if (this.#cache.get(key) === entry) this.#cache.delete(key);
      },
    );
    return entry.read;
  }

  /** Drops expired reads from the oldest end, and the oldest beyond the size bound. */
  #evict(now: number): void {
    for (const [key, e] of this.#cache) {
      const expired = e.expires !== 0 && e.expires <= now;
      if (!expired && this.#cache.size < CACHE_MAX_ENTRIES) break;
      this.#cache.delete(key);
    }
  }

  #failure(network: Network, err: unknown): BalanceError {
    if (err instanceof DeadlineError) {
      return { network: network.slug, code: DeadlineError.code, message: `no answer within ${NETWORK_BUDGET_MS / 1000} s` };
    }
    if (err instanceof NoUpstreamError) return { network: network.slug, code: NoUpstreamError.code, message: 'no node of the network answered' };
    if (err instanceof BalanceReadError) return { network: network.slug, code: BalanceReadError.code, message: err.message };
    this.#log.error({ err, network: network.slug }, 'balance read failed');
    return { network: network.slug, code: 'UPSTREAM_ERROR', message: 'the read failed' };
  }
}

/** `promise`, or a DeadlineError rejection at `deadline` (the work itself goes on, and may fill the cache). */
function withDeadline<T>(promise: Promise<T>, deadline: number): Promise<T> {
  const ms = deadline - Date.now();
  if (ms <= 0) return Promise.race([promise, Promise.reject(new DeadlineError('no answer within the time budget'))]);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new DeadlineError('no answer within the time budget')), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Holdings grouped by symbol (ETH on Ethereum, Arbitrum, Optimism and Base is one asset), mainnets
 * and testnets apart: chains in config order; assets by USD value, largest first, then mainnets
 * before testnets, then by symbol. An asset's `usd` is null
 * when a chain holding some of it has no price; `cents` counts what is priced, for `totalUsd`.
 */
function group(holdings: readonly Holding[]): Array<{ asset: AssetBalance; cents: bigint; order: bigint }> {
  const bySymbol = new Map<string, Holding[]>();
  for (const h of holdings) {
    const key = `${h.network.type} ${h.symbol}`;
    bySymbol.set(key, [...(bySymbol.get(key) ?? []), h]);
  }
  const out = [...bySymbol.values()].map((list) => {
    const [{ symbol, network }] = list as [Holding, ...Holding[]];
    const chains = [...list].sort((a, b) => a.position - b.position);
    const priced = chains.reduce((acc, h) => acc + (h.cents ?? 0n), 0n);
    const unpriced = chains.some((h) => h.cents === null);
    return {
      asset: {
        symbol,
        testnet: network.type === 'testnet',
        balance: sumUnits(chains),
        usd: unpriced ? null : dollars(priced),
        chains: chains.map(
          (h): ChainBalance => ({
            network: h.network.slug,
            chainId: h.network.chainId,
            balance: formatUnits(h.raw, h.decimals),
            balanceRaw: h.raw.toString(),
            usd: h.cents === null ? null : dollars(h.cents),
            blockNumber: h.blockNumber,
          }),
        ),
      },
      cents: priced,
      order: unpriced ? -1n : priced,
    };
  });
  return out.sort((a, b) => {
    if (a.order !== b.order) return a.order > b.order ? -1 : 1;
    if (a.asset.testnet !== b.asset.testnet) return a.asset.testnet ? 1 : -1;
    return a.asset.symbol.localeCompare(b.asset.symbol);
  });
}
