import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface GatewayProcess {
  child: ChildProcess;
  /** Base URL once it listens. */
  url: string;
  output: () => string;
  /** Resolves with the exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let built: Promise<void> | undefined;

/**
 * Brings dist/ up to date with src/ once per test process (`npm test` has done it already; a test
 * file run on its own after a change to src/ does it here), so a started gateway is this code.
 */
export function ensureBuilt(): Promise<void> {
  built ??= (async () => {
    // @ts-expect-error: a plain ES module script without type declarations
    const { build, staleness } = (await import('../../scripts/build.mjs')) as { build: () => Promise<unknown>; staleness: () => string | undefined };
    if (staleness()) await build();
  })();
  return built;
}

let seed: Promise<string> | undefined;

/**
 * A PGlite data folder with every migration applied, made once per machine and migration set (in
 * the temp folder, keyed like the in-memory template): a gateway's first start in an empty
 * DATA_DIR spends ~6 s in PGlite's initdb and the migrations, one in a copy of this ~1 s.
 */
function seedFolder(): Promise<string> {
  seed ??= (async () => {
    const { templateKey } = await import('./pglite-template.ts');
    const folder = path.join(tmpdir(), `junction-test-pglite-folder-${templateKey()}`);
    if (existsSync(path.join(folder, 'pglite'))) return folder;
    // Made under a temporary name and renamed: a process never copies a half-made folder.
    const partial = `${folder}.${process.pid}.partial`;
    rmSync(partial, { recursive: true, force: true });
    const { openStorage } = await import('../../src/storage/db.ts');
    const storage = await openStorage({ dataDir: partial });
    await storage.close();
    try {
      renameSync(partial, folder);
    } catch {
      rmSync(partial, { recursive: true, force: true }); // another test process made it first
    }
    return folder;
  })();
  return seed;
}

/**
 * Gives an empty `dataDir` the migrated database of `seedFolder()`, for tests whose subject is not
 * the first start (that one keeps its initdb). Storage still runs the migrations over it.
 */
export async function seedDataDir(dataDir: string): Promise<void> {
  if (existsSync(path.join(dataDir, 'pglite'))) return;
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  cpSync(path.join(await seedFolder(), 'pglite'), path.join(dataDir, 'pglite'), { recursive: true });
}

interface LaunchOptions {
  args?: string[];
  env?: Record<string, string>;
  via?: 'node' | 'tsx' | 'npm';
  detached?: boolean;
  /** The project folder to start in (default: this one). */
  cwd?: string;
  /** Start from an already migrated database in `env.DATA_DIR` (`seedDataDir`) instead of a new one. */
  seeded?: boolean;
}

/**
 * Starts the gateway as its own process on a free port, without waiting for it (a test of what
 * happens during the start). `via: 'npm'` runs `npm start` (the compiled dist/, built first when
 * stale), `via: 'tsx'` the tsx CLI on src/main.ts, by default (`'node'`) node on the compiled
 * dist/main.js (brought up to date first; it loads in half the CPU time of src/ through tsx).
 * `detached`: the child leads its own process group, so `process.kill(-child.pid, signal)` reaches
 * the whole group.
 */
export async function launchGateway(opts: LaunchOptions): Promise<Omit<GatewayProcess, 'url'>> {
  const args = opts.args ?? [];
  const dataDir = opts.env?.DATA_DIR;
  if (opts.seeded && dataDir && dataDir !== 'memory') await seedDataDir(path.resolve(opts.cwd ?? ROOT, dataDir));
  if (opts.via === undefined || opts.via === 'node') await ensureBuilt();
  const [cmd, argv] =
    opts.via === 'npm'
      ? ['npm', ['start', '--silent', '--', ...args]]
      : opts.via === 'tsx'
        ? [path.join(ROOT, 'node_modules/.bin/tsx'), ['src/main.ts', ...args]]
        : [process.execPath, ['dist/main.js', ...args]];
  const child = spawn(cmd, argv, {
    cwd: opts.cwd ?? ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.detached ?? false,
  });
  let out = '';
  child.stdout?.on('data', (d) => {
    out += d;
  });
  child.stderr?.on('data', (d) => {
    out += d;
  });
  return { child, output: () => out, exited: ended(child) };
}

/** {@link launchGateway}, then waits for its "listening" log line. */
export async function spawnGateway(opts: LaunchOptions & { timeoutMs?: number }): Promise<GatewayProcess> {
  const { child, output, exited } = await launchGateway(opts);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not listen in time:\n${output()}`)), opts.timeoutMs ?? 60_000);
    const onData = () => {
      const m = /"address":"(http:\/\/[^"]+)".*"msg":"Junction is listening"/.exec(output());
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', onData);
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${code}) before listening:\n${output()}`));
    });
  });
  return { child, url, output, exited };
}

/**
 * Resolves once `child` has exited and its output has been read to the end ('close'). 'exit' can
 * come before the last output is read: on a busy machine a test then saw an empty stderr from a
 * process that had printed its line. A descendant still holding the pipes must not hold a test up,
 * so the output gets `graceMs` after the exit.
 */
export function ended(child: ChildProcess, graceMs = 2_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    let grace: NodeJS.Timeout | undefined;
    child.once('exit', (code, signal) => {
      grace = setTimeout(() => resolve({ code, signal }), graceMs);
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(grace);
      resolve({ code, signal });
    });
  });
}

/** Live (not zombie) processes whose command name is `name` and that descend from `rootPid`. */
export function descendants(rootPid: number, name: string): number[] {
  const parent = new Map<number, number>();
  const comm = new Map<number, string>();
  const state = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const m = /^(\d+) \((.*)\) (\S) (\d+)/.exec(stat);
      if (!m) continue;
      comm.set(Number(m[1]), m[2] as string);
      state.set(Number(m[1]), m[3] as string);
      parent.set(Number(m[1]), Number(m[4]));
    } catch {
      // the process went away while we looked
    }
  }
  const out: number[] = [];
  for (const [pid, c] of comm) {
    if (c !== name || state.get(pid) === 'Z') continue;
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === rootPid) {
        out.push(pid);
        break;
      }
    }
  }
  return out;
}

/** True while `pid` is a live (non-zombie) process. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** The account's `totalRequests` from `GET /api/v1/usage/stats` of a running gateway (the usage a stop must have kept). */
export async function usageTotal(url: string, auth: Record<string, string>): Promise<number> {
  const stats = await fetch(`${url}/api/v1/usage/stats`, { headers: auth });
  if (stats.status !== 200) throw new Error(`usage stats answered ${stats.status}`);
  return ((await stats.json()) as { data: { totalRequests: number } }).data.totalRequests;
}

/** A POST of JSON to a running gateway's REST API: the answer's `data`; an answer of 300 or more throws, naming it. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<unknown> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const json = (await res.json()) as { data: unknown };
  if (res.status >= 300) throw new Error(`${url} answered ${res.status}: ${JSON.stringify(json)}`);
  return json.data;
}

/** Kills what is left of each gateway (its whole process group when it leads one, as `detached` does): a test file's `after`. */
export function killLeft(running: readonly GatewayProcess[]): void {
  for (const gw of running) {
    if (gw.child.exitCode !== null || gw.child.signalCode !== null) continue;
    try {
      process.kill(-(gw.child.pid as number), 'SIGKILL');
    } catch {
      gw.child.kill('SIGKILL');
    }
  }
}

/** The log lines (JSON) of a gateway's output, parsed. */
export function logLines(output: string): Array<Record<string, unknown> & { time: number; msg: string; process?: string }> {
  return output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown> & { time: number; msg: string; process?: string });
}

/**
 * One eth_getBalance with `key` on a connection of its own (closed after): its status, or the error
 * code of its connection (`timeoutMs`: waited for its answer at most, else undici's 300 s). With
 * workers each such call is handed to a worker of its own choosing.
 */
export async function callAlone(url: string, key: string, id: number, timeoutMs?: number): Promise<number | string> {
  const own = new Agent({ pipelining: 0, ...(timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {}) });
  try {
    const res = await request(`${url}/rpc/main/evm/50`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [`0x${id.toString(16).padStart(40, '0')}`, 'latest'] }),
      dispatcher: own,
    });
    await res.body.text();
    return res.statusCode;
  } catch (err) {
    const e = err as { code?: string; cause?: { code?: string } };
    return e.cause?.code ?? e.code ?? String(err);
  } finally {
    await own.close().catch(() => {});
  }
}
