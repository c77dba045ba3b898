// The devnet's chains keep their state in the data folder (anvil --state), so a restart finds
// chains and database in step; `--fresh` starts both anew. Driven as a user would: the real process,
// a SIGTERM between runs.
// slow: the real gateway process with its devnet, restarted
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { createPublicClient, createWalletClient, defineChain, type Hex, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';

const DEV_KEY_1 = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d'; // anvil's public dev key 1
const dir = mkdtempSync(path.join(tmpdir(), 'junction-devnet-state-'));
// One chain instead of sixteen: a config file leaves the other networks out of these runs.
const config = path.join(dir, 'one-chain.json');
const SLUGS = ['native-mainnet', 'native-testnet', 'ethereum-sepolia', 'polygon', 'polygon-amoy', 'bsc', 'bsc-testnet', 'arbitrum', 'arbitrum-sepolia', 'optimism', 'optimism-sepolia', 'base', 'base-sepolia', 'avalanche', 'avalanche-fuji'];
writeFileSync(config, JSON.stringify({ networks: SLUGS.map((slug) => ({ slug, enabled: false })), whaleAlerts: { networks: [] } }));
let running: GatewayProcess | undefined;

after(async () => {
  if (running && running.child.exitCode === null) {
    running.child.kill('SIGTERM');
    await running.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

async function start(args: string[] = []): Promise<GatewayProcess> {
  running = await spawnGateway({ args: ['--devnet', '--config', config, ...args], env: { DATA_DIR: dir, LOG_FORMAT: 'json' }, timeoutMs: 120_000, seeded: true });
  return running;
}

async function stop(gw: GatewayProcess): Promise<void> {
  gw.child.kill('SIGTERM');
  const { code } = await gw.exited;
  assert.equal(code, 0);
}

/** The ethereum chain's HTTP address, from the devnet's start line. */
function ethereumUrl(gw: GatewayProcess): string {
  const line = gw.output().split('\n').find((l) => l.includes('devnet chains are up'));
  assert.ok(line, 'the devnet start line');
  const { chains } = JSON.parse(line) as { chains: Record<string, { http: string }> };
  assert.ok(chains.ethereum);
  return chains.ethereum.http;
}

function clients(url: string) {
  const chain = defineChain({ id: 1, name: 'ethereum devnet', nativeCurrency: { name: 'ETH', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
  return {
    pub: createPublicClient({ chain, transport: http(url) }),
    wallet: createWalletClient({ chain, transport: http(url), account: privateKeyToAccount(DEV_KEY_1) }),
  };
}

describe('devnet state in the data folder', () => {
  test('a restart keeps the chains; --fresh starts chains and database anew', async () => {
    let gw = await start();
    const first = clients(ethereumUrl(gw));
    const hash: Hex = await first.wallet.sendTransaction({ to: '0x000000000000000000000000000000000000dEaD', value: parseEther('1.5') });
    const receipt = await first.pub.waitForTransactionReceipt({ hash });
    await stop(gw);
    assert.ok(existsSync(path.join(dir, 'devnet', 'ethereum.json')), 'the chain state file');
    // One state file per chain, beside the file of the dev accounts and addresses.
    assert.deepEqual(readdirSync(path.join(dir, 'devnet')).filter((f) => f.endsWith('.json')).sort(), ['accounts.json', 'ethereum.json']);

    gw = await start();
    const second = clients(ethereumUrl(gw));
    const again = await second.pub.getTransactionReceipt({ hash });
    assert.equal(again.blockNumber, receipt.blockNumber, 'the transaction is still on the chain');
    assert.ok((await second.pub.getBlockNumber()) >= receipt.blockNumber);
    assert.equal(await second.pub.getBalance({ address: '0x000000000000000000000000000000000000dEaD' }), parseEther('1.5'));
    await stop(gw);

    gw = await start(['--fresh']);
    assert.match(gw.output(), /--fresh: the devnet chains and the database start anew/);
    const third = clients(ethereumUrl(gw));
    await assert.rejects(third.pub.getTransactionReceipt({ hash }), /could not be found/);
    assert.equal(await third.pub.getBalance({ address: '0x000000000000000000000000000000000000dEaD' }), 0n);
    await stop(gw);
  });

  test('--fresh without --devnet is refused with one plain line', async () => {
    await assert.rejects(spawnGateway({ args: ['--fresh'], env: { DATA_DIR: dir } }), (err: Error) => {
      assert.match(err.message, /Cannot start: --fresh .* use it with --devnet/);
      assert.doesNotMatch(err.message, /\n\s+at /);
      return true;
    });
  });
});
