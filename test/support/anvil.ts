import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { anvilBinary } from '../../src/devnet/anvil.ts';
import { freePort, waitFor } from './wait.ts';

export interface BareAnvil {
  /** Its HTTP JSON-RPC URL. */
  url: string;
  /** Ends the process (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * One bare anvil (chain id 31337, silent) on a free port, for tests that need a real node but
 * not the devnet (no gateway config, no contracts). Resolves once it answers eth_chainId.
 */
export async function startAnvil(opts: { timeoutMs?: number; port?: number } = {}): Promise<BareAnvil> {
  // `port`: the one a stopped anvil had, to stand in for it at the same URL (a node restarting).
  const port = opts.port ?? (await freePort());
  const anvil = spawn(anvilBinary(), ['--port', String(port), '--chain-id', '31337', '--silent'], { stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (anvil.exitCode !== null) return;
    const exited = once(anvil, 'exit');
    anvil.kill('SIGTERM');
    await exited;
  };
  await whenAnswering(url, 'anvil to start', opts.timeoutMs ?? 20_000, stop);
  return { url, stop };
}

/**
 * Waits until the node at `url` answers `eth_chainId`; on a timeout stops it (`stop`) and throws.
 * Shared by the node processes tests start (anvil, Hardhat).
 */
export async function whenAnswering(url: string, what: string, timeoutMs: number, stop: () => Promise<void>): Promise<void> {
  const answers = async () => {
    try {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
      return (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).ok;
    } catch {
      return false; // not up yet
    }
  };
  try {
    await waitFor(answers, { timeoutMs, intervalMs: 100, what });
  } catch (err) {
    await stop();
    throw err;
  }
}
