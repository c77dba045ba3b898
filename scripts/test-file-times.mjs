// A reporter for Node's test runner used by scripts/run-tests.mjs: the time of each test file
// (the sum of its top-level tests), slowest first, one line each.
export default async function* fileTimes(source) {
  const perFile = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) {
      const file = event.data.file ?? '?';
      perFile.set(file, (perFile.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
    }
  }
  for (const [file, ms] of [...perFile].sort((a, b) => b[1] - a[1])) yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`;
}
