import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { createPublicClient, http } from 'viem';
import { alive, descendants, spawnGateway } from '../support/process.ts';

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

describe('the gateway process (main.ts)', () => {
  test('starts on embedded PGlite under DATA_DIR, serves, and stops cleanly on SIGTERM; migrations are idempotent', async () => {
    const dir = tmp();
    try {
      for (let run = 0; run < 2; run++) {
        const gw = await spawnGateway({ env: { DATA_DIR: dir } });
        const ready = await fetch(`${gw.url}/health/ready`);
        assert.equal(ready.status, 200);
        const reg = await fetch(`${gw.url}/api/v1/auth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: `run${run}@example.com`, password: 'long enough pw', name: 'R' }),
        });
        assert.equal(reg.status, 200, `run ${run}: the second start reuses the migrated database`);
        gw.child.kill('SIGTERM');
        const { code } = await gw.exited;
        assert.equal(code, 0);
        assert.match(gw.output(), /"msg":"stopped"/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a bad setting stops the start with a message naming it (exit 1)', async () => {
    await assert.rejects(spawnGateway({ env: { DATA_DIR: tmp(), UPSTREAM_ATLANTIS: 'http://x' } }), /Configuration error: UPSTREAM_ATLANTIS/);
    await assert.rejects(spawnGateway({ env: { DATA_DIR: tmp(), PORT: 'x' } }), /Configuration error: PORT/);
  });

  for (const [signal, via] of [
    ['SIGTERM', 'npm'],
    ['SIGINT', 'tsx'],
  ] as const) {
    test(`--devnet: one anvil per network with its chainId, ready within 60 s, native chain mines; ${signal} leaves no anvil`, async () => {
      const dir = tmp();
      try {
        const started = Date.now();
        const gw = await spawnGateway({ args: ['--devnet'], env: { DATA_DIR: dir }, via });
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
            assert.ok(!gw.output().includes(`:${port}`), 'no upstream address in the logs');
            const client = createPublicClient({ transport: http(`http://127.0.0.1:${port}`) });
            chainIds.add(await client.getChainId());
          }
          assert.deepEqual([...chainIds].sort((a, b) => a - b), nets.map((n) => n.chainId).sort((a, b) => a - b));
        }
        gw.child.kill(signal);
        const { code } = await gw.exited;
        assert.equal(code, 0);
        await waitFor(() => (anvils.every((p) => !alive(p)) ? true : undefined), 5000, 'anvil processes to exit');
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
