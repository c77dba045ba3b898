import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

// CPU accounting from /proc (Linux), to tell whether a run was bound by the proxy, the upstream,
// the load generator, or by other work on the machine.

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

interface Stat {
  ppid: number;
  /** utime + stime of the process (all its threads). */
  own: number;
  /** stime alone: the kernel's part of `own`. */
  sys: number;
  /** cutime + cstime: children it has already reaped. */
  reaped: number;
}

/** The numeric fields of a /proc stat file after the ")" that closes the command name: state ppid ... utime stime cutime cstime. */
function statFields(file: string): number[] {
  const stat = readFileSync(file, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
}

function readStats(): Map<number, Stat> {
  const stats = new Map<number, Stat>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const f = statFields(`/proc/${entry}/stat`);
      stats.set(Number(entry), { ppid: f[1] ?? 0, own: (f[11] ?? 0) + (f[12] ?? 0), sys: f[12] ?? 0, reaped: (f[13] ?? 0) + (f[14] ?? 0) });
    } catch {
      // gone while we looked
    }
  }
  return stats;
}

/**
 * CPU seconds used so far by `pid` and its live descendants; with `reaped`, also by the children
 * `pid` has already waited for (the bench's own finished load-generator runs). 0 when gone.
 */
export function cpuSeconds(pid: number, opts: { reaped?: boolean } = {}): number {
  const stats = readStats();
  let ticks = opts.reaped ? (stats.get(pid)?.reaped ?? 0) : 0;
  for (const [p, s] of stats) {
    for (let q: number | undefined = p; q !== undefined && q > 1; q = stats.get(q)?.ppid) {
      if (q === pid) {
        ticks += s.own;
        break;
      }
    }
  }
  return ticks / CLK_TCK;
}

/** `pid` and its live descendants (a gateway's primary and its workers), `pid` first. */
export function processTree(pid: number): number[] {
  const stats = readStats();
  const below = (p: number): boolean => {
    for (let q = stats.get(p)?.ppid; q !== undefined && q > 1; q = stats.get(q)?.ppid) if (q === pid) return true;
    return false;
  };
  return [pid, ...[...stats.keys()].filter((p) => p !== pid && below(p))];
}

/** User and system CPU seconds so far of `pid` and its live descendants: the kernel's share is `sys / (user + sys)`. */
export function userSystemSeconds(pid: number): { user: number; sys: number } {
  const stats = readStats();
  let user = 0;
  let sys = 0;
  for (const p of processTree(pid)) {
    const s = stats.get(p);
    if (!s) continue;
    user += s.own - s.sys;
    sys += s.sys;
  }
  return { user: user / CLK_TCK, sys: sys / CLK_TCK };
}

/**
 * Seconds the main thread of `pid` has spent runnable but waiting for a core so far (the run
 * delay of /proc/<pid>/task/<pid>/schedstat): time an answer can wait though no code holds the
 * event loop. NaN where the kernel does not keep it.
 */
export function mainThreadWaitSeconds(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds (user + system) used so far by the main thread of `pid` alone. */
export function mainThreadCpuSeconds(pid: number): number {
  const f = statFields(`/proc/${pid}/task/${pid}/stat`);
  return ((f[11] ?? 0) + (f[12] ?? 0)) / CLK_TCK;
}

/**
 * CPU seconds (user + system) used so far by each thread of `pid`, summed by thread name
 * (`/proc/<pid>/task/<tid>/comm`: the main thread carries the process's name, Node's worker
 * threads, V8's helpers and libuv's pool their own), the main thread as `main`. A thread that ends
 * between two readings takes its time with it.
 */
export function threadCpuSeconds(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = tid === String(pid) ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const f = statFields(`/proc/${pid}/task/${tid}/stat`);
      byName.set(name, (byName.get(name) ?? 0) + ((f[11] ?? 0) + (f[12] ?? 0)) / CLK_TCK);
    } catch {
      // gone while we looked
    }
  }
  return byName;
}

/**
 * CPU seconds used so far by every process on the machine (that this one can see): each one's own,
 * all its threads, and its reaped children's, so a process that ends between two readings still
 * counts (its time moves to its parent's). Summed from /proc/<pid>/stat, which the kernel derives
 * from each thread's exact run time, and not from /proc/stat: that one samples busy time at the
 * clock tick, and under thousands of short wake-ups a second its busy seconds on this VM strayed
 * by a third of a core either way from the processes' own (5 s open-loop runs of the bare proxy),
 * which "other work" (the machine minus the bench) then reported as 0-40% of a core with nothing
 * else running. Not counted: interrupt work no process is charged with.
 */
export function machineBusySeconds(): number {
  let ticks = 0;
  for (const s of readStats().values()) ticks += s.own + s.reaped;
  return ticks / CLK_TCK;
}

/** CPU the bench's own process tree did not use, in % of one core, over `ms`. */
export async function otherLoad(ms: number): Promise<number> {
  const before = { machine: machineBusySeconds(), mine: cpuSeconds(process.pid, { reaped: true }) };
  await new Promise((r) => setTimeout(r, ms));
  const busy = machineBusySeconds() - before.machine;
  const mine = cpuSeconds(process.pid, { reaped: true }) - before.mine;
  return (Math.max(0, busy - mine) / (ms / 1000)) * 100;
}
