// Memory reports for the benchmarks and the soak (BENCH_GC=1): collection and heap snapshots on SIGUSR2.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8';

/**
 * For `npm run bench:ws` and `npm run soak` only: with `BENCH_GC=1` in the environment and Node
 * started with `--expose-gc`, SIGUSR2 runs a full collection and prints the process's memory, with
 * `extra()`, as one line on stderr (`bench-memory {...}`). With `BENCH_HEAP_SNAPSHOT_DIR` too, the
 * memory line is followed by a heap snapshot in that folder when the signal arrives while the file
 * `<dir>/next` exists (the soak creates it for the samples it wants to compare; `bench/heap-diff.ts`
 * compares two). Otherwise nothing is installed: production never starts with either.
 */
export function installBenchGc(env: NodeJS.ProcessEnv, extra: () => Record<string, unknown>): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (env.BENCH_GC !== '1' || typeof gc !== 'function') return;
  const snapshotDir = env.BENCH_HEAP_SNAPSHOT_DIR;
  let snapshots = 0;
  process.on('SIGUSR2', () => {
    // Twice: objects with finalizers (sockets, weak references) go in the second pass.
    gc();
    gc();
    const m = process.memoryUsage();
    let snapshot: string | undefined;
    if (snapshotDir && existsSync(path.join(snapshotDir, 'next'))) {
      rmSync(path.join(snapshotDir, 'next'));
      snapshot = writeHeapSnapshot(path.join(snapshotDir, `${String(++snapshots).padStart(2, '0')}.heapsnapshot`));
    }
    process.stderr.write(
      `bench-memory ${JSON.stringify({ rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, mallocHeap: mallocHeapBytes(), newSpace: newSpaceBytes(), ...extra(), ...(snapshot ? { snapshot } : {}) })}\n`,
    );
  });
}

/**
 * The resident bytes of the process's `[heap]` mapping (Linux): where the C library's allocator
 * keeps the main thread's small native allocations (Node's and libuv's per-socket structures),
 * apart from the JS heap's own pages. 0 where /proc is not there.
 */
function mallocHeapBytes(): number {
  try {
    const smaps = readFileSync('/proc/self/smaps', 'utf8');
    const at = smaps.indexOf(' [heap]\n');
    if (at === -1) return 0;
    const rss = /\nRss:\s+(\d+) kB/.exec(smaps.slice(at));
    return rss ? Number(rss[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * The resident bytes of the JS heap's young generation. A full collection empties it but keeps its
 * pages: it grows under a burst of allocation (connections set up at once) to at most twice
 * `--max-semi-space-size`, and V8 gives the pages back once the allocation has calmed down.
 */
function newSpaceBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.physical_space_size ?? 0;
}
