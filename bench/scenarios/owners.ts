// `npm run bench:owners`: where the CPU of one forwarded call goes, in the bare Node proxy and in
// the gateway, by owner (the kernel, undici, Node's streams and HTTP, the gateway's own code,
// storage, ...), so a change to the pass-through ratio can be traced to who moved
// (bench/README.md: "Where the pass-through gap is").
//
// Each target's main thread is sampled with `perf record -g` while wrk loads it; a sample belongs
// to the file of its innermost JavaScript frame (a builtin or a runtime call counts for the
// JavaScript that called it), or to the kernel. The shares are scaled to the thread's CPU per
// request from /proc, measured over the same load. Needs Linux `perf` (Debian: apt-get install
// linux-perf) and wrk, and the right to profile the targets (root, or kernel.perf_event_paranoid <= 1).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type Child, cleanup, cleanupOnSignals, removeStaleTempDirs, startScript, stopChild, tempDir } from '../lib/children.ts';
import { mainThreadCpuSeconds, threadCpuSeconds } from '../lib/measures/cpu.ts';
import { LIMITS, NO_CACHE, startGateway } from '../lib/targets/gateway.ts';
import { openLoopGenerator, pickLoadGenerator } from '../lib/load/load.ts';
// @ts-expect-error: a plain .mjs build script without type declarations
import { build } from '../../scripts/build.mjs';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { record } from '../lib/report/results.ts';

const OPTIONS = {
  seconds: { type: 'string', default: '5' }, // sampled seconds per target
  connections: { type: 'string', default: '32' },
  top: { type: 'string', default: '12' }, // how many of the gateway's own files to list
  functions: { type: 'string', default: '0' }, // how many of the gateway's own functions to list (innermost JavaScript frame)
  'node-functions': { type: 'string', default: '0' }, // how many of Node's own functions to list, both targets, by how much more the gateway spent in each
  rate: { type: 'string' }, // open loop at this many req/s (bench/lib/load/load-open.ts) instead of wrk's closed loop
} as const;
let opt: Values<typeof OPTIONS>;

export default defineScenario({
  summary: 'where the CPU of one forwarded call goes, bare Node proxy against the gateway, by owner (perf record)',
  options: OPTIONS,
  duration: { option: 'seconds', unit: 's' },
  run: async (ctx) => {
    opt = ctx.opt;
    SECONDS = Number(opt.seconds);
    CONNECTIONS = Number(opt.connections);
    RATE = opt.rate === undefined ? undefined : Number(opt.rate);
    return main();
  },
});
let SECONDS = 5;
let CONNECTIONS = 32;
let RATE: number | undefined;
const BODY = '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}';

/** The owner groups of the report, first match wins; `file` is a JavaScript frame's file, or a tag for native frames. */
const GROUPS: Array<[string, (file: string) => boolean]> = [
  ['kernel', (f) => f === '[kernel]'],
  ['undici', (f) => f.includes('node_modules/undici/')],
  ["Node's streams", (f) => f.startsWith('node:internal/streams/') || f === 'node:internal/stream_base_commons'],
  ['node:http', (f) => /^node:_http_/.test(f)],
  ["the gateway's code", (f) => f.includes('/dist/') && !f.includes('node_modules')],
  ['storage (PGlite, drizzle)', (f) => f.includes('@electric-sql/pglite') || f.includes('drizzle-orm')],
  ['promise queue and timers', (f) => f === 'node:internal/process/task_queues' || f === 'node:internal/timers' || f === 'node:timers'],
  ['the bare proxy', (f) => f.includes('bench/lib/targets/bare-proxy')],
  ['other packages', (f) => f.includes('node_modules/')],
  ['other Node.js', (f) => f.startsWith('node:')],
  ['native, outside JavaScript', () => true],
];

/** One target under load: its main thread's CPU per request and the perf data taken meanwhile. */
interface Sampled {
  label: string;
  /** Main-thread CPU per request, µs (user + system). */
  cpuUs: number;
  /** CPU per request of each of the process's threads by name (the main thread as `main`), µs. */
  threads: Map<string, number>;
  /** The `perf record` output file. */
  data: string;
}

interface Profile extends Sampled {
  /** Samples by file (see GROUPS). */
  files: Map<string, number>;
  /** The gateway's own samples by function (innermost JavaScript frame, with its file and line). */
  functions: Map<string, number>;
  /** Samples in Node's own JavaScript (`node:` files) by function, as `functions`. */
  nodeFunctions: Map<string, number>;
  samples: number;
}

/**
 * A `--perf-basic-prof` map lists every code range V8 ever used, in order; the garbage collector
 * moves code, so an address can belong to several names over time, and perf takes the first.
 * Keeping the latest entry for each range names what ran there last.
 */
function latestMap(pid: number): void {
  const file = `/tmp/perf-${pid}.map`;
  if (!existsSync(file)) return;
  const entries = readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ start: Number.parseInt(m[1] as string, 16), size: Number.parseInt(m[2] as string, 16), line: m[0] }));
  const kept: Array<{ start: number; end: number; line: string }> = [];
  const overlaps = (start: number, end: number) => {
    // `kept` is sorted by start: find the first range ending after `start`.
    let lo = 0;
    let hi = kept.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((kept[mid] as { end: number }).end <= start) lo = mid + 1;
      else hi = mid;
    }
    return { at: lo, hit: lo < kept.length && (kept[lo] as { start: number }).start < end };
  };
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i] as { start: number; size: number; line: string };
    const end = e.start + e.size;
    const { at, hit } = overlaps(e.start, end);
    if (!hit) kept.splice(at, 0, { start: e.start, end, line: e.line });
  }
  writeFileSync(file, `${kept.map((k) => k.line).join('\n')}\n`);
}

/** Samples by owning file, from `perf script` output. */
function owners(script: string): Pick<Profile, 'files' | 'functions' | 'nodeFunctions' | 'samples'> {
  const files = new Map<string, number>();
  const functions = new Map<string, number>();
  const nodeFunctions = new Map<string, number>();
  let samples = 0;
  for (const block of script.split('\n\n')) {
    const frames = block.split('\n').slice(1).map((l) => l.trim()).filter(Boolean);
    if (frames.length === 0) continue;
    samples++;
    let owner = '[native]';
    for (const frame of frames) {
      // "<address> <symbol>+0x<offset> (<object>)"
      const m = /^\S+ (.*?)(?:\+0x[0-9a-f]+)? \((.*)\)$/.exec(frame);
      if (!m) continue;
      const [, symbol = '', object = ''] = m;
      if (object.includes('kernel')) {
        owner = '[kernel]';
        break;
      }
      // WebAssembly (undici's HTTP parser, PGlite's Postgres) counts for the JavaScript that called it.
      if (symbol.startsWith('JS:') && symbol.includes('wasm')) continue;
      if (symbol.startsWith('JS:')) {
        // "JS:*name file:///path/file.js:12:34" or "JS:~ node:internal/streams/writable:744:21": after
        // "JS:" the mark of the code's tier (V8's: * ~ ^ on Node 20, also ' and + on Node 24), not part of the name.
        const where = /(\S+):\d+:\d+$/.exec(symbol)?.[1];
        if (where) {
          owner = where.replace(/^file:\/\//, '');
          if (owner.includes('/dist/') && !owner.includes('node_modules')) {
            const fn = symbol.replace(/^JS:[*~^'+]?/, '').replace(/file:\/\/\S*\/dist\//, '');
            functions.set(fn, (functions.get(fn) ?? 0) + 1);
          } else if (owner.startsWith('node:')) {
            const fn = symbol.replace(/^JS:[*~^'+]?/, '');
            nodeFunctions.set(fn, (nodeFunctions.get(fn) ?? 0) + 1);
          }
          break;
        }
      }
    }
    files.set(owner, (files.get(owner) ?? 0) + 1);
  }
  return { files, functions, nodeFunctions, samples };
}

async function sample(label: string, pid: number, url: string, headers: Record<string, string>): Promise<Sampled> {
  const load = RATE ? openLoopGenerator() : pickLoadGenerator('wrk');
  const rate = RATE ? { rate: RATE } : {};
  await load.run({ url, headers, body: BODY, connections: CONNECTIONS, seconds: 2, ...rate }); // warm-up
  const data = `${tempDir('owners')}/perf.data`;
  const before = mainThreadCpuSeconds(pid);
  const threadsBefore = threadCpuSeconds(pid);
  const loaded = load.run({ url, headers, body: BODY, connections: CONNECTIONS, seconds: SECONDS, ...rate });
  // Sampled inside the load: it starts a little after and ends a little before.
  const rec = spawn('perf', ['record', '-q', '-g', '-F', '1999', '-t', String(pid), '-o', data, '--', 'sleep', String(Math.max(1, SECONDS - 1.5))], { stdio: 'ignore' });
  const recorded = new Promise<number | null>((resolve) => rec.on('close', resolve));
  const result = await loaded;
  const used = mainThreadCpuSeconds(pid) - before;
  const perRequest = (seconds: number) => (seconds * 1e6) / Math.max(1, result.requests);
  const threads = new Map([...threadCpuSeconds(pid)].map(([name, seconds]) => [name, perRequest(seconds - (threadsBefore.get(name) ?? 0))]));
  if ((await recorded) !== 0) throw new Error('perf record failed (are you allowed to profile? kernel.perf_event_paranoid)');
  return { label, cpuUs: perRequest(used), threads, data };
}

function report(profiles: Profile[]): string[] {
  const lines: string[] = [];
  const byGroup = (p: Profile) => {
    const g = new Map<string, number>(GROUPS.map(([name]) => [name, 0]));
    for (const [file, n] of p.files) {
      const name = (GROUPS.find(([, test]) => test(file)) as [string, unknown])[0];
      g.set(name, (g.get(name) ?? 0) + (n / p.samples) * p.cpuUs);
    }
    return g;
  };
  const groups = profiles.map(byGroup);
  for (const [i, p] of profiles.entries()) {
    const figures: Record<string, number> = { all_us: p.cpuUs };
    for (const [name, us] of groups[i] ?? []) figures[`${name}_us`] = us;
    record(`main-thread CPU per request by owner, ${CONNECTIONS} connections${RATE ? `, ${RATE} req/s` : ''}`, p.label, figures);
  }
  const width = Math.max(...GROUPS.map(([n]) => n.length));
  lines.push(`main-thread CPU per request, µs (perf samples: ${profiles.map((p) => `${p.label} ${p.samples}`).join(', ')})`);
  lines.push(`${''.padEnd(width)}  ${profiles.map((p) => p.label.padStart(12)).join('  ')}  ${'difference'.padStart(10)}`);
  const row = (name: string, values: number[]) => {
    const diff = values.length === 2 ? (values[1] as number) - (values[0] as number) : 0;
    return `${name.padEnd(width)}  ${values.map((v) => v.toFixed(1).padStart(12)).join('  ')}  ${`${diff >= 0 ? '+' : ''}${diff.toFixed(1)}`.padStart(10)}`;
  };
  for (const [name] of GROUPS) {
    const values = groups.map((g) => g.get(name) ?? 0);
    if (values.every((v) => v < 0.05)) continue;
    lines.push(row(name, values));
  }
  lines.push(row('all', profiles.map((p) => p.cpuUs)));
  // The main thread is not the whole process: the proxy bench's CPU per request is every thread's.
  const threadNames = [...new Set(profiles.flatMap((p) => [...p.threads.keys()]))].sort((a, b) => (a === 'main' ? -1 : b === 'main' ? 1 : a.localeCompare(b)));
  lines.push('', `CPU per request by thread (the process's threads by name), µs`);
  for (const name of threadNames) {
    const values = profiles.map((p) => p.threads.get(name) ?? 0);
    if (values.every((v) => v < 0.05)) continue;
    lines.push(row(name, values));
  }
  lines.push(row('whole process', profiles.map((p) => [...p.threads.values()].reduce((a, b) => a + b, 0))));
  for (const p of profiles) {
    const figures: Record<string, number> = { whole_process_us: [...p.threads.values()].reduce((a, b) => a + b, 0) };
    for (const [name, us] of p.threads) if (us >= 0.05) figures[`${name}_us`] = us;
    record(`CPU per request by thread, ${CONNECTIONS} connections${RATE ? `, ${RATE} req/s` : ''}`, p.label, figures);
  }
  const gateway = profiles.at(-1) as Profile;
  const own = [...gateway.files].filter(([f]) => f.includes('/dist/') && !f.includes('node_modules')).sort((a, b) => b[1] - a[1]);
  lines.push('', `the gateway's own code by file, µs per request:`);
  for (const [file, n] of own.slice(0, Number(opt.top))) lines.push(`  ${((n / gateway.samples) * gateway.cpuUs).toFixed(2).padStart(6)}  ${file.replace(/.*\/dist\//, '')}`);
  const fns = [...gateway.functions].sort((a, b) => b[1] - a[1]);
  if (Number(opt.functions) > 0) {
    lines.push('', `the gateway's own code by function (innermost JavaScript frame), µs per request:`);
    for (const [fn, n] of fns.slice(0, Number(opt.functions))) lines.push(`  ${((n / gateway.samples) * gateway.cpuUs).toFixed(2).padStart(6)}  ${fn}`);
  }
  if (Number(opt['node-functions']) > 0 && profiles.length === 2) {
    // Node's own functions in both targets, where the gateway spent the most more: what its use of
    // node:http and the streams costs beyond the bare proxy's (headers, events, its writes).
    const us = (p: Profile, fn: string) => ((p.nodeFunctions.get(fn) ?? 0) / p.samples) * p.cpuUs;
    const [bare, gw] = profiles as [Profile, Profile];
    const names = [...new Set([...bare.nodeFunctions.keys(), ...gw.nodeFunctions.keys()])];
    const rows = names.map((fn) => ({ fn, bare: us(bare, fn), gw: us(gw, fn) })).sort((a, b) => b.gw - b.bare - (a.gw - a.bare));
    lines.push('', `Node's own functions (innermost JavaScript frame), µs per request: ${bare.label}, ${gw.label}, difference`);
    for (const r of rows.slice(0, Number(opt['node-functions']))) {
      lines.push(`  ${r.bare.toFixed(2).padStart(6)}  ${r.gw.toFixed(2).padStart(6)}  ${`${r.gw >= r.bare ? '+' : ''}${(r.gw - r.bare).toFixed(2)}`.padStart(6)}  ${r.fn}`);
    }
  }
  return lines;
}

async function main(): Promise<number> {
  cleanupOnSignals();
  removeStaleTempDirs();
  if (spawnSync('perf', ['--version']).error) {
    console.error('perf is not installed (Debian: apt-get install linux-perf)');
    return 1;
  }
  await build();
  const children: Child[] = [];
  const pids: number[] = [];
  try {
    const upstream = await startScript('static upstream', 'static-upstream.ts', [], 'driver');
    children.push(upstream.child);
    const bare = await startScript('bare proxy', 'bare-proxy.ts', [upstream.url], 'target', ['--perf-basic-prof']);
    children.push(bare.child);
    const gw = await startGateway({ label: 'gateway', config: { ...NO_CACHE, ...LIMITS } }, upstream.url, { nodeArgs: ['--perf-basic-prof'] });
    children.push(gw.child);
    pids.push(bare.child.pid, gw.child.pid);
    const runs = [await sample('bare proxy', bare.child.pid, bare.url, {}), await sample('gateway', gw.child.pid, gw.rpcUrl, gw.headers)];
    // The maps are complete once the targets are stopped.
    for (const c of children) await stopChild(c, 10_000);
    children.length = 0;
    const profiles = runs.map((r, i): Profile => {
      latestMap(pids[i] as number);
      const out = spawnSync('perf', ['script', '-i', r.data], { encoding: 'utf8', maxBuffer: 1 << 30 });
      return { ...r, ...owners(out.stdout) };
    });
    console.log(report(profiles).join('\n'));
    return 0;
  } finally {
    for (const c of children) await stopChild(c, 10_000);
    for (const pid of pids) rmSync(`/tmp/perf-${pid}.map`, { force: true });
    // `--perf-basic-prof` also has V8 write a log per isolate into the working directory (the checkout).
    const logs = new RegExp(`^isolate-0x[0-9a-f]+-(${pids.join('|')})-v8\\.log$`);
    for (const f of readdirSync('.')) if (pids.length > 0 && logs.test(f)) rmSync(f, { force: true });
    await cleanup();
  }
}
