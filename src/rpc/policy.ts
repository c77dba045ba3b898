import type { Config, Tier } from '../config/schema.ts';
import { MethodNotSupportedError } from '../errors/rpc.ts';

// C24: refused whatever the plan: node-held accounts and devnet control.
const NEVER: Array<[RegExp, string]> = [
  [/^(eth_accounts|eth_sign|eth_signTransaction|eth_sendTransaction|eth_signTypedData(_v\d)?)$/, 'needs an account held by the node; sign in your app and use eth_sendRawTransaction'],
  [/^personal_/, 'needs an account held by the node; sign in your app and use eth_sendRawTransaction'],
  [/^(anvil|hardhat|evm)_/, 'is a devnet control method and is not available through the gateway'],
  [/^(admin|miner)_/, 'controls the node and is not available'],
];
// Refused unless the plan's `methods.planExtras` lists them.
const GATED: Array<[RegExp, string]> = [
  [/^txpool_/, 'is not enabled for this plan'],
  [/^(debug|trace)_/, 'is not enabled for this plan'],
];
const STANDARD = /^(eth|net|web3)_[A-Za-z0-9]+$/;
const SUBSCRIPTIONS = /^eth_(subscribe|unsubscribe)$/;

export interface MethodPolicyOptions {
  config: Config;
  /** Where eth_subscribe is offered, for the refusal message. */
  wsHint: string;
}

/**
 * Which methods a caller may send to a network (C24). `check` returns null when allowed, else the
 * -32601 error that says why. Results are memoised per (network kind, tier, method).
 */
export class MethodPolicy {
  readonly #native: ReadonlySet<string>;
  readonly #extras: Readonly<Record<Tier, { exact: Set<string>; prefixes: string[] }>>;
  readonly #wsHint: string;
  readonly #memo = new Map<string, MethodNotSupportedError | null>();

  constructor(opts: MethodPolicyOptions) {
    this.#native = new Set(Object.keys(opts.config.methods.native));
    this.#wsHint = opts.wsHint;
    const extras = {} as Record<Tier, { exact: Set<string>; prefixes: string[] }>;
    for (const [tier, list] of Object.entries(opts.config.methods.planExtras) as Array<[Tier, string[]]>) {
      extras[tier] = {
        exact: new Set(list.filter((m) => !m.endsWith('*'))),
        prefixes: list.filter((m) => m.endsWith('*')).map((m) => m.slice(0, -1)),
      };
    }
    this.#extras = extras;
  }

  /** null: allowed; else the error to answer (C24). `tier` is null on the public endpoint (free rules). */
  check(method: string, nativeNetwork: boolean, tier: Tier | null): MethodNotSupportedError | null {
    const memoKey = `${nativeNetwork ? 'n' : 'o'}:${tier ?? '-'}:${method}`;
    const hit = this.#memo.get(memoKey);
    if (hit !== undefined) return hit;
    const verdict = this.#decide(method, nativeNetwork, tier ?? 'free');
    // Bounded: callers can send arbitrary method names.
    if (this.#memo.size < 10_000) this.#memo.set(memoKey, verdict);
    return verdict;
  }

  #decide(method: string, nativeNetwork: boolean, tier: Tier): MethodNotSupportedError | null {
    const refuse = (why: string) => new MethodNotSupportedError(`Method ${method} ${why}`, { data: { method } });
    if (method.startsWith('nat_')) {
      if (!nativeNetwork) return refuse('exists only on the native networks (native-mainnet, native-testnet)');
      return this.#native.has(method) ? null : refuse('is not a supported native method');
    }
    if (SUBSCRIPTIONS.test(method)) return refuse(`needs a WebSocket connection: use ${this.#wsHint}`);
    for (const [re, why] of NEVER) if (re.test(method)) return refuse(why);
    const extras = this.#extras[tier];
    if (extras.exact.has(method) || extras.prefixes.some((p) => method.startsWith(p))) return null;
    for (const [re, why] of GATED) if (re.test(method)) return refuse(why);
    if (STANDARD.test(method)) return null;
    return refuse('is not supported');
  }
}
