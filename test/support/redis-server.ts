import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { freePort, waitFor } from './wait.ts';

/** Whether a `redis-server` binary is on PATH (Debian: `apt-get install -y redis-server`). */
export function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * A test's own Redis: a `redis-server` on a spare port, with nothing on disk, that the test may
 * kill, freeze and start again on the same port (C48's faults), leaving the shared one alone.
 */
export interface OwnRedis {
  url: string;
  port: number;
  /** SIGKILL: gone at once, its data with it (nothing is saved). */
  kill(): Promise<void>;
  /** SIGSTOP: the connection stays open and nothing answers (a hung Redis). */
  freeze(): void;
  /** SIGCONT after `freeze`. */
  thaw(): void;
  /** Starts it again on the same port (after `kill`), empty; resolves once it accepts connections. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(500, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      socket.destroy();
      // A Redis with a password (`--requirepass`) answers, too: that it wants one.
      resolve(/^(\+PONG|-NOAUTH)/.test(String(d)));
    });
  });
}

/**
 * One `redis-server` on a loopback `port`, nothing saved, `args` added to its command line (a
 * Redis Cluster node's settings): the process under {@link startOwnRedis} and each primary of
 * `startRedisCluster` (redis-cluster.ts).
 */
export interface RedisProcess {
  /** Starts it (again after `kill`, on the same port); resolves once it answers PING. */
  launch: () => Promise<void>;
  /** SIGKILL: gone at once, its data with it. */
  kill: () => Promise<void>;
  /** SIGSTOP: connections stay open and nothing answers. */
  freeze: () => void;
  /** SIGCONT after `freeze`. */
  thaw: () => void;
}

export function redisProcess(port: number, args: string[] = []): RedisProcess {
  let child: ChildProcess | undefined;
  return {
    launch: async () => {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], { stdio: 'ignore' });
      await waitFor(() => answersPing(port), { what: `redis-server on port ${port}` });
    },
    kill: async () => {
      const c = child;
      child = undefined;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = once(c, 'exit');
      c.kill('SIGCONT');
      c.kill('SIGKILL');
      await exited;
    },
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
  };
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const server = redisProcess(port);
  await server.launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill: server.kill,
    freeze: server.freeze,
    thaw: server.thaw,
    restart: server.launch,
    close: server.kill,
  };
}
