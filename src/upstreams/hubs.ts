import { type HubOptions, type HubStats, SubscriptionHub } from './hub.ts';

/** The hubs of every network, made on first use from the networks' upstream `ws` addresses. */
export class SubscriptionHubs {
  readonly #hubs = new Map<string, SubscriptionHub>();
  readonly #make: (network: { slug: string; upstreams: readonly { ws?: string }[] }) => SubscriptionHub;

  constructor(opts: Omit<HubOptions, 'network' | 'urls'>) {
    this.#make = (network) =>
      new SubscriptionHub({
        ...opts,
        network: network.slug,
        urls: network.upstreams.flatMap((u) => (u.ws ? [u.ws] : [])),
      });
  }

  get(network: { slug: string; upstreams: readonly { ws?: string }[] }): SubscriptionHub {
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
