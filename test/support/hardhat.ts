// A second node implementation beside anvil: Hardhat's node (its EDR engine), from the `hardhat`
// devDependency, for tests that hold the gateway to more than one client's answers.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BareAnvil, whenAnswering } from './anvil.ts';
import { ROOT } from './process.ts';
import { freePort } from './wait.ts';

/** A started Hardhat node: the same shape as a bare anvil. */
export type BareHardhat = BareAnvil;

/**
 * One Hardhat node (chain id 31337 and the same funded dev accounts as anvil: both derive them from
 * the "test test ... junk" mnemonic) on a free port of 127.0.0.1. Its config file lives in a
 * temporary folder, removed on stop, so nothing is written to the project; nothing is compiled or
 * downloaded. Resolves once it answers eth_chainId.
 */
export async function startHardhat(opts: { timeoutMs?: number; port?: number } = {}): Promise<BareHardhat> {
  const port = opts.port ?? (await freePort());
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-hardhat-'));
  const configFile = path.join(dir, 'hardhat.config.cjs');
  // `paths.root`: Hardhat's cache folder, should it make one, goes to the temporary folder.
  writeFileSync(configFile, 'module.exports = { networks: { hardhat: { chainId: 31337 } }, paths: { root: __dirname } };\n');
  // Run by this Node.js (20 or 24 in CI, C47), not whichever `node` the script's #! line finds.
  const node = spawn(
    process.execPath,
    [path.join(ROOT, 'node_modules/.bin/hardhat'), '--config', configFile, 'node', '--hostname', '127.0.0.1', '--port', String(port)],
    // No prompts and no telemetry: Hardhat asks for consent only on a terminal, and sends nothing without it.
    { cwd: ROOT, stdio: 'ignore', env: { ...process.env, HARDHAT_DISABLE_TELEMETRY_PROMPT: 'true' } },
  );
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (node.exitCode === null && node.signalCode === null) {
      const exited = once(node, 'exit');
      node.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // Slower to start than anvil (~3 s of Node.js loading on an idle machine).
  await whenAnswering(url, 'the Hardhat node to start', opts.timeoutMs ?? 60_000, stop);
  return { url, stop };
}
