// C45: the price sources the devnet hands the app, so that USD values work with no internet.
import type { Address } from 'viem';
import type { DevnetConfig, NetworkConfig, PricesConfig } from '../config/schema.ts';

/**
 * Sets the devnet's price sources on a config draft (C34, C45): each native mainnet reads the feed
 * deployed on its chain (`chainlink`); every other mainnet gets the fixed devnet price of its
 * currency symbol (`devnet.fixedUsdPrices`), where there is one. Testnets keep what they have:
 * their coins are worth 0 USD unless configured (C34), as on the real networks, although the
 * native testnet has a feed too (a config may point its `price` at it).
 */
export function applyDevnetPrices(draft: { networks: NetworkConfig[]; devnet: Pick<DevnetConfig, 'fixedUsdPrices'> }, priceFeeds: Readonly<Record<string, Address>>): void {
  for (const n of draft.networks) {
    if (n.type !== 'mainnet') continue;
    const feed = priceFeeds[n.slug];
    if (n.native && feed) {
      n.price = { type: 'chainlink', network: n.slug, address: feed };
      continue;
    }
    const usd = draft.devnet.fixedUsdPrices[n.currency.symbol];
    if (usd !== undefined) n.price = { type: 'fixed', usd };
  }
}

/** Seconds between the feeds' heartbeats: well inside `prices.maxAgeSeconds`, at most every 10 minutes. */
export function feedHeartbeatSeconds(config: { prices: Pick<PricesConfig, 'maxAgeSeconds'> }): number {
  return Math.max(1, Math.min(600, Math.floor(config.prices.maxAgeSeconds / 3)));
}
