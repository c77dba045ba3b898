import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: children run from here so `--import tsx` resolves. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A process the bench started; it is stopped (and its temp dirs removed) however the bench ends. */
export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** Everything it printed so far (last 64 KiB), for error messages. */
  output: () => string;
  /** How many characters it has printed in all: what came after a moment is the last `printed() - then` of `output()`. */
  printed: () => number;
  exited: Promise<number | null>;
}

const children = new Set<Child>();
const tempDirs = new Set<string>();

const pdeathsig =
  existsSync('/usr/bin/setpriv') &&
  spawnSync('/usr/bin/setpriv', ['--help'], { encoding: 'utf8' }).stdout?.includes('--pdeathsig') === true;

/** What a child is to the bench: the proxy under test, or what drives it (load generator, upstream). */
export type Role = 'target' | 'driver';

let pinning: Record<Role, string> | undefined;

/**
 * `--pin`: the proxy under test alone on the last CPU, the load generator and the upstream on the
 * others (util-linux's taskset). Every target then runs on the same core with nothing beside it,
 * so two targets differ only by their own cost, not by where the scheduler happened to put them.
 * Returns what was set, for the report, or undefined when pinning is off or impossible.
 */
export function pinCpus(enabled: boolean): string | undefined {
  const cpus = os.availableParallelism();
  if (!enabled || cpus < 2 || !existsSync('/usr/bin/taskset')) {
    pinning = undefined;
    return undefined;
  }
  const last = cpus - 1;
  pinning = { target: String(last), driver: last === 1 ? '0' : `0-${last - 1}` };
  return `the target alone on CPU ${pinning.target}; load generator and upstream on CPU ${pinning.driver}`;
}

/**
 * Starts `cmd` as a child. With util-linux's setpriv the kernel kills it if the bench dies even
 * by SIGKILL; setpriv and taskset exec the command, so `pid` is the command's own.
 */
export function startChild(name: string, cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; role?: Role } = {}): Child {
  const pin = opts.role && pinning ? ['/usr/bin/taskset', '-c', pinning[opts.role]] : [];
  const argv = [...(pdeathsig ? ['/usr/bin/setpriv', '--pdeathsig', 'SIGKILL', '--'] : []), ...pin, cmd, ...args];
  const proc = spawn(argv[0] as string, argv.slice(1), { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let printed = 0;
  const keep = (d: Buffer) => {
    const text = d.toString();
    printed += text.length;
    out = (out + text).slice(-65_536);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  proc.on('error', (err) => keep(Buffer.from(`spawn error: ${err.message}\n`)));
  const child: Child = { name, proc, pid: proc.pid ?? -1, output: () => out, printed: () => printed, exited };
  children.add(child);
  void exited.then(() => children.delete(child));
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: Child, graceMs = 3_000): Promise<void> {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
}

/** A temp dir removed by {@link cleanup}; its name carries our pid so a later run can remove it if we are killed. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `junction-bench-${process.pid}-${prefix}-`));
  tempDirs.add(dir);
  return dir;
}

/** Removes the temp dirs of earlier runs that were killed (SIGKILL leaves no chance to clean up). */
export function removeStaleTempDirs(): void {
  for (const name of readdirSync(os.tmpdir())) {
    const pid = Number(/^junction-bench-(\d+)-/.exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0); // still running: not stale
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true });
    }
  }
}

/** Stops every child and removes every temp dir; safe to call more than once. */
export async function cleanup(): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c)));
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}

let interruptedBy: NodeJS.Signals | undefined;
/** The signal that stopped the bench, if one did: the run that failed because of it is not a failure. */
export const interrupted = (): NodeJS.Signals | undefined => interruptedBy;

/**
 * Cleans up on Ctrl-C / SIGTERM too (exit 130 / 143). Later signals are ignored while it does:
 * Ctrl-C reaches this process twice (from the terminal, and relayed by the tsx CLI).
 */
export function cleanupOnSignals(): void {
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.on(signal, () => {
      if (interruptedBy) return;
      interruptedBy = signal;
      console.error(`\n${signal}: stopping children...`);
      void cleanup().finally(() => process.exit(code));
    });
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Polls `probe` until it returns true; fails with the child's output if it exits or time runs out. */
export async function waitUntil(child: Child, what: string, probe: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${child.name} exited before ${what}:\n${child.output()}`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${child.name}: no ${what} after ${timeoutMs} ms:\n${child.output()}`);
}

/**
 * Starts one of the bench's own servers (`bench/lib/targets/<script>`, run through tsx, `nodeArgs` before it);
 * it prints `listening <port>`.
 */
export async function startScript(name: string, script: string, args: string[], role: Role, nodeArgs: string[] = [], env: Record<string, string> = {}): Promise<{ child: Child; url: string }> {
  const child = startChild(name, process.execPath, [...nodeArgs, '--import', 'tsx', path.join(ROOT, 'bench', 'lib', 'targets', script), ...args], { role, env: { ...process.env, ...env } });
  let port = 0;
  await waitUntil(child, 'listening', async () => {
    port = Number(/listening (\d+)/.exec(child.output())?.[1] ?? 0);
    return port > 0;
  }, 15_000);
  return { child, url: `http://127.0.0.1:${port}` };
}
