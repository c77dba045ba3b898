import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { redisProcess } from './redis-server.ts';
import { freePort, waitFor } from './wait.ts';

export { hasRedisServer } from './redis-server.ts';

const run = promisify(execFile);

/**
 * A Redis Cluster of this machine's `redis-server`: three primaries (no replicas) on spare loopback
 * ports, their cluster files in a temporary folder, nothing saved. Used by the tests, which may stop
 * and start one primary (C48's faults), and by the bench's Redis Cluster row (bench/run.ts).
 */
export interface OwnRedisCluster {
  /** `redis://127.0.0.1:<port>` of each primary, as REDIS_CLUSTER_NODES takes them. */
  nodes: string[];
  ports: number[];
  /** SIGSTOP one primary: its connections stay open, nothing answers (a hung node). */
  freeze(i: number): void;
  /** SIGCONT after `freeze`. */
  thaw(i: number): void;
  /** SIGKILL one primary: gone at once, with its data. */
  kill(i: number): Promise<void>;
  /** Starts a killed primary again on its port with its cluster file (same node id, same slots), empty. */
  restart(i: number): Promise<void>;
  /** Waits until every node says `cluster_state:ok`. */
  waitOk(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Why a Redis Cluster cannot be started here, or undefined. */
export function redisClusterSkip(): string | undefined {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    execFileSync('redis-cli', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'no redis-server / redis-cli on PATH (apt-get install -y redis-server)';
  }
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 5_000 });
  return stdout;
}

/** `nodeTimeoutMs`: cluster-node-timeout, how soon the other nodes call a silent primary failed. */
export async function startRedisCluster(opts: { nodeTimeoutMs?: number } = {}): Promise<OwnRedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-redis-cluster-'));
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const servers = ports.map((port) =>
    redisProcess(port, [
      '--cluster-enabled', 'yes',
      '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 1_000),
      '--dir', dir,
    ]),
  );
  const waitOk = async (timeoutMs = 15_000) => {
    await waitFor(
      async () => {
        try {
          return (await Promise.all(ports.map((p) => cli(p, 'CLUSTER', 'INFO')))).every((t) => t.includes('cluster_state:ok'));
        } catch {
          return false; // a node not answering yet
        }
      },
      { timeoutMs, intervalMs: 50, what: 'cluster_state:ok on every node' },
    );
  };
  const close = async () => {
    for (const s of servers) await s.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(servers.map((s) => s.launch()));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20_000 });
    await waitOk();
  } catch (err) {
    await close();
    throw err;
  }
  return {
    nodes: ports.map((p) => `redis://127.0.0.1:${p}`),
    ports,
    freeze: (i) => servers[i]?.freeze(),
    thaw: (i) => servers[i]?.thaw(),
    kill: async (i) => {
      await servers[i]?.kill();
    },
    restart: async (i) => {
      await servers[i]?.launch();
    },
    waitOk,
    close,
  };
}
