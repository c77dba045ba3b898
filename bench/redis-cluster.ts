import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A Redis Cluster of this machine's `redis-server`: three primaries (no replicas) on spare loopback
 * ports, their cluster files in a temporary folder, nothing saved. Used by the bench and the tests
 * (test/support/redis-cluster.ts), which may stop and start one primary (C48's faults).
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

async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  srv.close();
  await once(srv, 'close');
  return port;
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 5_000 });
  return stdout;
}

async function until(what: string, test: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await test()) return;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** `nodeTimeoutMs`: cluster-node-timeout, how soon the other nodes call a silent primary failed. */
export async function startRedisCluster(opts: { nodeTimeoutMs?: number } = {}): Promise<OwnRedisCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-redis-cluster-'));
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const children: Array<ChildProcess | undefined> = [];
  const launch = async (i: number) => {
    const port = ports[i] as number;
    const child = spawn(
      'redis-server',
      [
        '--port', String(port),
        '--bind', '127.0.0.1',
        '--save', '',
        '--appendonly', 'no',
        '--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 1_000),
        '--dir', dir,
      ],
      { stdio: 'ignore' },
    );
    children[i] = child;
    await until(`redis-server on port ${port}`, async () => (await cli(port, 'PING')).trim() === 'PONG', 10_000);
  };
  const kill = async (i: number) => {
    const c = children[i];
    children[i] = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = once(c, 'exit');
    c.kill('SIGCONT');
    c.kill('SIGKILL');
    await exited;
  };
  const waitOk = (timeoutMs = 15_000) =>
    until(
      'cluster_state:ok on every node',
      async () => (await Promise.all(ports.map((p) => cli(p, 'CLUSTER', 'INFO')))).every((t) => t.includes('cluster_state:ok')),
      timeoutMs,
    );
  const close = async () => {
    for (let i = 0; i < ports.length; i++) await kill(i);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(ports.map((_, i) => launch(i)));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20_000 });
    await waitOk();
  } catch (err) {
    await close();
    throw err;
  }
  return {
    nodes: ports.map((p) => `redis://127.0.0.1:${p}`),
    ports,
    freeze: (i) => void children[i]?.kill('SIGSTOP'),
    thaw: (i) => void children[i]?.kill('SIGCONT'),
    kill,
    restart: launch,
    waitOk,
    close,
  };
}
