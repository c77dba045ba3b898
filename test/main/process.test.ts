// slow: the real gateway process, started and stopped
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { createPublicClient, http } from 'viem';
import { V8_POOL_FLAG } from '../../src/ops/runtime.ts';
import { startFakeNode } from '../support/fake-node.ts';
import { alive, descendants, type GatewayProcess, ROOT, spawnGateway, usageTotal } from '../support/process.ts';

// Every start here is the real `npm start`: the compiled gateway in dist/, built first when stale.

const tmp = () => mkdtempSync(path.join(tmpdir(), 'junction-main-'));

async function waitFor<T>(fn: () => Promise<T | undefined> | T | undefined, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The command line of the process `npm start` runs (npm's child). */
function gatewayCommand(gw: GatewayProcess): string {
  const npmPid = gw.child.pid as number;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(/^\d+ \(.*\) \S (\d+)/.exec(stat)?.[1]) === npmPid) return readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {}
  }
  throw new Error('npm start runs no process');
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

describe('the gateway process (npm start)', () => {
  // Whatever a failed test leaves running is killed, process groups included.
  const running: Array<{ gw: GatewayProcess; group: boolean }> = [];
  const start = async (opts: Parameters<typeof spawnGateway>[0]) => {
    const gw = await spawnGateway(opts);
    running.push({ gw, group: opts.detached === true });
    return gw;
  };
  after(() => {
    for (const { gw, group } of running) {
      if (gw.child.exitCode !== null || gw.child.signalCode !== null) continue;
      try {
        process.kill(group ? -(gw.child.pid as number) : (gw.child.pid as number), 'SIGKILL');
      } catch {}
    }
  });

  test('runs compiled JavaScript from dist/ on embedded PGlite under DATA_DIR, serves, and stops cleanly on SIGTERM; migrations are idempotent', async () => {
    const dir = tmp();
    try {
      for (let run = 0; run < 2; run++) {
        // No devnet and no internet here: readiness waits for storage only (health.readyWhen).
        const gw = await start({ env: { DATA_DIR: dir, READY_WHEN: 'storage' }, via: 'npm' });
        const command = gatewayCommand(gw);
        assert.match(command, /scripts\/start\.mjs/);
        assert.doesNotMatch(command, /tsx/, 'no TypeScript loader');
        // C56: the runtime settings the gateway runs with, as the image's entrypoint gives them too (test/ops/runtime.test.ts).
        assert.ok(command.split(' ').includes(V8_POOL_FLAG), `npm start passes ${V8_POOL_FLAG}: ${command}`);
        const ready = await fetch(`${gw.url}/health/ready`);
        assert.equal(ready.status, 200);
        const reg = await post(`${gw.url}/api/v1/auth/register`, { email: `run${run}@example.com`, password: 'long enough pw', name: 'R' });
        assert.equal(reg.status, 200, `run ${run}: the second start reuses the migrated database`);
        gw.child.kill('SIGTERM');
        const { code } = await gw.exited;
        assert.equal(code, 0);
        assert.match(gw.output(), /"msg":"stopped"/);
      }
      assert.ok(existsSync(path.join(ROOT, 'dist/main.js')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('npm start builds dist/ when it is missing, rebuilds only what changed in src/, and finds the SQL migrations and default config from dist/', async () => {
    // A copy of the project without dist/, so this one's dist/ is left alone.
    const project = tmp();
    const data = tmp();
    try {
      const skip = new Set(['node_modules', 'dist', '.git', 'data', 'test', 'bench', 'scratch', 'coverage']);
      cpSync(ROOT, project, { recursive: true, filter: (from) => !skip.has(path.relative(ROOT, from).split(path.sep)[0] as string) });
      symlinkSync(path.join(ROOT, 'node_modules'), path.join(project, 'node_modules'));
      const run = async (what: string) => {
        const gw = await start({ env: { DATA_DIR: data, READY_WHEN: 'storage' }, via: 'npm', cwd: project, seeded: true });
        assert.equal((await fetch(`${gw.url}/health/ready`)).status, 200, `${what}: ready`);
        const nets = await fetch(`${gw.url}/api/v1/networks`);
        assert.equal(((await nets.json()) as { data: unknown[] }).data.length, 16, `${what}: the shipped networks`);
        gw.child.kill('SIGTERM');
        assert.equal((await gw.exited).code, 0, `${what}: stopped cleanly`);
        return gw.output();
      };

      const first = await run('first start');
      assert.match(first, /\[start\] dist\/ is missing[^\n]*: building/);
      assert.ok(existsSync(path.join(project, 'dist/storage/migrations/0000_init.sql')), 'the migrations are copied');
      assert.ok(existsSync(path.join(project, 'dist/main.js.map')), 'with source maps');

      const changed = path.join(project, 'src/ops/health.ts');
      writeFileSync(changed, `${readFileSync(changed, 'utf8')}\n// changed\n`);
      const second = await run('after a change');
      assert.match(second, /\[start\] dist\/ is older than src\/ops\/health\.ts: building/);
      assert.match(second, /\[start\] built 1 file\(s\)/);
      assert.match(readFileSync(path.join(project, 'dist/ops/health.js'), 'utf8'), /\/\/ changed/);

      // A file whose source is gone leaves dist/ too.
      const extra = path.join(project, 'src/storage/migrations/extra.txt');
      const buildNow = () => execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: project, encoding: 'utf8' });
      writeFileSync(extra, 'x');
      assert.match(buildNow(), /built 1 file/);
      assert.ok(existsSync(path.join(project, 'dist/storage/migrations/extra.txt')));
      rmSync(extra);
      assert.match(buildNow(), /removed 1/);
      assert.ok(!existsSync(path.join(project, 'dist/storage/migrations/extra.txt')));

      const third = await run('unchanged');
      assert.doesNotMatch(third, /\[start\]/, 'nothing to build');
    } finally {
      rmSync(project, { recursive: true, force: true });
      rmSync(data, { recursive: true, force: true });
    }
  });

  test('a bad setting stops the start with a message naming it (exit 1)', async () => {
    await assert.rejects(spawnGateway({ env: { DATA_DIR: tmp(), UPSTREAM_ATLANTIS: 'http://x' }, via: 'npm' }), /Configuration error: UPSTREAM_ATLANTIS/);
    await assert.rejects(spawnGateway({ env: { DATA_DIR: tmp(), PORT: 'x' }, via: 'npm' }), /Configuration error: PORT/);
  });

  // C59: generated secrets pass the weak-secret check at a real start (the values it refuses:
  // test/config/weak-secrets.test.ts and example-secrets.test.ts).
  test('a gateway outside the devnet starts with generated secrets', async () => {
    const gw = await start({
      env: {
        DATA_DIR: 'memory',
        JWT_SECRET: randomBytes(32).toString('hex'),
        KEY_ENCRYPTION_SECRET: randomBytes(32).toString('base64'),
        ADMIN_TOKEN: randomBytes(16).toString('hex'),
        METRICS_TOKEN: randomBytes(16).toString('hex'),
        FAUCET_PRIVATE_KEY: `0x${randomBytes(32).toString('hex')}`,
        LOG_FORMAT: 'json',
      },
    });
    assert.equal((await fetch(`${gw.url}/health/live`)).status, 200);
    gw.child.kill('SIGTERM');
    await gw.exited;
  });

  test('usage of the last moment before a stop survives a stop signal sent twice to the whole process group (C27)', async () => {
    const dir = tmp();
    const upstream = await startFakeNode({ head: 0x1234 });
    const env = { DATA_DIR: dir, UPSTREAM_NATIVE_MAINNET: upstream.url };
    try {
      let gw = await start({ env, via: 'npm', detached: true, seeded: true });
      const reg = await post(`${gw.url}/api/v1/auth/register`, { email: 'last@example.com', password: 'long enough pw', name: 'L' });
      const token = ((await reg.json()) as { data: { tokens: { accessToken: string } } }).data.tokens.accessToken;
      const auth = { authorization: `Bearer ${token}` };
      const created = await post(`${gw.url}/api/v1/api-keys`, { name: 'last' }, auth);
      const key = ((await created.json()) as { data: { key: string } }).data.key;
      const call = (id: number, method = 'eth_blockNumber', params: unknown[] = []) =>
        post(`${gw.url}/rpc/main/evm/50`, { jsonrpc: '2.0', id, method, params }, { 'x-api-key': key });

      const N = 20;
      const answered = await Promise.all(Array.from({ length: N }, (_, i) => call(i)));
      assert.deepEqual(
        answered.map((r) => r.status),
        Array(N).fill(200),
      );
      // More calls still in flight at the upstream when the stop comes: they are answered during the
      // stop, so only the last flush of the graceful stop can store them.
      upstream.setDelay(500);
      const address = (i: number) => `0x${(i + 1).toString(16).padStart(40, '0')}`;
      const inFlight = Array.from({ length: 5 }, (_, i) =>
        call(N + i, 'eth_getBalance', [address(i), 'latest']).then((r) => r.status === 200, () => false),
      );
      await waitFor(() => (upstream.callCount('eth_getBalance') >= 5 ? true : undefined), 10_000, 'calls in flight');

      const group = -(gw.child.pid as number);
      process.kill(group, 'SIGTERM');
      process.kill(group, 'SIGTERM');
      const late = (await Promise.all(inFlight)).filter(Boolean).length;
      const { code } = await gw.exited;
      assert.equal(code, 0, `a clean stop:\n${gw.output().slice(-2000)}`);
      assert.match(gw.output(), /"msg":"stopped"/);
      // npm's relayed copy of the signal is normal: no warning about it at info.
      assert.doesNotMatch(gw.output(), /already stopping/);
      assert.equal(late, 5, 'the calls in flight were answered');

      gw = await start({ env, via: 'npm' });
      try {
        assert.equal(await usageTotal(gw.url, auth), N + 5, `${N} calls before the stop and 5 answered during it`);
      } finally {
        gw.child.kill('SIGTERM');
        await gw.exited;
      }
    } finally {
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [signal, to] of [
    ['SIGTERM', 'npm'],
    ['SIGINT', 'group'],
  ] as const) {
    test(`--devnet: one anvil per network with its chainId, ready within 60 s, native chain mines; ${signal} to the ${to === 'npm' ? 'npm process' : 'whole process group'} leaves no anvil`, async () => {
      const dir = tmp();
      try {
        const started = Date.now();
        const gw = await start({ args: ['--devnet'], env: { DATA_DIR: dir }, via: 'npm', detached: to === 'group', seeded: true });
        await waitFor(async () => ((await fetch(`${gw.url}/health/ready`)).status === 200 ? true : undefined), 60_000, 'ready');
        const readyMs = Date.now() - started;
        assert.ok(readyMs < 60_000, `ready in ${readyMs} ms`);
        const anvils = descendants(gw.child.pid as number, 'anvil');
        assert.equal(anvils.length, 16, 'one chain per network');
        if (signal === 'SIGTERM') {
          // Each chain answers with its network's chainId; the native chain mines on its own.
          const nets = (await (await fetch(`${gw.url}/api/v1/networks`)).json()).data as Array<{ slug: string; chainId: number }>;
          assert.equal(nets.length, 16);
          const chainIds = new Set<number>();
          for (const pid of anvils) {
            const port = portOf(pid);
            // The devnet's chain ports are in its start lines (local addresses, no provider keys).
            assert.ok(gw.output().includes(`127.0.0.1:${port}`), `chain port ${port} in the start log`);
            const client = createPublicClient({ transport: http(`http://127.0.0.1:${port}`) });
            chainIds.add(await client.getChainId());
          }
          assert.deepEqual([...chainIds].sort((a, b) => a - b), nets.map((n) => n.chainId).sort((a, b) => a - b));
          // C40, C42: a test token and both settlers on every chain.
          // The addresses are in the devnet's details file (the start line only counts them).
          const line = gw.output().split('\n').find((l) => l.includes('devnet contracts deployed'));
          assert.equal((JSON.parse(line ?? '{}') as { networks?: number }).networks, 16, 'the contracts line');
          const deployed = JSON.parse(readFileSync(path.join(dir, 'devnet', 'accounts.json'), 'utf8')) as { tokens: Record<string, string>; settlers: Record<string, { origin: string; destination: string }> };
          assert.equal(Object.keys(deployed.tokens).length, 16);
          assert.equal(Object.keys(deployed.settlers).length, 16);
        }
        if (to === 'group') process.kill(-(gw.child.pid as number), signal);
        else gw.child.kill(signal);
        const { code } = await gw.exited;
        assert.equal(code, 0);
        await waitFor(() => (anvils.every((p) => !alive(p)) ? true : undefined), 5000, 'anvil processes to exit');
        // Chains told to stop (by the gateway, or by the signal reaching the whole group) are no failure.
        assert.deepEqual(gw.output().split('\n').filter((l) => /exited unexpectedly|chain restarted/.test(l)), []);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

/** The TCP port a process listens on, read from /proc (anvil binds 127.0.0.1). */
function portOf(pid: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {}
  }
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols[3] === '0A' && inodes.has(cols[9] as string)) return Number.parseInt((cols[1] as string).split(':')[1] as string, 16);
  }
  throw new Error(`no listening socket for ${pid}`);
}
