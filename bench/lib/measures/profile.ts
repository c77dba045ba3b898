import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface CpuProfile {
  /** Microseconds on the monotonic clock, the one `process.hrtime` reads. */
  startTime: number;
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string } }>;
  samples: number[];
  timeDeltas: number[];
}

const IDLE = new Set(['(idle)', '(root)']);

/** Where a function lives: `src/<file>`, an npm package, `node:internal`, or a V8 pseudo-frame like `(garbage collector)`. */
function owner(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : 'native (syscalls, C++)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? url);
  }
  const src = url.lastIndexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  if (url.startsWith('node:')) return 'node: core';
  return url.replace(/^file:\/\//, '');
}

const pct = (v: number, total: number) => `${((v / total) * 100).toFixed(1).padStart(5)}%`;

/**
 * Self time of the busiest thread's `.cpuprofile` in `dir` (written by `node --cpu-prof`; with
 * tsx there is a second, idle, loader thread), by function and by owner, as printable lines.
 * Shares are of busy time (idle excluded). `window` (monotonic microseconds, as
 * `process.hrtime.bigint() / 1000n`) keeps only the samples taken under load, not the start-up.
 */
export function hotFunctions(dir: string, window?: { fromUs: number; toUs: number }, top = 25): string[] {
  let best: { self: Map<string, number>; owners: Map<string, number>; busy: number } | undefined;
  for (const f of readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as CpuProfile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
    const self = new Map<string, number>();
    const owners = new Map<string, number>();
    let busy = 0;
    let at = profile.startTime;
    profile.samples.forEach((id, i) => {
      const dt = profile.timeDeltas[i] ?? 0;
      at += dt;
      if (window && (at < window.fromUs || at > window.toUs)) return;
      const frame = byId.get(id);
      if (!frame || IDLE.has(frame.functionName)) return;
      const where = owner(frame.url, frame.functionName);
      const fn = `${frame.functionName || '(anonymous)'}  [${where}]`;
      self.set(fn, (self.get(fn) ?? 0) + dt);
      owners.set(where, (owners.get(where) ?? 0) + dt);
      busy += dt;
    });
    if (!best || busy > best.busy) best = { self, owners, busy };
  }
  if (!best || best.busy === 0) return ['(no samples)'];
  const { self, owners, busy } = best;
  const sorted = (m: Map<string, number>, n: number) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
  return [
    `busy time ${(busy / 1e6).toFixed(1)} s; by owner:`,
    ...sorted(owners, 15).map(([k, v]) => `  ${pct(v, busy)}  ${k}`),
    'by function:',
    ...sorted(self, top).map(([k, v]) => `  ${pct(v, busy)}  ${k}`),
  ];
}
