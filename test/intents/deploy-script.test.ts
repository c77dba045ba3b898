// C42: `npm run deploy:settlers -- --network SLUG` on a real (anvil) chain: keys from the
// environment only, both settlers deployed from the checked-in bytecode, the origin one with the
// solver as its oracle, and the `intents.settlers` entry printed; without a key it stops, naming
// the variable and never echoing a key.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Address, createPublicClient, type Hex, http } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { loadArtifact } from '../../src/devnet/artifacts.ts';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(root, 'scripts/deploy-settlers.ts');

const solverKey = generatePrivateKey();
const solver = privateKeyToAddress(solverKey);
let devnet: Devnet;
let url: string;

before(async () => {
  devnet = await startDevnet({ networks: [{ slug: 'optimism', chainId: 10 }], nativeBlockTimeSeconds: 1, fund: [solver] });
  url = devnet.upstreams.optimism?.http as string;
});

after(async () => {
  await devnet?.stop();
});

/** Runs the script with only PATH and the given variables in its environment. */
function deploy(args: string[], env: Record<string, string>) {
  return run(process.execPath, ['--import', 'tsx', SCRIPT, ...args], { cwd: root, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 120_000 });
}

describe('npm run deploy:settlers (C42)', () => {
  test('deploys both settlers with the solver key of SOLVER_PRIVATE_KEY_<SLUG> as the oracle and prints the config entry', async () => {
    const { stdout, stderr } = await deploy(['--network', 'optimism', '--rpc', url], { SOLVER_PRIVATE_KEY_OPTIMISM: solverKey });
    assert.ok(!stdout.includes(solverKey.slice(2)) && !stderr.includes(solverKey.slice(2)), 'the key is never printed');
    const printed = JSON.parse(stdout) as { intents: { settlers: Record<string, { origin: Address; destination: Address }> } };
    const entry = printed.intents.settlers.optimism;
    assert.ok(entry, stdout);
    const client = createPublicClient({ transport: http(url) });
    const origin = loadArtifact('OriginSettler');
    // The destination settler has no immutables: its code on chain is the checked-in runtime code.
    const built = JSON.parse(readFileSync(path.join(root, 'contracts/build/DestinationSettler.json'), 'utf8')) as { deployedBytecode: Hex };
    assert.equal((await client.getCode({ address: entry.destination }))?.toLowerCase(), built.deployedBytecode.toLowerCase());
    assert.ok(((await client.getCode({ address: entry.origin })) ?? '0x').length > 2, 'code at the origin settler');
    const oracle = await client.readContract({ address: entry.origin, abi: origin.abi, functionName: 'oracle' });
    assert.equal(oracle, solver);
  });

  test('without a key it stops with exit code 1 naming the variable; a node of another chain is refused', async () => {
    await assert.rejects(deploy(['--network', 'optimism', '--rpc', url], {}), (err: { code?: number; stderr?: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr ?? '', /SOLVER_PRIVATE_KEY/);
      return true;
    });
    await assert.rejects(deploy(['--network', 'base', '--rpc', url], { SOLVER_PRIVATE_KEY: solverKey }), (err: { code?: number; stderr?: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr ?? '', /chain 10, not 8453/);
      assert.ok(!(err.stderr ?? '').includes(solverKey.slice(2)));
      return true;
    });
  });
});
