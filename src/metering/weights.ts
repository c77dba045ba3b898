// Compute units per method (C10).
import type { MethodsConfig } from '../config/schema.ts';
import { methodFacts } from '../methods/catalogue.ts';

/**
 * Compute units per method (C10): `methods.computeUnits` in config where it names the method,
 * else the method catalogue's default for it, else the config's `default`.
 */
export class ComputeUnits {
  readonly #table: ReadonlyMap<string, number>;
  readonly #default: number;
  constructor(computeUnits: MethodsConfig['computeUnits']) {
    const { default: dflt, ...rest } = computeUnits;
    this.#default = dflt ?? 1;
    this.#table = new Map(Object.entries(rest));
  }
  of(method: string): number {
    return this.#table.get(method) ?? methodFacts(method)?.cu ?? this.#default;
  }
}
