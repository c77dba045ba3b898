// A devnet chain that dies while the devnet runs comes back on its port from its state file, and a
// chain stopped because the gateway is stopping is neither an error nor restarted (C31).
// slow: anvil chains killed and restarted
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { type Devnet, type DevnetLogger, startDevnet } from '../../src/devnet/devnet.ts';
import { rpc } from '../../src/json/rpc-client.ts';
import { waitFor } from '../support/wait.ts';

/** Polls `fn` (its errors count as not yet) every 200 ms for up to 30 s. */
const until = <T>(what: string, fn: () => Promise<T | undefined>): Promise<T> =>
  waitFor(() => fn().catch(() => undefined), { timeoutMs: 30_000, intervalMs: 200, what });

interface Line {
  level: 'info' | 'warn' | 'error';
  msg: string | undefined;
}

function recorder(): { logger: DevnetLogger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: Line['level']) => (_obj: object, msg?: string) => void lines.push({ level, msg });
  return { logger: { info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const ADDRESS = '0x00000000000000000000000000000000000c0ffe';

describe('devnet chains that exit', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-devnet-restart-'));
  let devnet: Devnet | undefined;
  after(async () => {
    await devnet?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a chain killed under the gateway is restarted on the same address with its state, logged once at error level', async () => {
    const { logger, lines } = recorder();
    devnet = await startDevnet({ networks: [{ slug: 'ethereum', chainId: 1 }], nativeBlockTimeSeconds: 2, stateDir: dir, logger });
    const url = devnet.upstreams.ethereum!.http;
    const before = devnet.pids.ethereum!;
    await rpc(url, 'anvil_setBalance', [ADDRESS, '0x1234']);
    await rpc(url, 'evm_mine', []);
    // anvil writes its state file every 5 s; a SIGKILL gives it no chance to write more: wait for
    // a write that holds the balance.
    const stateFile = path.join(dir, 'ethereum.json');
    await until('anvil to write the balance to its state file', async () => (readFileSync(stateFile, 'utf8').toLowerCase().includes(ADDRESS.slice(2)) ? true : undefined));
    process.kill(before, 'SIGKILL');
    await until('the restart to be logged', async () => (lines.some((l) => l.msg === 'devnet chain restarted') ? true : undefined));
    const balance = await until('the chain to answer again', async () => await rpc<string>(url, 'eth_getBalance', [ADDRESS, 'latest'], { timeoutMs: 1000 }));
    assert.equal(BigInt(balance), 0x1234n, 'the balance set before the kill, from the state file');
    assert.notEqual(devnet.pids.ethereum, before, 'a new process');
    assert.ok(alive(devnet.pids.ethereum!));
    assert.equal(lines.filter((l) => l.level === 'error').length, 1, JSON.stringify(lines));
  });

  test('after beginStop a chain that exits on a signal is not restarted and nothing is logged at error level', async () => {
    const { logger, lines } = recorder();
    const own = await startDevnet({ networks: [{ slug: 'base', chainId: 8453 }], nativeBlockTimeSeconds: 2, logger });
    try {
      const pid = own.pids.base!;
      own.beginStop(); // as the gateway does on its stop signal
      process.kill(pid, 'SIGTERM'); // the same signal reaching the chain through the process group
      await until('the chain to exit', async () => (alive(pid) ? undefined : true));
      await new Promise((r) => setTimeout(r, 5_000)); // past the restart delays
      assert.equal(own.pids.base, pid, 'no new process');
      assert.deepEqual(lines.filter((l) => l.level === 'error'), []);
    } finally {
      await own.stop();
    }
  });
});
