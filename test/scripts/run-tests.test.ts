// The test runner (scripts/run-tests.mjs) runs once more a file whose process V8 aborted on its
// JIT-page check (nodejs/node#64500, a runtime fault under PGlite's WebAssembly churn), and only
// such a file: any other failure, or the abort again, fails the run. Each case runs the real
// runner on test files written to a temporary folder (JUNCTION_TEST_DIR).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
type Report = { times: [string, number][]; failed: string[]; failures: { file: string; name: string; message: string; tail: string[] }[]; aborted: Record<string, string> };
type Event = { type: string; data: Record<string, unknown> };
// @ts-expect-error: a plain ES module script without type declarations
const { default: fileReport, toRunAgain } = (await import('../../scripts/test-file-report.mjs')) as {
  default: (source: AsyncIterable<Event>) => AsyncIterable<string>;
  toRunAgain: (report: Partial<Report>) => string[];
};
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** What V8 writes to stderr as it aborts on the check, then the signal it ends the process with. */
const ABORT = `process.stderr.write('#\\n# Fatal error in , line 0\\n# Check failed: jit_page_->allocations_.erase(addr) == 1.\\n#\\n'); process.kill(process.pid, 'SIGTRAP'); await new Promise((r) => setTimeout(r, 10_000));`;

/** Writes the files into a new folder and runs the runner on it; its exit code and output. */
async function runner(files: Record<string, string>): Promise<{ code: number | null; out: string; dir: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-runner-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text.replaceAll('DIR', JSON.stringify(dir)));
  // Without NODE_TEST_CONTEXT, which makes a `node --test` under this one report to it instead.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const child = spawn(process.execPath, [path.join(root, 'scripts/run-tests.mjs')], {
    cwd: root,
    env: { ...env, JUNCTION_TEST_DIR: dir, TEST_CONCURRENCY: '2' },
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, out, dir };
}

const passing = `import { it } from 'node:test';\nit('passes', () => {});\n`;
// Aborts the first time it runs (leaving a mark in the folder), passes after.
const abortsOnce = `import { existsSync, writeFileSync } from 'node:fs';\nimport { it } from 'node:test';\nit('runs', async () => {\n  const mark = DIR + '/ran';\n  if (!existsSync(mark)) { writeFileSync(mark, ''); ${ABORT} }\n});\n`;
const abortsAlways = `import { it } from 'node:test';\nit('runs', async () => { ${ABORT} });\n`;
// In a process of its own (`// alone:`), so that its failure is reported whatever the other file's process does.
const failing = `// alone: its failure must reach the runner apart from the aborted process\nimport assert from 'node:assert/strict';\nimport { it } from 'node:test';\nit('fails', () => { assert.equal(1, 2); });\n`;
const trapped = `import { it } from 'node:test';\nit('runs', async () => { process.kill(process.pid, 'SIGTRAP'); await new Promise((r) => setTimeout(r, 10_000)); });\n`;

describe('the runner and a process V8 aborted on its JIT-page check', () => {
  it('runs that file once more, says so, and passes when it passes', async () => {
    const { code, out, dir } = await runner({ 'a.test.ts': passing, 'b.test.ts': abortsOnce });
    assert.ok(existsSync(path.join(dir, 'ran')));
    assert.match(out, /the process of \S*a\.test\.ts, \S*b\.test\.ts was ended by V8's "Check failed: jit_page_->allocations_\.erase\(addr\)" abort, not by a test; running it once more/);
    assert.match(out, /the file\(s\) run once more passed/);
    assert.equal(code, 0);
  });

  it('fails when the file aborts again', async () => {
    const { code, out } = await runner({ 'a.test.ts': passing, 'b.test.ts': abortsAlways });
    assert.match(out, /running it once more/);
    assert.match(out, /the file\(s\) run once more failed again/);
    assert.equal(code, 1);
  });

  it('runs nothing again when another file failed a test, or a process ended without the check', async () => {
    for (const files of [
      { 'a.test.ts': failing, 'b.test.ts': abortsOnce },
      { 'a.test.ts': passing, 'b.test.ts': trapped },
    ]) {
      const { code, out } = await runner(files);
      assert.doesNotMatch(out, /once more/);
      assert.equal(code, 1);
    }
  });

  it('ends its output naming the failed test, its file and the first line of its error, then the last lines of an error of several', async () => {
    const { code, out } = await runner({ 'a.test.ts': failing, 'b.test.ts': passing });
    assert.equal(code, 1);
    const lines = out.trimEnd().split('\n');
    const at = lines.indexOf('[test] 1 failed test(s):');
    assert.ok(at > 0, out);
    assert.match(lines[at + 1]!, /^\[test\] {3}\S*a\.test\.ts: fails: Expected values to be strictly equal:$/);
    // Where a process's output, given as an assertion's message, says how the process ended.
    assert.equal(lines[at + 2], '[test]     ...and its message ends:');
    assert.equal(lines.at(-1), '[test]     | 1 !== 2');
  });
});

describe('the file reporter: times, failures and aborts', () => {
  async function report(events: Event[]): Promise<Report> {
    async function* source() {
      yield* events;
    }
    let text = '';
    for await (const chunk of fileReport(source())) text += chunk;
    return JSON.parse(text) as Report;
  }

  it('gives the time of each file, the failed files and the check a file aborted on, with paths made absolute', async () => {
    const got = await report([
      { type: 'test:pass', data: { file: '/x/a.test.ts', nesting: 0, details: { duration_ms: 20 } } },
      { type: 'test:pass', data: { file: '/x/a.test.ts', nesting: 1, details: { duration_ms: 15 } } },
      { type: 'test:pass', data: { file: '/x/b.test.ts', nesting: 0, details: { duration_ms: 30 } } },
      { type: 'test:fail', data: { file: '/x/a.test.ts', name: 'inner', nesting: 1, details: { duration_ms: 5, error: { failureType: 'testCodeFailure', cause: { message: 'one\ntwo' } } } } },
      { type: 'test:fail', data: { file: '/x/a.test.ts', name: 'outer', nesting: 0, details: { duration_ms: 25, error: { failureType: 'subtestsFailed' } } } },
      { type: 'test:stderr', data: { file: 'g.test.mjs', message: '# Check failed: jit_page.has_value().\n' } },
      { type: 'test:fail', data: { file: path.resolve('g.test.mjs'), name: 'g', nesting: 0, details: { duration_ms: 1, error: { message: 'aborted' } } } },
      { type: 'test:stderr', data: { file: '/x/c.test.ts', message: 'Check failed: something else\n' } },
    ]);
    const g = path.resolve('g.test.mjs');
    assert.deepEqual(got, {
      times: [
        ['/x/a.test.ts', 45],
        ['/x/b.test.ts', 30],
        [g, 1],
      ],
      failed: ['/x/a.test.ts', g],
      // The failed test with none failed inside it, by the first line of its error and the rest's last lines; not its suite.
      failures: [
        { file: '/x/a.test.ts', name: 'inner', message: 'one', tail: ['two'] },
        { file: g, name: 'g', message: 'aborted', tail: [] },
      ],
      aborted: { [g]: 'Check failed: jit_page.has_value().' },
    });
    assert.deepEqual(toRunAgain({ ...got, failed: [g] }), [g]);
    assert.deepEqual(toRunAgain(got), []);
    assert.deepEqual(toRunAgain({ failed: [], aborted: got.aborted }), []);
  });
});
