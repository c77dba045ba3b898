import os from 'node:os';
import type { LoopDelay } from '../measures/event-loop.ts';
import type { LoadResult } from '../load/load.ts';

/** One measured line of the table. */
export interface Row extends LoadResult {
  target: string;
  connections: number;
  /** The gateway's event-loop delay during the run (bench/lib/measures/event-loop.ts); null for other targets. */
  loop: LoopDelay | null;
  /**
   * CPU used during the measured run, in % of one core: the proxy under test, the static
   * upstream, the load generator, and processes outside the bench (other work on the machine).
   */
  cpu: { proxy: number | null; upstream: number; loadgen: number; other: number };
}

export function machineLine(loadGenerator: string): string {
  const cpus = os.cpus();
  return [
    `machine: ${cpus.length} cores (${cpus[0]?.model.trim() ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ` +
      `${os.platform()} ${os.release()}, node ${process.version}`,
    `load generator: ${loadGenerator}; it runs on the same ${cpus.length} cores as the upstream and the target, ` +
      'so every figure is for a shared machine, not a dedicated proxy host',
  ].join('\n');
}

const fixed = (n: number | null, digits: number) => (n === null || Number.isNaN(n) ? '-' : n.toFixed(digits));

export function table(rows: Row[]): string {
  const head = ['target', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'loop p99', 'loop max', 'errors', 'non-2xx', 'CPU proxy', 'upstream', 'loadgen', 'other'];
  const body = rows.map((r) => [
    r.target,
    String(r.connections),
    fixed(r.rps, 0),
    fixed(r.p50Ms, 3),
    fixed(r.p99Ms, 3),
    fixed(r.p999Ms, 3),
    r.loop ? fixed(r.loop.p99Ms, 1) : '-',
    r.loop ? fixed(r.loop.maxMs, 1) : '-',
    String(r.errors),
    String(r.non2xx),
    r.cpu.proxy === null ? '-' : `${fixed(r.cpu.proxy, 0)}%`,
    `${fixed(r.cpu.upstream, 0)}%`,
    `${fixed(r.cpu.loadgen, 0)}%`,
    `${fixed(r.cpu.other, 0)}%`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [
    line(head),
    line(widths.map((w) => '-'.repeat(w))),
    ...body.map(line),
    `CPU columns: % of one core during the measured run (${os.cpus().length} cores = ${os.cpus().length * 100}%); ` +
      '"other" is work outside the bench (and unattributed kernel time).\n' +
      '"loop p99" and "loop max": the gateway\'s event-loop delay during the run, in ms, as it measures it itself (monitorEventLoopDelay, bench/lib/measures/event-loop.ts).',
  ].join('\n');
}

/** The two targets: gateway throughput >= 40% of nginx's, and < 1 ms added at p50 under moderate load. */
export function verdicts(
  rows: Row[],
  opts: {
    nginx: string;
    direct: string;
    bare: string;
    /** The fixed answer with the gateway's headers: the ceiling of a cached answer in Node.js. */
    fixed: string;
    /** Gateway rows compared with the bare Node proxy: pass-through >= 1.0 of it, cached answers >= 1.2. */
    kinds: Record<string, 'pass-through' | 'cached'>;
    gateways: string[];
    connections: number;
    moderate: number;
  },
): string {
  const find = (target: string, conns: number) => rows.find((r) => r.target === target && r.connections === conns);
  const out: string[] = [];
  const nginx = find(opts.nginx, opts.connections);
  const direct = find(opts.direct, opts.moderate);
  const bare = find(opts.bare, opts.connections);
  const fixed = find(opts.fixed, opts.connections);
  for (const g of opts.gateways) {
    const loaded = find(g, opts.connections);
    const moderate = find(g, opts.moderate);
    const kind = opts.kinds[g];
    if (loaded && bare && kind) {
      const ratio = loaded.rps / bare.rps;
      const target = kind === 'cached' ? 1.2 : 1.0;
      out.push(`${g}: ${ratio.toFixed(2)}x the bare Node proxy at ${opts.connections} connections (${kind}, target >= ${target}): ${ratio >= target ? 'OK' : 'BELOW'}`);
    }
    if (loaded && bare && g !== opts.bare) {
      // The tail goal: p99 at most 1.2x the bare proxy's.
      const ratio = loaded.p99Ms / bare.p99Ms;
      out.push(
        `${g}: p99 ${loaded.p99Ms.toFixed(2)} ms (p99.9 ${loaded.p999Ms.toFixed(2)}), ${ratio.toFixed(2)}x the bare Node proxy's ${bare.p99Ms.toFixed(2)} ms (p99.9 ${bare.p999Ms.toFixed(2)}) ` +
          `at ${opts.connections} connections (target <= 1.2): ${ratio <= 1.2 ? 'OK' : 'ABOVE'}`,
      );
    }
    if (loaded && nginx && kind === 'cached') {
      const ratio = loaded.rps / nginx.rps;
      out.push(`${g}: ${ratio.toFixed(2)}x nginx proxy_pass at ${opts.connections} connections (cached, target >= 1.5): ${ratio >= 1.5 ? 'OK' : 'BELOW'}`);
    }
    if (loaded && fixed && kind === 'cached') {
      out.push(`${g}: ${((loaded.rps / fixed.rps) * 100).toFixed(0)}% of the fixed answer with the gateway's headers (the ceiling in Node.js) at ${opts.connections} connections`);
    }
    if (loaded && nginx) {
      const ratio = (loaded.rps / nginx.rps) * 100;
      out.push(`${g}: throughput ${ratio.toFixed(0)}% of nginx at ${opts.connections} connections (target >= 40%): ${ratio >= 40 ? 'OK' : 'BELOW'}`);
    } else if (loaded) {
      out.push(`${g}: no nginx row to compare throughput with`);
    }
    if (moderate && direct) {
      const added = moderate.p50Ms - direct.p50Ms;
      out.push(`${g}: adds ${added.toFixed(3)} ms at p50 over direct at ${opts.moderate} connections (target < 1 ms): ${added < 1 ? 'OK' : 'ABOVE'}`);
    }
  }
  return out.join('\n');
}
