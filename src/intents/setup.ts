// C41, C42: the intents section of the config read once into routes, settlers and solver wallets.
import type { Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { getAddress } from 'viem/utils';
import { ConfigError } from '../errors/config.ts';
import type { FaucetConfig, IntentsConfig, NetworkConfig } from '../config/schema.ts';
import { signerFromKey } from '../onchain/wallets.ts';

/** The solver's wallet on one network: fills there as a destination, settles and refunds there as an origin (its oracle). */
export interface SolverWallet {
  slug: string;
  chainId: number;
  /** Signs in this process; the key is never kept anywhere else, never logged nor returned. */
  account: PrivateKeyAccount;
  /** EIP-55 form. */
  address: Address;
}

export interface Settlers {
  origin: Address;
  destination: Address;
}

export interface Route {
  from: NetworkConfig;
  to: NetworkConfig;
}

/**
 * C51: the shares of a destination wallet's liquidity (its balance, what intents reserve included)
 * that one intent, one account's intents not yet filled, and all intents waiting for their open may
 * reserve; in percent, as the settings of the same names.
 */
export interface ReserveShares {
  maxReservePerIntent: number;
  maxReservePerAccount: number;
  maxReserveAwaitingOpen: number;
}

/** Everything the intents need from the config, checked. */
export interface IntentsSetup {
  feeBps: number;
  /** Intents one account may have waiting for their open at once (each reserves liquidity). */
  maxAwaitingOpen: number;
  shares: ReserveShares;
  fillGasLimit: bigint;
  settleGasLimit: bigint;
  fillMarginSeconds: number;
  expiryGraceSeconds: number;
  checkIntervalMs: number;
  resendAfterMs: number;
  /** Keyed `from>to`. */
  routes: ReadonlyMap<string, Route>;
  settlers: ReadonlyMap<string, Settlers>;
  solvers: ReadonlyMap<string, SolverWallet>;
  networks: ReadonlyMap<string, NetworkConfig>;
}

export const routeKey = (from: string, to: string) => `${from}>${to}`;

/**
 * C41's default routes: every ordered pair of distinct networks of the same type (never mainnet to
 * testnet) whose native coins are the same asset, taken as the same currency symbol (ETH on
 * Ethereum, Arbitrum, Optimism and Base; their Sepolia testnets likewise).
 */
export function defaultRoutes(networks: readonly NetworkConfig[]): Array<{ from: string; to: string }> {
  const out: Array<{ from: string; to: string }> = [];
  for (const a of networks) {
    for (const b of networks) {
      if (a.slug !== b.slug && a.type === b.type && a.currency.symbol === b.currency.symbol && a.currency.decimals === b.currency.decimals) {
        out.push({ from: a.slug, to: b.slug });
      }
    }
  }
  return out;
}

/**
 * The settings intents read: their section, the networks, and the faucet's keys (a solver key may
 * not be one of them).
 */
export interface IntentsSettings {
  intents: IntentsConfig;
  networks: readonly NetworkConfig[];
  faucet: Pick<FaucetConfig, 'privateKey' | 'networks'>;
}

/**
 * Reads `intents` of the config.
 * @throws ConfigError naming a bad setting: an unknown slug, a route between a mainnet and a
 *   testnet or between different coins, a bad key, a solver key that is also a faucet key.
 */
export function readIntentsConfig(config: IntentsSettings): IntentsSetup {
  const c = config.intents;
  const networks = new Map(config.networks.map((n) => [n.slug, n]));
  const net = (slug: string, setting: string): NetworkConfig => {
    const n = networks.get(slug);
    if (!n) throw new ConfigError(`${setting}: no network with slug "${slug}"`);
    return n;
  };

  const routes = new Map<string, Route>();
  const listed = c.routes ?? defaultRoutes(config.networks);
  for (const [i, r] of listed.entries()) {
    const setting = `intents.routes[${i}]`;
    const from = net(r.from, `${setting}.from`);
    const to = net(r.to, `${setting}.to`);
    if (from.slug === to.slug) throw new ConfigError(`${setting}: a route joins two different networks`);
    if (from.type !== to.type) throw new ConfigError(`${setting}: ${from.slug} is a ${from.type} and ${to.slug} a ${to.type}; never mainnet to testnet (C41)`);
    if (from.currency.symbol !== to.currency.symbol || from.currency.decimals !== to.currency.decimals) {
      throw new ConfigError(`${setting}: ${from.slug} (${from.currency.symbol}) and ${to.slug} (${to.currency.symbol}) have different native coins`);
    }
    routes.set(routeKey(from.slug, to.slug), { from, to });
  }

  const settlers = new Map<string, Settlers>();
  for (const [slug, s] of Object.entries(c.settlers)) {
    net(slug, `intents.settlers.${slug}`);
    settlers.set(slug, { origin: getAddress(s.origin), destination: getAddress(s.destination) });
  }

  const faucetKeys = new Set(
    [config.faucet.privateKey, ...Object.values(config.faucet.networks).map((f) => f.privateKey)].filter((k): k is string => !!k).map((k) => k.toLowerCase()),
  );
  for (const slug of Object.keys(c.solverPrivateKeys)) net(slug, `intents.solverPrivateKeys.${slug}`);
  const solvers = new Map<string, SolverWallet>();
  for (const n of config.networks) {
    const own = c.solverPrivateKeys[n.slug];
    const key = own ?? c.solverPrivateKey;
    if (!key) continue;
    const setting = own ? `intents.solverPrivateKeys.${n.slug} (SOLVER_PRIVATE_KEY_<SLUG>)` : 'intents.solverPrivateKey (SOLVER_PRIVATE_KEY)';
    // The faucet and the solver keep their own nonces: one wallet for both would make them collide.
    if (faucetKeys.has(key.toLowerCase())) throw new ConfigError(`invalid setting ${setting}: the same key as a faucet wallet; give the solver a wallet of its own`);
    const account = signerFromKey(key, setting);
    solvers.set(n.slug, { slug: n.slug, chainId: n.chainId, account, address: account.address });
  }

  return {
    feeBps: c.feeBps,
    maxAwaitingOpen: c.maxAwaitingOpen,
    shares: { maxReservePerIntent: c.maxReservePerIntent, maxReservePerAccount: c.maxReservePerAccount, maxReserveAwaitingOpen: c.maxReserveAwaitingOpen },
    fillGasLimit: BigInt(c.fillGasLimit),
    settleGasLimit: BigInt(c.settleGasLimit),
    fillMarginSeconds: c.fillMarginSeconds,
    expiryGraceSeconds: c.expiryGraceSeconds,
    checkIntervalMs: c.checkIntervalMs,
    resendAfterMs: c.resendAfterSeconds * 1000,
    routes,
    settlers,
    solvers,
    networks,
  };
}

/** Why a configured route cannot take intents now (null: it can): what it lacks. */
export function routeGap(setup: IntentsSetup, route: Route): string | null {
  const lacks: string[] = [];
  if (!setup.settlers.get(route.from.slug)) lacks.push(`settlers on ${route.from.slug}`);
  if (!setup.settlers.get(route.to.slug)) lacks.push(`settlers on ${route.to.slug}`);
  if (!setup.solvers.get(route.to.slug)) lacks.push(`a solver wallet on ${route.to.slug}`);
  if (!setup.solvers.get(route.from.slug)) lacks.push(`a solver wallet on ${route.from.slug}`);
  return lacks.length ? `it has no ${lacks.join(', no ')}` : null;
}
