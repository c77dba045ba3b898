/**
 * For `npm run bench:ws` only: with `BENCH_GC=1` in the environment and Node started with
 * `--expose-gc`, SIGUSR2 runs a full collection and prints the process's memory, with `extra()`,
 * as one line on stderr (`bench-memory {...}`). Otherwise nothing is installed: production never
 * starts with either.
 */
export function installBenchGc(env: NodeJS.ProcessEnv, extra: () => Record<string, unknown>): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (env.BENCH_GC !== '1' || typeof gc !== 'function') return;
  process.on('SIGUSR2', () => {
    // Twice: objects with finalizers (sockets, weak references) go in the second pass.
    gc();
    gc();
    const m = process.memoryUsage();
    process.stderr.write(`bench-memory ${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, ...extra() })}\n`);
  });
}
