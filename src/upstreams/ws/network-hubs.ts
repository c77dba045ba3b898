// The subscription hubs of every network, made on first use from the upstreams' `ws` addresses.
import { type HubOptions, type HubStats, SubscriptionHub } from './subscription-hub.ts';

/** What a hub needs of a network's config. */
interface HubNetwork {
  slug: string;
  upstreams: readonly { name?: string; ws?: string }[];
}

/** The hubs of every network, made on first use from the networks' upstream `ws` addresses. */
export class SubscriptionHubs {
  readonly #hubs = new Map<string, SubscriptionHub>();
  readonly #make: (network: HubNetwork) => SubscriptionHub;

  constructor(opts: Omit<HubOptions, 'network' | 'urls' | 'names'>) {
    this.#make = (network) => {
      const withWs = network.upstreams.flatMap((u, i) => (u.ws ? [{ url: u.ws, name: u.name ?? `${network.slug}-${i}` }] : []));
      return new SubscriptionHub({ ...opts, network: network.slug, urls: withWs.map((u) => u.url), names: withWs.map((u) => u.name) });
    };
  }

  get(network: HubNetwork): SubscriptionHub {
    let hub = this.#hubs.get(network.slug);
    if (!hub) {
      hub = this.#make(network);
      this.#hubs.set(network.slug, hub);
    }
    return hub;
  }

  /** The hub of a network if one was made (tests and metrics). */
  peek(slug: string): SubscriptionHub | undefined {
    return this.#hubs.get(slug);
  }

  stats(): HubStats[] {
    return [...this.#hubs.values()].map((h) => h.stats());
  }

  async close(): Promise<void> {
    await Promise.all([...this.#hubs.values()].map((h) => h.close()));
  }
}
