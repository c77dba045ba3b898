// One anvil process: finding the binary, spawning it so it cannot outlive us, learning its port,
// and stopping it. devnet.ts runs one of these per network (C31).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { DevnetError } from '../errors/devnet.ts';

const require = createRequire(import.meta.url);

/** Grace between SIGTERM and SIGKILL when stopping a chain. */
const STOP_GRACE_MS = 3_000;
/**
 * States anvil keeps in memory. `--prune-history=N` also stops anvil from spilling older states
 * to ~/.foundry/anvil/tmp, a directory it would leave behind whenever it is SIGKILLed.
 */
const HISTORY_STATES = 500;
/** Bytes of stderr kept for error messages. */
const STDERR_TAIL_BYTES = 4_096;

/**
 * Absolute path of the anvil binary shipped in the npm packages of `@foundry-rs/anvil`.
 *
 * The project depends on the Linux x64 platform package directly (the registry this project
 * installs from carries only that one, and a lock file naming the wrapper's other platforms
 * breaks `npm ci`); the wrapper package is still used when it is installed.
 *
 * The binary lives in the per-platform package `@foundry-rs/anvil-<platform>-<arch>` (arch
 * `amd64` or `arm64`). We spawn it directly rather than through the package's `bin.mjs` wrapper:
 * the wrapper is a second Node process that forwards SIGTERM but not SIGKILL, so killing it
 * could leave anvil running.
 */
export function anvilBinary(): string {
  const exe = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const arch = process.arch === 'x64' ? 'amd64' : process.arch; // the packages say amd64 where Node says x64
  try {
    const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    const bin = path.join(path.dirname(pkg), 'bin', exe);
    if (existsSync(bin)) return bin;
  } catch {
    // optional dependency not installed for this platform: try the wrapper package below
  }
  let wrapperDir: string;
  try {
    wrapperDir = path.dirname(require.resolve('@foundry-rs/anvil/package.json'));
  } catch {
    throw new DevnetError(
      `devnet: no anvil binary for ${process.platform}-${arch}: install @foundry-rs/anvil-${process.platform}-${arch} or @foundry-rs/anvil`,
    );
  }
  // Without a platform package, the wrapper's postinstall downloads the binary next to itself.
  for (const candidate of [path.join(wrapperDir, exe), path.join(wrapperDir, 'dist', exe)]) {
    if (existsSync(candidate)) return candidate;
  }
  return path.join(wrapperDir, 'bin.mjs'); // last resort: the wrapper (see the caveat above)
}

let pdeathsigSupport: boolean | undefined;
/** setpriv (util-linux ≥ 2.33) asks the kernel to SIGKILL anvil when its parent dies, even by SIGKILL. */
function canUsePdeathsig(): boolean {
  if (pdeathsigSupport === undefined) {
    pdeathsigSupport =
      process.platform === 'linux' &&
      existsSync('/usr/bin/setpriv') &&
      spawnSync('/usr/bin/setpriv', ['--help'], { encoding: 'utf8' }).stdout?.includes('--pdeathsig') === true;
  }
  return pdeathsigSupport;
}

// Every anvil still running, for the synchronous last-chance kill when this process exits.
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // One listener for all devnets (not one per chain) so that many devnets in one test run do not
  // trip MaxListenersExceededWarning. 'exit' handlers must be synchronous: kill() is.
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

export interface AnvilOptions {
  chainId: number;
  /** Interval mining every this many seconds; undefined: mine one block per transaction. */
  blockTimeSeconds?: number;
  /** Whole coins each of the 10 dev accounts holds at the start; anvil's default (10,000) when undefined. */
  accountBalanceCoins?: number;
  /**
   * A file the chain is loaded from when it exists and dumped to every few seconds and on exit
   * (anvil `--state`): the chain survives a restart. Undefined: the chain lives in memory only.
   */
  statePath?: string;
  /** The port to bind; 0 or undefined: any free one (read back from anvil). A restarted chain keeps its port. */
  port?: number;
}

/** Seconds between dumps of a chain's state to its file. */
const STATE_INTERVAL_SECONDS = 5;

/** A running anvil process. */
export class AnvilProcess {
  readonly pid: number;
  /** Resolves with the port anvil bound (we pass `--port 0`); rejects if it exits first. */
  readonly port: Promise<number>;
  /** Resolves once the process has exited, however it ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** True once stop() was called: an exit after that is expected. */
  stopping = false;

  readonly #child: ChildProcess;
  #stderr = '';
  #stopped: Promise<void> | undefined;

  constructor(opts: AnvilOptions) {
    const bin = anvilBinary();
    const args = [
      '--host', '127.0.0.1',
      // Port 0 with the port read back from anvil's "Listening on" line: no race between picking a
      // free port and binding it, even with 16 chains starting at once.
      '--port', String(opts.port ?? 0),
      '--chain-id', String(opts.chainId),
      '--color', 'never',
      `--prune-history=${HISTORY_STATES}`,
      ...(opts.blockTimeSeconds === undefined ? [] : ['--block-time', String(opts.blockTimeSeconds)]),
      ...(opts.accountBalanceCoins === undefined ? [] : ['--balance', String(opts.accountBalanceCoins)]),
      ...(opts.statePath === undefined ? [] : ['--state', opts.statePath, '--state-interval', String(STATE_INTERVAL_SECONDS)]),
    ];
    // Not --quiet: it also hides the "Listening on" line. Request logging is switched off over RPC
    // once the chain answers (anvil_setLoggingEnabled, see devnet.ts).
    const argv = bin.endsWith('.mjs') ? [process.execPath, bin, ...args] : [bin, ...args];
    // setpriv execs anvil, so the pid we get (and signal) is anvil's own.
    const full = canUsePdeathsig() ? ['/usr/bin/setpriv', '--pdeathsig', 'SIGKILL', '--', ...argv] : argv;
    const child = spawn(full[0] as string, full.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    this.pid = child.pid ?? -1;

    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        live.delete(child);
        resolve({ code, signal });
      });
      // A failed spawn (ENOENT, EACCES) emits 'error' and no 'exit'.
      child.once('error', (err) => {
        this.#stderr += `\n${err.message}`;
        live.delete(child);
        resolve({ code: null, signal: null });
      });
    });
    if (child.pid !== undefined) {
      installExitHook();
      live.add(child);
    }

    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-STDERR_TAIL_BYTES);
    });

    this.port = new Promise((resolve, reject) => {
      let banner = '';
      let found = false;
      child.stdout?.setEncoding('utf8');
      // Keep draining stdout after the port is known: a full pipe would block anvil.
      child.stdout?.on('data', (chunk: string) => {
        if (found) return;
        banner = (banner + chunk).slice(-STDERR_TAIL_BYTES);
        const m = /Listening on [^\s]*:(\d+)/.exec(banner);
        if (m) {
          found = true;
          resolve(Number(m[1]));
        }
      });
      void this.exited.then(({ code, signal }) => {
        if (!found) reject(new DevnetError(`anvil exited before listening (code ${code}, signal ${signal})`));
      });
    });
    this.port.catch(() => {}); // the caller awaits it; do not let an early exit go unhandled
  }

  /** Last lines anvil wrote to stderr, for error messages. */
  stderrTail(): string {
    return this.#stderr.trim();
  }

  /** True while the process has not exited. */
  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null && this.pid > 0;
  }

  /** SIGTERM, then SIGKILL after a grace; resolves when the process has exited. Idempotent. */
  stop(): Promise<void> {
    this.stopping = true;
    this.#stopped ??= (async () => {
      if (!this.running) return;
      this.#child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), STOP_GRACE_MS);
      });
      const outcome = await Promise.race([this.exited, graceOver]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        this.#child.kill('SIGKILL');
        await this.exited;
      }
    })();
    return this.#stopped;
  }
}
