import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { waitFor } from './wait.ts';

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

async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as net.AddressInfo;
  srv.close();
  await once(srv, 'close');
  return port;
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
      resolve(String(d).startsWith('+PONG'));
    });
  });
}

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    const c = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = c;
    await waitFor(() => answersPing(port), { what: `redis-server on port ${port}` });
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = once(c, 'exit');
    c.kill('SIGCONT');
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
    restart: launch,
    close: kill,
  };
}
