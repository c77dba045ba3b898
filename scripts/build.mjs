#!/usr/bin/env node
// Compiles src/ into dist/, which `npm start` runs (scripts/start.mjs).
//
// Each .ts file is compiled on its own by the TypeScript compiler's transpiler with the options
// of tsconfig.build.json (imports' `.ts` become `.js`): the same JavaScript as
// `tsc -p tsconfig.build.json --noCheck`, in a few seconds instead of tens, and only the files
// that changed are redone (files are independent under `isolatedModules`). Type errors are
// `npm run typecheck`'s business, not the build's. Every other file under src/ (SQL migrations
// and their journal, ...) is copied, so code that finds files next to itself through
// `import.meta.url` finds them in dist/ too. dist/.build.json records what was built from what.
//
// It also builds the dashboard (C43) with Vite from web/ into web/dist/ when that is missing or
// its sources (or the versions of Vite, Preact, Chart.js, Pico) changed since the last build;
// web/dist/.build.json records the hash of those inputs.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = path.join(ROOT, 'dist');
const SRC = path.join(ROOT, 'src');
const STAMP = path.join(DIST, '.build.json');
/** Whatever changes the output of every file: a change to one of these rebuilds everything. */
const INPUTS = ['tsconfig.json', 'tsconfig.build.json', 'node_modules/typescript/package.json', 'scripts/build.mjs'];

const hash = (data) => createHash('sha1').update(data).digest('hex');

/** Paths (with `/`) of every file under `dir`, relative to it. */
function walk(dir, prefix = '') {
  const out = [];
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(path.join(dir, e.name), rel));
    else if (e.isFile()) out.push(rel);
  }
  return out;
}

const isCode = (rel) => rel.endsWith('.ts') && !rel.endsWith('.d.ts');
const jsOf = (rel) => `${rel.slice(0, -3)}.js`;
const outputsOf = (rel) => (isCode(rel) ? [jsOf(rel), `${jsOf(rel)}.map`] : rel.endsWith('.d.ts') ? [] : [rel]);

function inputsKey() {
  const h = createHash('sha1');
  for (const f of INPUTS) {
    h.update(`${f}\0`);
    try {
      h.update(readFileSync(path.join(ROOT, f)));
    } catch {
      h.update('(none)');
    }
  }
  return h.digest('hex');
}

/** What a build would do: which sources to (re)build and which dist files to drop. */
function plan() {
  const key = inputsKey();
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(STAMP, 'utf8'));
  } catch {
    stamp = undefined;
  }
  const full = !stamp || stamp.key !== key;
  const built = full ? {} : stamp.files;
  const sources = {};
  const todo = [];
  for (const rel of walk(SRC)) {
    sources[rel] = hash(readFileSync(path.join(SRC, rel)));
    const present = outputsOf(rel).every((o) => {
      try {
        return statSync(path.join(DIST, o)).isFile();
      } catch {
        return false;
      }
    });
    if (built[rel] !== sources[rel] || !present) todo.push(rel);
  }
  // Outputs no source makes any more (a deleted file, or anything left by other build options).
  const expected = new Set(['.build.json', ...Object.keys(sources).flatMap(outputsOf)]);
  const stray = walk(DIST).filter((rel) => !expected.has(rel) && !rel.endsWith('.tmp'));
  return { key, full, sources, todo, stray };
}

const WEB = path.join(ROOT, 'web');
export const WEB_DIST = path.join(WEB, 'dist');
const WEB_STAMP = path.join(WEB_DIST, '.build.json');
/** Packages whose version changes the dashboard's output. */
const WEB_PACKAGES = ['vite', 'preact', 'chart.js', '@picocss/pico'];

/** Hash of everything the dashboard is built from (web/ but its output and notes, and the packages' versions). */
function webKey() {
  const h = createHash('sha1');
  const files = walk(WEB).filter((rel) => !rel.startsWith('dist/') && !rel.startsWith('.dist-') && !rel.endsWith('.md')).sort();
  for (const rel of files) h.update(`${rel}\0`).update(readFileSync(path.join(WEB, rel))).update('\0');
  for (const name of WEB_PACKAGES) {
    try {
      h.update(`${name}@${JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version}\0`);
    } catch {
      h.update(`${name}@none\0`);
    }
  }
  return h.digest('hex');
}

/** Why web/dist/ is out of date, or undefined when it is current (or there is no web/ to build). */
export function webStaleness() {
  try {
    statSync(path.join(WEB, 'index.html'));
  } catch {
    return undefined;
  }
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(WEB_STAMP, 'utf8'));
  } catch {
    return 'missing the dashboard (web/dist/)';
  }
  return stamp.key === webKey() ? undefined : 'older than the dashboard sources (web/)';
}

/**
 * Builds the dashboard with Vite into a fresh folder, then puts it in place of web/dist/. Resolves
 * with false when there was nothing to do, or when Vite is not installed (said on stderr: the
 * gateway runs without its dashboard). Throws when a source does not compile.
 */
export async function buildWeb() {
  if (!webStaleness()) return false;
  const key = webKey();
  let vite;
  try {
    vite = await import('vite');
  } catch {
    process.stderr.write('[build] Vite is not installed: the dashboard (web/) is not built; `npm install` brings it\n');
    return false;
  }
  const { default: config } = await import(pathToFileURL(path.join(WEB, 'vite.config.mjs')).href);
  const tmp = path.join(WEB, `.dist-${process.pid}`);
  try {
    await vite.build({ ...config, configFile: false, build: { ...config.build, outDir: tmp } });
    writeFileSync(path.join(tmp, '.build.json'), `${JSON.stringify({ key })}\n`);
    // Another build may have finished first: the last one in place wins, both are the same.
    rmSync(WEB_DIST, { recursive: true, force: true });
    try {
      renameSync(tmp, WEB_DIST);
    } catch (err) {
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return true;
}

/** Why dist/ (or the dashboard in web/dist/) is out of date, or undefined when both are current. */
export function staleness() {
  const p = plan();
  if (p.full) return 'missing or built with other options';
  if (p.todo.length) return `older than src/${p.todo[0]}${p.todo.length > 1 ? ` and ${p.todo.length - 1} more` : ''}`;
  if (p.stray.length) return `holding dist/${p.stray[0]}, which no source makes`;
  return webStaleness();
}

function writeAtomic(file, data) {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, data);
  renameSync(tmp, file);
}

/**
 * Brings dist/ up to date with src/. Resolves with how many sources were built and how many stray
 * files removed; throws (naming file and line) when a source does not parse.
 */
export async function build() {
  const gateway = await buildGateway();
  const started = Date.now();
  if (await buildWeb()) process.stderr.write(`[build] web/dist/: the dashboard built in ${Date.now() - started} ms\n`);
  return gateway;
}

async function buildGateway() {
  const p = plan();
  if (!p.full && p.todo.length === 0 && p.stray.length === 0) return { built: 0, removed: 0 };
  // Files are replaced in place (never dist/ removed whole): a gateway already running from dist/,
  // or another start building at the same moment, never finds a file missing.
  const { default: ts } = await import('typescript');
  const parsed = ts.getParsedCommandLineOfConfigFile(path.join(ROOT, 'tsconfig.build.json'), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(`tsconfig.build.json: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    },
  });
  if (parsed.errors.length) {
    throw new Error(`tsconfig.build.json: ${ts.flattenDiagnosticMessageText(parsed.errors[0].messageText, '\n')}`);
  }
  // package.json says "type": "module": every .ts file is an ES module.
  const compilerOptions = {
    ...parsed.options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
  };
  const errors = [];
  for (const rel of p.todo) {
    const from = path.join(SRC, rel);
    if (!isCode(rel)) {
      if (!rel.endsWith('.d.ts')) writeAtomic(path.join(DIST, rel), readFileSync(from));
      continue;
    }
    const out = ts.transpileModule(readFileSync(from, 'utf8'), { compilerOptions, fileName: from, reportDiagnostics: true });
    for (const d of out.diagnostics ?? []) {
      if (d.category !== ts.DiagnosticCategory.Error) continue;
      const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      errors.push(`src/${rel}${where ? `:${where.line + 1}:${where.character + 1}` : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    }
    const js = path.join(DIST, jsOf(rel));
    const map = JSON.parse(out.sourceMapText);
    map.sources = [path.relative(path.dirname(js), from).split(path.sep).join('/')];
    writeAtomic(js, out.outputText);
    writeAtomic(`${js}.map`, JSON.stringify(map));
  }
  if (errors.length) {
    // A half-built dist/ is not recorded as built: the next start tries again.
    rmSync(STAMP, { force: true });
    throw new Error(`build failed:\n${errors.join('\n')}`);
  }
  for (const rel of p.stray) rmSync(path.join(DIST, rel), { force: true });
  writeAtomic(STAMP, `${JSON.stringify({ key: p.key, files: p.sources }, null, 1)}\n`);
  return { built: p.todo.length, removed: p.stray.length };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  try {
    const { built, removed } = await build();
    console.log(
      built || removed
        ? `[build] dist/: built ${built} file(s) from src/${removed ? `, removed ${removed}` : ''} in ${Date.now() - started} ms`
        : '[build] dist/ is up to date (and web/dist/)',
    );
  } catch (err) {
    console.error(`[build] ${err.message}`);
    process.exit(1);
  }
}
