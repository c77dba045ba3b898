// The real gateway process, started the wrong way: every mistake is one line that names the
// setting and the address (plain on stderr before the logger exists, a log line after), exit code 1,
// and no stack trace. `--help` prints the options.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ended, ensureBuilt, ROOT, spawnGateway } from '../support/process.ts';
import { redisClusterSkip, startRedisCluster } from '../support/redis-cluster.ts';
import { hasRedisServer, redisProcess } from '../support/redis-server.ts';
import { waitFor } from '../support/wait.ts';

const redisSkip = hasRedisServer() ? false : 'no redis-server binary (apt-get install -y redis-server)';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the compiled gateway (dist/main.js, as `npm start` does) to its end, without the caller's secrets or config. */
async function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  await ensureBuilt();
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(UPSTREAM_|FAUCET_|DATABASE_URL$|REDIS_URL$|GATEWAY_CONFIG$|DEVNET$|JWT_SECRET$|KEY_ENCRYPTION_SECRET$|ADMIN_TOKEN$)/.test(k)) base[k] = v;
  }
  const child = spawn(process.execPath, ['dist/main.js', ...args], {
    cwd: ROOT,
    env: { ...base, PORT: '0', HOST: '127.0.0.1', DATA_DIR: 'memory', LOG_LEVEL: 'warn', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    // A start that goes on means the mistake was not caught: kill it and fail.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`still running after 120 s:\n${stdout}\n${stderr}`));
    }, 120_000);
    // Once the output is read to the end, not at the exit (which can come first).
    void ended(child).then(({ code }) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The one line a failed start prints on stderr, with no stack trace anywhere in the output. */
function oneLine(r: Run, prefix: RegExp): string {
  assert.equal(r.code, 1, `exit code 1; stderr: ${r.stderr}`);
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{'));
  assert.equal(lines.length, 1, `one plain line on stderr, got:\n${r.stderr}`);
  assert.doesNotMatch(`${r.stdout}\n${r.stderr}`, /^\s+at /m, 'no stack trace');
  assert.doesNotMatch(`${r.stdout}\n${r.stderr}`, /"stack"/, 'no stack trace in a log line');
  const line = lines[0] as string;
  assert.match(line, prefix);
  return line;
}

/** The one line a start that failed after the logger was made writes, in the log's format (JSON here). */
function logLine(r: Run): string {
  assert.equal(r.code, 1, `exit code 1; stderr: ${r.stderr}`);
  assert.doesNotMatch(`${r.stdout}\n${r.stderr}`, /^\s+at |"stack"/m, 'no stack trace');
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
  const fatal = lines.filter((l) => l.level === 60);
  assert.equal(fatal.length, 1, r.stdout);
  return fatal[0]?.msg as string;
}

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

// Each case is its own process: they run side by side (most of their time is loading, not CPU).
describe('starting the gateway process the wrong way', { concurrency: true }, () => {
  let busy: Server;
  let busyPort: number;
  before(async () => {
    busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    busyPort = (busy.address() as { port: number }).port;
  });
  after(() => busy.close());

  test('--help prints the options and the main environment variables, and exits 0', async () => {
    const r = await run(['--help']);
    assert.equal(r.code, 0);
    assert.equal(r.stderr, '');
    for (const needed of ['--config FILE', '--devnet', '--help', 'PORT', 'DATABASE_URL', 'REDIS_URL', 'JWT_SECRET', 'LOG_LEVEL', 'UPSTREAM_<SLUG>', 'UPSTREAM_WS_<SLUG>', 'docs/config-reference.md']) {
      assert.ok(r.stdout.includes(needed), `--help mentions ${needed}`);
    }
  });

  test('an unknown flag says so and points at --help', async () => {
    const line = oneLine(await run(['--devnte']), /^Command line: /);
    assert.equal(line, 'Command line: unknown option --devnte. See --help for the options.');
  });

  test('a bad LOG_LEVEL names the variable, the value and the levels', async () => {
    const line = oneLine(await run([], { LOG_LEVEL: 'loud' }), /^Configuration error: /);
    assert.equal(line, 'Configuration error: LOG_LEVEL: logLevel = "loud": must be one of fatal, error, warn, info, debug, trace, silent');
  });

  test('a bad PORT names the variable, the value and the range', async () => {
    const line = oneLine(await run([], { PORT: '80a' }), /^Configuration error: /);
    assert.equal(line, 'Configuration error: PORT: server.port = "80a": must be a whole number from 0 to 65535');
  });

  test('a port in use: one log line naming PORT and the address, before storage opens or anything else starts', async () => {
    const r = await run([], { PORT: String(busyPort), LOG_LEVEL: 'info' });
    assert.equal(r.code, 1, r.stderr);
    assert.doesNotMatch(`${r.stdout}\n${r.stderr}`, /^\s+at |"stack"/m, 'no stack trace');
    // In the log's format (a JSON line here), and the only line: the port is bound first (fail fast).
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, r.stdout);
    const line = JSON.parse(lines[0] as string) as { level: number; msg: string };
    assert.equal(line.level, 60);
    assert.equal(line.msg, `Cannot start: PORT=${busyPort}, HOST=127.0.0.1: cannot listen on 127.0.0.1:${busyPort}: the address is already in use by another process (EADDRINUSE)`);
  });

  test('a secret copied from the Kubernetes example: one line naming JWT_SECRET and how to make one, never the value (C59)', async () => {
    const example = 'CHANGE-ME-32-characters-or-more-000000';
    const r = await run([], { JWT_SECRET: example, KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex') });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^Configuration error: JWT_SECRET \(auth\.jwtSecret\): refused, it is an example shown in the repository.*openssl rand -hex 32/);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(!r.stderr.includes(example));
  });

  test('a DATABASE_URL whose host does not exist: one line naming DATABASE_URL and the address, password masked', async () => {
    const r = await run([], {
      DATABASE_URL: 'postgres://app:hunter2secret@nohost.invalid:5432/junction',
      JWT_SECRET: randomBytes(32).toString('hex'),
      KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex'),
    });
    const line = logLine(r);
    assert.equal(line, 'Cannot start: DATABASE_URL: cannot reach the database at postgres://app:***@nohost.invalid:5432/junction: host not found (ENOTFOUND)');
    assert.ok(!`${r.stdout}${r.stderr}`.includes('hunter2secret'));
  });

  test('a REDIS_URL whose host does not exist: one line naming REDIS_URL and the address, before the storage opens (as early as a port in use)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-no-redis-host-'));
    try {
      const r = await run([], { REDIS_URL: 'redis://:hunter2secret@nohost.invalid:6379', DATA_DIR: dir, LOG_LEVEL: 'info' });
      const line = logLine(r);
      assert.equal(line, 'Cannot start: REDIS_URL: cannot reach Redis at redis://:***@nohost.invalid:6379: host not found (ENOTFOUND)');
      assert.ok(!`${r.stdout}${r.stderr}`.includes('hunter2secret'));
      // The refusal does not wait for the embedded database to be made (seconds), nor leaves one half made.
      assert.doesNotMatch(r.stdout, /"msg":"data folder/);
      assert.equal(existsSync(path.join(dir, 'pglite')), false, 'the storage was never opened');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a REDIS_URL with a password Redis refuses: one line naming REDIS_URL, password masked', { skip: redisSkip }, async () => {
    const port = await closedPort();
    const server = redisProcess(port, ['--requirepass', 'the-right-one-0123456789']);
    await server.launch();
    try {
      const r = await run([], { REDIS_URL: `redis://:hunter2secret@127.0.0.1:${port}` });
      const line = logLine(r);
      assert.match(line, new RegExp(`^Cannot start: REDIS_URL: cannot reach Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}: WRONGPASS`));
      assert.ok(!`${r.stdout}${r.stderr}`.includes('hunter2secret'));
    } finally {
      await server.kill();
    }
  });

  test('a URL that does not parse: one line naming the variable, before anything starts', async () => {
    const r = await run([], { DATABASE_URL: 'postgres://db:99999/x', JWT_SECRET: 'j'.repeat(40), KEY_ENCRYPTION_SECRET: 'k'.repeat(40) });
    assert.equal(
      oneLine(r, /^Configuration error: /),
      'Configuration error: DATABASE_URL: storage.databaseUrl = "postgres://db:99999/x": must be a postgres:// or postgresql:// URL',
    );
  });
});

describe('a start while Redis is away (C48)', () => {
  test('a REDIS_URL nothing listens on yet: the gateway starts and serves, says so in one warn line naming REDIS_URL, and /health/ready reports Redis degraded', async () => {
    const port = await closedPort();
    const g = await spawnGateway({ env: { REDIS_URL: `redis://127.0.0.1:${port}`, DATA_DIR: 'memory', LOG_FORMAT: 'json', READY_WHEN: 'storage' } });
    try {
      const lines = g.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
      const warned = lines.filter((l) => l.msg.startsWith('REDIS_URL: '));
      assert.deepEqual(
        warned.map((l) => [l.level, l.msg]),
        [[40, `REDIS_URL: cannot reach Redis at redis://127.0.0.1:${port}: connection refused (nothing listens there) (ECONNREFUSED); the start goes on with every limit enforced by this instance in memory until Redis answers (C48)`]],
      );
      const ready = await fetch(`${g.url}/health/ready`);
      const body = (await ready.json()) as { checks: { redis: { ok: boolean; state: string } } };
      assert.equal(ready.status, 200, 'it serves, so it is ready');
      assert.deepEqual([body.checks.redis.ok, body.checks.redis.state], [true, 'degraded']);
    } finally {
      g.child.kill('SIGTERM');
      await g.exited;
    }
  });

  test('a Redis Cluster whose every primary is down: the gateway starts in memory, says so naming REDIS_CLUSTER_NODES, and uses the cluster once it is back', { skip: redisClusterSkip() ?? false }, async () => {
    const cluster = await startRedisCluster();
    let g: Awaited<ReturnType<typeof spawnGateway>> | undefined;
    try {
      for (let i = 0; i < cluster.ports.length; i++) await cluster.kill(i);
      // Before: ioredis' "Failed to refresh slots cache" was taken for a mistake in the setting, and the start stopped.
      g = await spawnGateway({ env: { REDIS_CLUSTER_NODES: cluster.nodes.join(','), DATA_DIR: 'memory', LOG_FORMAT: 'json', READY_WHEN: 'storage' } });
      const lines = g.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
      const warned = lines.filter((l) => l.msg.startsWith('REDIS_CLUSTER_NODES: '));
      assert.equal(warned.length, 1, g.output());
      assert.match(warned[0]?.msg ?? '', new RegExp(`^REDIS_CLUSTER_NODES: cannot reach Redis at redis://127\\.0\\.0\\.1:${cluster.ports[0]}: .*; the start goes on with every limit enforced by this instance in memory until Redis answers \\(C48\\)$`));
      const state = async () => ((await (await fetch(`${g?.url}/health/ready`)).json()) as { checks: { redis: { state: string } } }).checks.redis.state;
      assert.equal(await state(), 'degraded');
      for (let i = 0; i < cluster.ports.length; i++) await cluster.restart(i);
      await cluster.waitOk();
      await waitFor(async () => (await state()) === 'up', { timeoutMs: 20_000, intervalMs: 200, what: 'the gateway to use the cluster once it is back (C48)' });
    } finally {
      g?.child.kill('SIGTERM');
      await g?.exited;
      await cluster.close();
    }
  });
});
