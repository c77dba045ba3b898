import type { Config } from '../config/schema.ts';

/** Compute units per method (C10): the table in config; methods not listed cost `default`. */
export class ComputeUnits {
  readonly #table: ReadonlyMap<string, number>;
  readonly #default: number;
  constructor(config: Config) {
    const { default: dflt, ...rest } = config.methods.computeUnits;
    this.#default = dflt ?? 1;
    this.#table = new Map(Object.entries(rest));
  }
  of(method: string): number {
    return this.#table.get(method) ?? this.#default;
  }
}
