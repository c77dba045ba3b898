// C42: `npm run deploy:settlers -- --network SLUG` on a real (anvil) chain: keys from the
// environment only, both settlers deployed from the checked-in bytecode, the origin one with the
// solver as its oracle, and the `intents.settlers` entry printed; without a key it stops, naming
// the variable and never echoing a key.
// slow: contracts deployed on anvil by the script
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
import { loadArtifact } from '../../src/onchain/artifacts.ts';
import { deploySettlers } from '../../src/intents/deploy.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

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

describe('deploying through a node whose answers get lost (C42)', () => {
  test('a call whose answer never came (or a relay\'s 502) is sent again, a signed transaction included (the node already has it): the deployment completes', async () => {
    // In front of the chain: the first eth_gasPrice gets a relay's 502, the first eth_estimateGas is
    // cut before it reaches the node, and the first eth_sendRawTransaction reaches the node but its
    // answer is cut.
    const lost = new Set<string>();
    const proxy = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        const method = (JSON.parse(body) as { method: string }).method;
        if (method === 'eth_gasPrice' && !lost.has(method)) {
          // A relay that gave up on the node (as the devnet's responder does after its timeout).
          lost.add(method);
          res.writeHead(502, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"relay: timeout"}}');
          return;
        }
        if (method === 'eth_estimateGas' && !lost.has(method)) {
          lost.add(method);
          req.socket.destroy();
          return;
        }
        void fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (r) => {
          const text = await r.text();
          if (method === 'eth_sendRawTransaction' && !lost.has(method)) {
            lost.add(method);
            req.socket.destroy();
            return;
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end(text);
        });
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const rpcUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const { settlers } = await deploySettlers({ chains: [{ slug: 'optimism', chainId: 10, rpcUrl }], deployerKey: solverKey, oracle: solver });
      assert.deepEqual([...lost].sort(), ['eth_estimateGas', 'eth_gasPrice', 'eth_sendRawTransaction'], 'each answer was lost once');
      const client = createPublicClient({ transport: http(url) });
      for (const address of [settlers.optimism?.origin, settlers.optimism?.destination]) {
        assert.ok(address);
        assert.ok(((await client.getCode({ address })) ?? '0x').length > 2, `code at ${address}`);
      }
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});
