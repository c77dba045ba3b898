#!/usr/bin/env node
// Runs every test file under test/ with Node's test runner (TypeScript through tsx).
// Before that it says plainly which local services answer: suites that need PostgreSQL or
// Redis skip when theirs does not (and say so), unless REQUIRE_SERVICES=1, where they fail.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, staleness } from './build.mjs';
import { toRunAgain } from './test-file-report.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...findTests(full));
    else if (name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

function answers(url) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const socket = net.connect({ host: u.hostname, port: Number(u.port) }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
  });
}

const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const required = process.env.REQUIRE_SERVICES === '1';
for (const [name, url] of [['PostgreSQL', pgUrl], ['Redis', redisUrl]]) {
  const ok = await answers(url);
  const where = new URL(url).host;
  if (ok) console.log(`[test] ${name} answers at ${where}: its suites run.`);
  else if (required) console.log(`[test] ${name} does NOT answer at ${where} and REQUIRE_SERVICES=1: its suites will fail.`);
  else console.log(`[test] ${name} does not answer at ${where}: its suites are SKIPPED.`);
}

// `--unit`: the fast tier (npm run test:unit), the files that start nothing: no app, gateway
// process, chain, database (PGlite included), Redis, browser or child process (in-process servers of their own are
// fine). Told by what a file imports and calls, so a new file lands in its tier by itself.
const STARTERS = /support\/(app|process|anvil|hardhat|pg-cluster|redis-cluster|redis-server|services|scale-out|pglite-template|ws)\.ts|\/web\/support\.ts|scripts\/api-types\.ts|src\/devnet\/|src\/storage\/db\.ts|node:child_process|playwright/;
// A file's text with that of the test helpers it imports (relative imports inside test/, followed
// through), so a helper that starts something marks the files that use it.
const textWithHelpers = (f, seen = new Set()) => {
  if (seen.has(f)) return '';
  seen.add(f);
  const text = readFileSync(f, 'utf8');
  let all = text;
  for (const [, spec] of text.matchAll(/from '(\.{1,2}\/[^']+\.ts)'/g)) {
    const dep = path.resolve(path.dirname(f), spec);
    if (dep.startsWith(path.join(root, 'test') + path.sep) && existsSync(dep)) all += `\n${textWithHelpers(dep, seen)}`;
  }
  return all;
};
const startsNothing = (f) => !STARTERS.test(textWithHelpers(f));
const args = process.argv.slice(2);
const unit = args.includes('--unit');
// `--list`: print which files would run and how (slow, alone, in a group), and run nothing.
const list = args.includes('--list');
const filter = args.filter((a) => a !== '--unit' && a !== '--list');
// JUNCTION_TEST_DIR: another folder of test files (the runner's own tests, test/scripts/).
let files = findTests(process.env.JUNCTION_TEST_DIR ? path.resolve(process.env.JUNCTION_TEST_DIR) : path.join(root, 'test'));
if (filter.length) files = files.filter((f) => filter.some((part) => f.includes(part)));
if (unit) files = files.filter(startsNothing);
if (files.length === 0) {
  console.error('[test] no test files matched');
  process.exit(1);
}

// Two processes at a time (TEST_CONCURRENCY to change): on the 2-core machine that keeps both
// cores busy for almost the whole run.
const concurrency = process.env.TEST_CONCURRENCY ?? '2';

// Each process pays ~3 s of CPU to load tsx, the sources and their packages, as much as many test
// files take to run. So test files are run several to a process where that cannot change what
// they test: a file with hooks at its top level (`before`, `afterEach`, ...: they would apply
// to the other files' tests) runs alone, and so do the slow ones (a browser, the real process, a
// devnet), which start first so the two slots end together. The others go in groups of up to
// GROUP files, imported one after another by one process (each file's describes still run in its
// own order, and the time per file printed at the end is still per file).
const GROUP = 6;
// Slow: a file that starts a browser (told by its imports and its helpers', as --unit tells what
// starts nothing), or
// one that says so in a line of its own, `// slow: <why>` (a real gateway process under load, a
// devnet restarted, contracts deployed and settled), so a new file lands in its place by itself.
const BROWSER = /from 'playwright(-core)?'/;
const MARKED_SLOW = /^\/\/ slow: /m;
const relative = (f) => path.relative(root, f).split(path.sep).join('/');
// Alone too: a file that says so in a line of its own, `// alone: <why>` (e.g. it measures its
// process's memory, which another file's tests in the same process would grow).
const MARKED_ALONE = /^\/\/ alone: /m;
const topLevelHooks = (f) => {
  const text = readFileSync(f, 'utf8');
  return /^(before|after|beforeEach|afterEach)\(/m.test(text) || MARKED_ALONE.test(text);
};
const isSlow = (f) => {
  return MARKED_SLOW.test(readFileSync(f, 'utf8')) || BROWSER.test(textWithHelpers(f));
};
const slow = [];
const alone = [];
const grouped = [];
for (const f of files) {
  if (isSlow(f)) slow.push(f);
  else if (topLevelHooks(f)) alone.push(f);
  else grouped.push(f);
}
if (list) {
  const show = (label, part) => console.log(`${label.padEnd(6)} ${part.map(relative).join(' ')}`);
  for (const f of slow) show('slow', [f]);
  for (const f of alone.filter((f) => !slow.includes(f))) show('alone', [f]);
  for (let i = 0; i < grouped.length; i += GROUP) show(grouped.length - i === 1 ? 'alone' : 'group', grouped.slice(i, i + GROUP));
  console.log(`[test] ${files.length} file(s): ${slow.length} slow, ${alone.length} alone, ${grouped.length} in groups of up to ${GROUP}`);
  process.exit(0);
}
// Tests that start the gateway as its own process run the compiled dist/ (as `npm start` does):
// loading it takes half the CPU of loading src/ through tsx. Built here when src/ changed since.
const stale = staleness();
if (stale) {
  const started = Date.now();
  console.log(`[test] dist/ is ${stale}: building`);
  const { built } = await build();
  console.log(`[test] built ${built} file(s) in ${Date.now() - started} ms`);
}

const groupsDir = mkdtempSync(path.join(tmpdir(), 'junction-test-groups-'));
const groups = [];
// A group's entry file -> the test files it imports (to name them).
const members = new Map();
for (let i = 0; i < grouped.length; i += GROUP) {
  const part = grouped.slice(i, i + GROUP);
  if (part.length === 1) {
    alone.push(part[0]);
    continue;
  }
  const entry = path.join(groupsDir, `group-${i / GROUP + 1}-${relative(part[0]).replaceAll('/', '-').replace(/\.test\.ts$/, '')}.test.mjs`);
  writeFileSync(entry, part.map((f) => `await import(${JSON.stringify(pathToFileURL(f).href)});\n`).join(''));
  groups.push(entry);
  members.set(entry, part);
}
const runs = [...slow, ...groups, ...alone];
// The runner's usual output (spec in a terminal, TAP otherwise), and a report of each file's time
// and which files failed, and how (scripts/test-file-report.mjs): the slowest files are printed at
// the end, where the suite's time goes.
const reportsDir = mkdtempSync(path.join(tmpdir(), 'junction-test-reports-'));
const reportFile = (n) => path.join(reportsDir, `report-${n}.json`);
const reporters = (n) => [
  `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`,
  '--test-reporter-destination=stdout',
  `--test-reporter=${path.join(root, 'scripts/test-file-report.mjs')}`,
  `--test-reporter-destination=${reportFile(n)}`,
];
const runOnce = (entries, n) =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--import', pathToFileURL(path.join(root, 'test/support/day-guard.ts')).href, '--test', `--test-concurrency=${concurrency}`, ...reporters(n), ...entries], {
      cwd: root,
      stdio: 'inherit',
      env: { ...process.env, NODE_ENV: 'test' },
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
const readReport = (n) => {
  try {
    return JSON.parse(readFileSync(reportFile(n), 'utf8'));
  } catch {
    return undefined; // none written: the runner itself stopped
  }
};
const started = Date.now();
let code = await runOnce(runs, 1);
// A file that failed only because V8 aborted its process on the JIT-page check (a runtime fault
// under PGlite's WebAssembly churn, nodejs/node#64500; docs/development.md) is run once more,
// said loudly. Any other failure, or the abort again, is the verdict.
const first = readReport(1);
const again = code === 0 || !first ? [] : toRunAgain(first).filter((f) => runs.includes(f));
if (again.length) {
  const named = (f) => (members.get(f) ?? [f]).map(relative).join(', ');
  for (const f of again) console.log(`[test] the process of ${named(f)} was ended by V8's "${first.aborted[f]}" abort, not by a test; running it once more`);
  code = await runOnce(again, 2);
  console.log(`[test] the file(s) run once more ${code === 0 ? 'passed' : 'failed again'}`);
}
rmSync(groupsDir, { recursive: true, force: true });
if (first) {
  console.log(`[test] ${files.length} file(s) in ${runs.length} processes, ${Math.round((Date.now() - started) / 1000)} s (${concurrency} at a time); the slowest files:`);
  for (const [file, ms] of first.times.slice(0, 10)) console.log(`[test] ${(ms / 1000).toFixed(1).padStart(7)} s  ${relative(file)}`);
  // Last, where a log's tail is read: what failed, by file and name, with its error's first line.
  const failures = (again.length ? readReport(2)?.failures : first.failures) ?? [];
  if (failures.length) console.log(`[test] ${failures.length} failed test(s):`);
  for (const f of failures) {
    console.log(`[test]   ${relative(f.file)}: ${f.name}: ${f.message}`);
    if (f.tail?.length) console.log(`[test]     ...and its message ends:\n${f.tail.map((l) => `[test]     | ${l}`).join('\n')}`);
  }
}
rmSync(reportsDir, { recursive: true, force: true });
process.exit(code);
