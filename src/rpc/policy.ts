// The method policy: which methods a call may use, on which transport and network.
import type { MethodsConfig, Tier } from '../config/schema.ts';
import { MethodNotSupportedError } from '../errors/rpc.ts';
import { ConfigError } from '../errors/config.ts';
import { planMayOpen, refusedWhy, WEBSOCKET_METHODS } from '../methods/catalogue.ts';

/** Methods the gateway answers itself on a WebSocket only (the catalogue's `websocket` access: subscriptions). */
const SUBSCRIPTIONS: ReadonlySet<string> = new Set(WEBSOCKET_METHODS);

/** How the call arrived: subscriptions exist only on a WebSocket. */
export type Transport = 'http' | 'ws';

export interface MethodPolicyOptions {
  methods: Pick<MethodsConfig, 'standard' | 'native' | 'planExtras'>;
  /** Where eth_subscribe is offered, for the refusal message. */
  wsHint: string;
}

/**
 * Which methods a caller may send to a network (C24): an exact, case-sensitive allowlist. Allowed
 * are the names in `methods.standard`, the plan's names in `methods.planExtras`, the `nat_*`
 * names of `methods.native` on the native networks, and eth_subscribe / eth_unsubscribe over a
 * WebSocket. Everything else is -32601, so a node's own extensions (anvil's
 * eth_sendUnsignedTransaction, geth's debug_setHead) never pass because of a prefix. `check`
 * runs before metering: a refused name is never counted or recorded as usage.
 */
export class MethodPolicy {
  readonly #standard: ReadonlySet<string>;
  readonly #native: ReadonlySet<string>;
  readonly #extras: Readonly<Record<Tier, ReadonlySet<string>>>;
  /** Every allowed name by its lower-case form, to point out a wrongly cased name. */
  readonly #byLowerCase = new Map<string, string>();
  readonly #wsHint: string;
  readonly #refusals = new Map<string, MethodNotSupportedError>();

  constructor(opts: MethodPolicyOptions) {
    const { methods } = opts;
    this.#standard = new Set(methods.standard);
    this.#native = new Set(Object.keys(methods.native));
    const extras = {} as Record<Tier, ReadonlySet<string>>;
    for (const [tier, list] of Object.entries(methods.planExtras) as Array<[Tier, string[]]>) extras[tier] = new Set(list);
    this.#extras = extras;
    this.#wsHint = opts.wsHint;
    const named: Array<[string, string[]]> = [['methods.standard', methods.standard], ...Object.entries(methods.planExtras).map(([tier, list]): [string, string[]] => [`methods.planExtras.${tier}`, list])];
    for (const [setting, list] of named) {
      for (const m of list) {
        // C24, C53: the catalogue refuses these whatever the config says; a config must not open them.
        if (refusedWhy(m) !== null) throw new ConfigError(`${setting}: ${m} can never be allowed (C24)`);
        this.#byLowerCase.set(m.toLowerCase(), m);
      }
    }
    for (const m of [...this.#native, ...SUBSCRIPTIONS]) this.#byLowerCase.set(m.toLowerCase(), m);
  }

  /**
   * null: allowed; else the -32601 error to answer, saying why (C24). `tier` is null on the
   * public endpoint (free rules).
   */
  check(method: string, nativeNetwork: boolean, tier: Tier | null, transport: Transport = 'http'): MethodNotSupportedError | null {
    if (this.#standard.has(method)) return null;
    const plan = tier ?? 'free';
    if (SUBSCRIPTIONS.has(method)) {
      if (transport === 'ws') return null;
    } else if (method.startsWith('nat_')) {
      if (nativeNetwork && this.#native.has(method)) return null;
    } else if (this.#extras[plan].has(method)) {
      return null;
    }
    // Refusals are memoised (bounded: callers can send arbitrary names); the error object is immutable.
    const memoKey = `${nativeNetwork ? 'n' : 'o'}${transport}:${method}`;
    let refusal = this.#refusals.get(memoKey);
    if (!refusal) {
      refusal = new MethodNotSupportedError(`Method ${method} ${this.#why(method, nativeNetwork)}`, { details: { method } });
      if (this.#refusals.size < 10_000) this.#refusals.set(memoKey, refusal);
    }
    return refusal;
  }

  #why(method: string, nativeNetwork: boolean): string {
    if (SUBSCRIPTIONS.has(method)) return `needs a WebSocket connection: use ${this.#wsHint}`;
    if (method.startsWith('nat_')) {
      if (!nativeNetwork) return 'exists only on the native networks (native-mainnet, native-testnet)';
      return 'is not a supported native method';
    }
    const refused = refusedWhy(method);
    if (refused !== null) return refused;
    if (planMayOpen(method)) {
      // A refusal names what would allow the call (the plans whose methods.planExtras list it).
      const plans = (Object.entries(this.#extras) as Array<[Tier, ReadonlySet<string>]>).filter(([, set]) => set.has(method)).map(([tier]) => tier);
      return plans.length > 0 ? `is not enabled for this plan; the ${plans.join(', ')} plan${plans.length > 1 ? 's' : ''} allow${plans.length > 1 ? '' : 's'} it` : 'is not enabled for this plan, nor for any other (methods.planExtras)';
    }
    const cased = this.#byLowerCase.get(method.toLowerCase());
    if (cased) return `is not supported: method names are case-sensitive (did you mean ${cased}?)`;
    return 'is not supported';
  }
}
