// What a scenario is to the runner (bench/run.ts): a name, a line for `--list`, the options it
// takes and a run function. One file per scenario in bench/scenarios/ default-exports one
// `defineScenario({...})`; the runner finds it by its file name (bench/README.md, "Adding a scenario").

/** One option, as node:util parseArgs takes it, with the line `--help` prints. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  default?: string | boolean;
  help?: string;
}
export type OptionSpecs = Record<string, OptionSpec>;

/** The parsed values of `O`: a string option with a default is always a string. */
export type Values<O extends OptionSpecs> = {
  -readonly [K in keyof O]: O[K]['type'] extends 'boolean' ? boolean : O[K] extends { default: string } ? string : string | undefined;
};

/**
 * The options every scenario shares by name and meaning; a scenario takes one by declaring it in its
 * own `options` (with its default and, if it must, its own help), and the runner refuses one it does
 * not take. `--json` is the runner's own and always accepted.
 */
export const COMMON: OptionSpecs = {
  rounds: { type: 'string', help: 'rounds (repetitions) to take the median of' },
  duration: { type: 'string', help: 'measured time per run: seconds, or 90s, 5m; goes to the option the scenario names' },
  json: { type: 'string', help: 'where to write the results (default bench/results/<scenario>-<date>-<sha>.json)' },
  only: { type: 'string', help: 'only the rows (targets, cases) whose label contains this text' },
  baseline: { type: 'string', help: 'another checkout (its dist/ built): its gateway runs beside this one and both land in one JSON' },
  table: { type: 'string', help: 'on or off: the full table before the rounds' },
  help: { type: 'boolean', help: 'this scenario\'s options' },
};

export interface RunContext<O extends OptionSpecs> {
  /** Every option of the scenario, parsed once by the runner. */
  opt: Values<O>;
  /** Arguments that are not options (a scenario that takes some says so in `positionals`). */
  positionals: string[];
}

export interface Scenario<O extends OptionSpecs = OptionSpecs> {
  /** One line for `npm run bench -- --list`. */
  summary: string;
  /** What the positionals are, for `--help`, e.g. "A.heapsnapshot B.heapsnapshot"; none are accepted without it. */
  positionals?: string;
  options: O;
  /** The option `--duration` sets, and its unit: e.g. { option: 'seconds', unit: 's' }. */
  duration?: { option: keyof O & string; unit: 's' | 'min' };
  /** Runs it, printing as it goes; figures go to bench/lib/report/results.ts's `record`. Resolves to the exit code. */
  run(ctx: RunContext<O>): Promise<number | void>;
}

export function defineScenario<const O extends OptionSpecs>(s: Scenario<O>): Scenario<O> {
  return s;
}
