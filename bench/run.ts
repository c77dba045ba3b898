// `npm run bench -- [<scenario>] [options]`: the one entry point of bench/ (bench/README.md).
//   npm run bench                          the proxy scenario (the comparison with nginx and a bare proxy)
//   npm run bench -- <scenario> [options]  a scenario of bench/scenarios/; its figures go to bench/results/*.json
//   npm run bench -- <scenario> --help     its options
//   npm run bench -- --list                the scenarios, one line each
//   npm run bench -- compare A.json B.json B's rows against A's: medians, ratio, spread
//   npm run bench -- report                the newest result of each scenario into bench/README.md, between markers
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { cleanup, cleanupOnSignals, interrupted, removeStaleTempDirs, ROOT } from './lib/children.ts';
import { compare, renderMarkdown, type ResultFile, writeResults } from './lib/report/results.ts';
import { COMMON, type OptionSpecs, type Scenario } from './lib/scenario.ts';

const SCENARIOS = path.join(ROOT, 'bench', 'scenarios');
const RESULTS = path.join(ROOT, 'bench', 'results');
const README = path.join(ROOT, 'bench', 'README.md');
/** What `npm run bench` runs with no scenario named: today's comparison, so older commands keep working. */
const DEFAULT = 'proxy';

const scenarioNames = (): string[] =>
  readdirSync(SCENARIOS)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .sort();

async function load(name: string): Promise<Scenario> {
  if (!scenarioNames().includes(name)) throw new UsageError(`no scenario "${name}" (npm run bench -- --list)`);
  const mod = (await import(path.join(SCENARIOS, `${name}.ts`))) as { default?: Scenario };
  if (!mod.default) throw new Error(`bench/scenarios/${name}.ts has no default export (defineScenario)`);
  return mod.default;
}

class UsageError extends Error {}

const strip = (specs: OptionSpecs) => Object.fromEntries(Object.entries(specs).map(([k, { help: _help, ...o }]) => [k, o]));

function help(name: string, s: Scenario): string {
  const own = Object.entries(s.options).map(([k, o]) => `  --${k}${o.type === 'string' ? ' <value>' : ''}${o.default !== undefined ? ` (default ${String(o.default)})` : ''}${o.help ?? COMMON[k]?.help ? `: ${o.help ?? COMMON[k]?.help}` : ''}`);
  return [
    `npm run bench -- ${name}${s.positionals ? ` ${s.positionals}` : ''} [options]`,
    s.summary,
    '',
    'options:',
    ...own,
    ...(s.duration ? [`  --duration <time>: sets --${s.duration.option} (${s.duration.unit === 's' ? 'seconds' : 'minutes'}; 90s, 5m also work)`] : []),
    `  --json <file>: ${COMMON.json?.help}`,
  ].join('\n');
}

/** `--duration 90`, `90s`, `5m`, `1h` in the unit of the scenario's own option. */
function duration(text: string, unit: 's' | 'min'): string {
  const m = /^(\d+(?:\.\d+)?)(s|m|min|h)?$/.exec(text.trim());
  if (!m) throw new UsageError(`--duration: "${text}" is not a time (90, 90s, 5m, 1h)`);
  const seconds = Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' || m[2] === 'min' ? 60 : m[2] === 's' ? 1 : unit === 'min' ? 60 : 1);
  return String(unit === 'min' ? seconds / 60 : seconds);
}

async function runScenario(name: string, args: string[]): Promise<number> {
  const s = await load(name);
  const specs: OptionSpecs = { ...COMMON, ...s.options };
  let parsed;
  try {
    parsed = parseArgs({ args, options: strip(specs) as never, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${help(name, s)}`);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) {
    console.log(help(name, s));
    return 0;
  }
  for (const k of Object.keys(COMMON)) {
    if (values[k] === undefined || k in s.options || k === 'json' || k === 'help' || k === 'duration') continue;
    throw new UsageError(`the ${name} scenario takes no --${k} (npm run bench -- ${name} --help)`);
  }
  if (values.duration !== undefined) {
    if (!s.duration) throw new UsageError(`the ${name} scenario takes no --duration (npm run bench -- ${name} --help)`);
    values[s.duration.option] = duration(String(values.duration), s.duration.unit);
  }
  if (parsed.positionals.length > 0 && !s.positionals) throw new UsageError(`the ${name} scenario takes no arguments, only options: ${parsed.positionals.join(' ')}`);
  const json = values.json as string | undefined;
  delete values.json;
  delete values.help;
  delete values.duration;
  let code = 1;
  try {
    // A scenario resolves to its exit code, or sets process.exitCode as a script would.
    code = (await s.run({ opt: values as never, positionals: parsed.positionals })) ?? Number(process.exitCode ?? 0);
  } catch (err) {
    if (!interrupted()) console.error(`${name} failed: ${(err as Error).stack ?? String(err)}`);
  } finally {
    await cleanup();
  }
  if (interrupted()) return interrupted() === 'SIGTERM' ? 143 : 130;
  const file = writeResults(ROOT, name, values, code, json);
  console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
  return code;
}

const readResult = (file: string): ResultFile => JSON.parse(readFileSync(file, 'utf8')) as ResultFile;

/** The newest result of each scenario, between `<!-- results:NAME -->` and `<!-- /results:NAME -->` in bench/README.md. */
function report(): number {
  let text = readFileSync(README, 'utf8');
  const newest = new Map<string, { file: string; r: ResultFile }>();
  for (const f of readdirSync(RESULTS).filter((x) => x.endsWith('.json'))) {
    const file = path.join(RESULTS, f);
    const r = readResult(file);
    const had = newest.get(r.scenario);
    if (!had || had.r.date < r.date) newest.set(r.scenario, { file, r });
  }
  for (const name of scenarioNames()) {
    const open = `<!-- results:${name} -->`;
    const close = `<!-- /results:${name} -->`;
    const at = text.indexOf(open);
    const end = text.indexOf(close);
    const found = newest.get(name);
    if (at < 0 || end < at) {
      if (found) console.log(`${name}: no ${open} ... ${close} in bench/README.md; not rendered`);
      continue;
    }
    const body = found ? renderMarkdown(found.r, found.file) : `No stored result yet: \`npm run bench -- ${name}\`, then \`npm run bench -- report\`.`;
    text = `${text.slice(0, at + open.length)}\n${body}\n${text.slice(end)}`;
    console.log(`${name}: ${found ? path.basename(found.file) : 'no result'}`);
  }
  writeFileSync(README, text);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const first = argv[0];
  if (first === '--list' || first === 'list') {
    const names = scenarioNames();
    const width = Math.max(...names.map((n) => n.length));
    for (const n of names) console.log(`${n.padEnd(width)}  ${(await load(n)).summary}${n === DEFAULT ? ' (the default)' : ''}`);
    console.log(`\nnpm run bench -- <scenario> --help: its options. Also: compare A.json B.json; report.`);
    return 0;
  }
  if (first === 'compare') {
    const [a, b] = argv.slice(1);
    if (!a || !b || argv.length > 3) throw new UsageError('npm run bench -- compare <a.json> <b.json>');
    console.log(compare(readResult(a), readResult(b)).join('\n'));
    return 0;
  }
  if (first === 'report') {
    if (argv.length > 1) throw new UsageError('npm run bench -- report (takes no options)');
    return report();
  }
  // No scenario named (nothing, or options first): the proxy comparison, as before scenarios existed.
  if (first === undefined || first.startsWith('-')) return runScenario(DEFAULT, argv);
  return runScenario(first, argv.slice(1));
}

cleanupOnSignals();
removeStaleTempDirs();
let code = 1;
try {
  code = await main(process.argv.slice(2));
} catch (err) {
  console.error(err instanceof UsageError ? err.message : `bench failed: ${(err as Error).stack ?? String(err)}`);
  code = err instanceof UsageError ? 2 : 1;
}
process.exit(code);
