// A reporter for Node's test runner used by scripts/run-tests.mjs, one JSON line at the end:
// - `times`: each test file's time (the sum of its top-level tests), slowest first;
// - `failed`: the files with a failed top-level test;
// - `failures`: each failed test that has no failed test inside it: its file, its name, the
//   first line of its error and, for an error of several lines (a process's output), its last
//   lines, so the end of a long log names what failed and shows why;
// - `aborted`: the files whose process V8 ended on a check of its JIT-page registry (the line
//   "Check failed: jit_page..." on the file's stderr), a fault of the runtime under PGlite's
//   WebAssembly churn (nodejs/node#64500), not of a test; each with the check's line.
import path from 'node:path';

/** The V8 check a JIT-page registry desync fails (ThreadIsolation, Node 22-24), on stderr. */
export const JIT_PAGE_ABORT = /Check failed: jit_page\S*/;

/** Lines kept from the end of a failed test's message of several lines. */
const TAIL_LINES = 12;

export default async function* fileReport(source) {
  const perFile = new Map();
  const failed = new Set();
  const failures = [];
  const aborted = {};
  for await (const event of source) {
    // Absolute: Node 24 names the file of a stderr line as it was given, relative to the cwd.
    const file = event.data?.file ? path.resolve(event.data.file) : undefined;
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) {
      perFile.set(file ?? '?', (perFile.get(file ?? '?') ?? 0) + (event.data.details?.duration_ms ?? 0));
      if (event.type === 'test:fail' && file) failed.add(file);
    }
    // Node reports a test's failure after those of its subtests: a suite that failed only through
    // them (its error is 'subtestsFailed') is not listed again.
    if (event.type === 'test:fail' && event.data.details?.error?.failureType !== 'subtestsFailed') {
      const error = event.data.details?.error;
      const lines = String(error?.cause?.message ?? error?.message ?? error ?? '').split('\n');
      while (lines.length > 1 && (lines.at(-1) ?? '').trim() === '') lines.pop();
      const message = (lines[0] ?? '').slice(0, 300);
      // The end of a message of several lines: where a process's output says how it ended.
      const tail = lines.length > 1 ? lines.slice(Math.max(1, lines.length - TAIL_LINES)).map((l) => l.slice(0, 400)) : [];
      failures.push({ file: file ?? '?', name: event.data.name, message, tail });
    }
    if (event.type === 'test:stderr' && file) {
      const line = JIT_PAGE_ABORT.exec(event.data.message ?? '');
      if (line) aborted[file] ??= line[0];
    }
  }
  const times = [...perFile].sort((a, b) => b[1] - a[1]);
  yield `${JSON.stringify({ times, failed: [...failed], failures, aborted })}\n`;
}

/**
 * The files to run once more: those that failed, when every one of them was ended by the V8
 * abort above. A failure of any other kind, or none, gives none (the run's verdict stands).
 */
export function toRunAgain(report) {
  const failed = report.failed ?? [];
  if (failed.length === 0) return [];
  return failed.every((f) => report.aborted?.[f]) ? failed : [];
}
