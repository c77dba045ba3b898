// The networks the gateway serves (C2, C24), as config data, looked up by slug or chain id.
import type { MethodsConfig, NetworkConfig } from '../config/schema.ts';

/** A network as the gateway knows it: config data plus what follows from it (C2, C24). */
export interface Network extends NetworkConfig {
  native: boolean;
  /** Methods a key may call here: the standard set, and `nat_*` on the native networks. */
  supportedMethods: readonly string[];
}

/** All networks, looked up by slug or chainId (networks are data: one definition per chain). */
export class Networks {
  readonly all: readonly Network[];
  readonly #bySlug = new Map<string, Network>();
  readonly #byChainId = new Map<number, Network>();
  readonly #publicUrl: () => string;

  /** `publicBase`: the address users see (C2), asked each time (the port is known once listening). */
  constructor(cfg: { networks: readonly NetworkConfig[]; methods: Pick<MethodsConfig, 'standard' | 'native'> }, publicBase: () => string) {
    this.#publicUrl = publicBase;
    const nativeMethods = Object.keys(cfg.methods.native);
    this.all = cfg.networks.map((n) => {
      const native = n.native === true;
      const net: Network = Object.freeze({
        ...n,
        native,
        supportedMethods: Object.freeze(native ? [...cfg.methods.standard, ...nativeMethods] : [...cfg.methods.standard]),
      });
      this.#bySlug.set(n.slug, net);
      this.#byChainId.set(n.chainId, net);
      return net;
    });
  }

  bySlug(slug: string): Network | undefined {
    return this.#bySlug.get(slug);
  }

  byChainId(chainId: number): Network | undefined {
    return this.#byChainId.get(chainId);
  }

  has(slug: string): boolean {
    return this.#bySlug.has(slug);
  }

  /** `{PUBLIC_URL}/v1/{slug}`: append `/{apiKey}` for a working address (C2). */
  rpcUrl(slug: string): string {
    return `${this.#publicUrl()}/v1/${slug}`;
  }

  /** `ws(s)://{PUBLIC_URL host}/ws/{slug}`: append `?apiKey={apiKey}` for a working address (C1). */
  wsUrl(slug: string): string {
    return `${this.#publicUrl().replace(/^http/, 'ws')}/ws/${slug}`;
  }

  /** The ready-to-paste addresses of a network for one key: HTTP with the key in the path, WebSocket in the query. */
  keyUrls(slug: string, apiKey: string): { network: string; http: string; ws: string } {
    const key = encodeURIComponent(apiKey);
    return { network: slug, http: `${this.rpcUrl(slug)}/${key}`, ws: `${this.wsUrl(slug)}?apiKey=${key}` };
  }
}
