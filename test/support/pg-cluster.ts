import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './wait.ts';

/**
 * A PostgreSQL server of a test's own (initdb into a temporary folder, a free port), so that the
 * test can stop and start it (C48) without touching the shared one. Its superuser is `root`,
 * trusted on 127.0.0.1. As root the server runs as the `postgres` user (initdb refuses root).
 */
export interface PgCluster {
  url: string;
  port: number;
  /** Starts the server and waits until it accepts connections. */
  start(): void;
  /** `pg_ctl stop -m immediate`: every connection cut at once, as a crash would. */
  stopImmediate(): void;
  /**
   * SIGSTOP to the postmaster and every process of this cluster (its backends, checkpointer, ...):
   * the server hangs with its connections open, as a frozen VM or a full disk would look.
   */
  freeze(): void;
  /** SIGCONT to what {@link freeze} stopped. */
  thaw(): void;
  /** Stops the server if running and removes its folder. */
  destroy(): void;
}

/** The newest PostgreSQL binaries of the machine, or null when none is installed. */
export function pgBinDir(): string | null {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return null;
  const versions = readdirSync(base).filter((v) => existsSync(path.join(base, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(base, versions[0], 'bin') : null;
}

export async function createPgCluster(): Promise<PgCluster> {
  const bin = pgBinDir();
  if (!bin) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'junction-pg-'));
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[], timeout = 60_000) => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]] : [path.join(bin, cmd), args];
    execFileSync(file, argv, { stdio: 'pipe', timeout });
  };
  /** Running, not a zombie (where no init reaps, a killed server stays one). */
  const alive = (pid: number): boolean => {
    try {
      return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false;
    }
  };
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  run('initdb', ['-D', data, '-U', 'root', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  let running = false;
  let frozen: number[] = [];
  /** The postmaster's pid (first line of postmaster.pid) and its children's. */
  const pids = (): number[] => {
    const main = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(main)]).toString().split('\n').map((l) => Number(l.trim())).filter((n) => n > 0);
    return [main, ...children];
  };
  const cluster: PgCluster = {
    url: `postgres://root@127.0.0.1:${port}/postgres`,
    port,
    // fsync off (the machine does not crash in a test); commits stay synchronous, so what the
    // server acknowledged survives an immediate stop.
    start() {
      run('pg_ctl', ['-D', data, '-w', '-t', '60', '-l', path.join(dir, 'log'), '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start']);
      running = true;
    },
    stopImmediate() {
      // Once (CI, a loaded host) pg_ctl waited past a minute for the postmaster to go. What a test
      // needs is a server that is gone at once: after 15 s of pg_ctl, every process of the cluster
      // gets SIGKILL (a crash) and its lock file goes.
      const before = pids();
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '15', 'stop'], 20_000);
      } catch (error) {
        for (const pid of before) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone meanwhile.
          }
        }
        const until = Date.now() + 10_000;
        while (before.some(alive) && Date.now() < until) execFileSync('sleep', ['0.1']);
        if (before.some(alive)) throw error;
        // A zombie postmaster (no init reaps it here) would look alive to the next start, through either lock file.
        rmSync(path.join(data, 'postmaster.pid'), { force: true });
        rmSync(path.join(dir, `.s.PGSQL.${port}.lock`), { force: true });
      }
      running = false;
    },
    freeze() {
      // The postmaster first, so that it starts no process the list below would miss.
      const [main] = pids();
      process.kill(main as number, 'SIGSTOP');
      frozen = pids();
      for (const pid of frozen) if (pid !== main) process.kill(pid, 'SIGSTOP');
    },
    thaw() {
      for (const pid of [...frozen].reverse()) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // Gone meanwhile.
        }
      }
      frozen = [];
    },
    destroy() {
      if (frozen.length > 0) cluster.thaw();
      if (running) {
        try {
          cluster.stopImmediate();
        } catch {
          // Already gone.
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** Requests of one key stored in usage_daily and analytics_hours of the database at `url` (C48 tests and the chaos bench). */
export async function storedRequests(url: string, keyId: string): Promise<{ usage: number; analytics: number }> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const u = await c.query<{ n: string | null }>('select sum(requests)::text as n from usage_daily where key_id = $1', [keyId]);
    const a = await c.query<{ n: string | null }>('select sum(r.requests)::text as n from analytics_hours r join analytics_series s on s.id = r.series where s.key_id = $1', [keyId]);
    return { usage: Number(u.rows[0]?.n ?? 0), analytics: Number(a.rows[0]?.n ?? 0) };
  } finally {
    await c.end();
  }
}
