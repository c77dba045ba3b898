// C42, C45: what a newcomer does after `--devnet`: the real gateway process deploys the settlers
// and funds its solver on every chain by itself, and an intent from the Sepolia devnet chain to the
// Base Sepolia one, opened with a dev account through viem, is settled within a minute with the
// recipient paid exactly outputAmount.
// slow: the real gateway process settling an intent on its devnet
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { createPublicClient, createWalletClient, defineChain, type Hex, http, parseEther } from 'viem';
import { generatePrivateKey, mnemonicToAccount, privateKeyToAddress } from 'viem/accounts';
import type { Intent } from '../../src/intents/view.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'junction-intents-devnet-'));
let gw: GatewayProcess | undefined;

after(async () => {
  if (gw && gw.child.exitCode === null && gw.child.signalCode === null) {
    gw.child.kill('SIGTERM');
    await gw.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

test('--devnet: ETH moves from the Sepolia devnet chain to the Base Sepolia one within a minute, settled', async () => {
  gw = await spawnGateway({ args: ['--devnet'], env: { DATA_DIR: dir }, via: 'node', timeoutMs: 180_000, seeded: true });
  const api = `${gw.url}/api/v1`;
  const line = gw.output().split('\n').find((l) => l.includes('devnet chains are up'));
  assert.ok(line, 'the chains line');
  const chains = (JSON.parse(line) as { chains: Record<string, { http: string }> }).chains;

  const reg = await fetch(`${api}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'newcomer@example.com', password: 'long enough pw', name: 'New' }),
  });
  assert.equal(reg.status, 200, await reg.clone().text());
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${((await reg.json()) as { data: { tokens: { accessToken: string } } }).data.tokens.accessToken}` };

  // Dev account 1 of the public devnet mnemonic sends; a fresh address receives.
  const account = mnemonicToAccount('test test test test test test test test test test test junk', { addressIndex: 1 });
  const recipient = privateKeyToAddress(generatePrivateKey());
  const started = Date.now();
  const res = await fetch(`${api}/chain-abstraction/intent`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ fromNetwork: 'ethereum-sepolia', toNetwork: 'base-sepolia', amount: '0.5', sender: account.address, recipient }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const intent = ((await res.json()) as { data: Intent }).data;

  const chain = (id: number, url: string) => defineChain({ id, name: `chain-${id}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
  const origin = chain(intent.open.chainId, chains['ethereum-sepolia']?.http as string);
  const wallet = createWalletClient({ account, chain: origin, transport: http() });
  const hash = await wallet.sendTransaction({ to: intent.open.to, data: intent.open.data, value: BigInt(intent.open.value) });
  const receipt = await createPublicClient({ chain: origin, transport: http() }).waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, 'success');

  const settled = await waitFor(
    async () => {
      const r = await fetch(`${api}/chain-abstraction/intents/${intent.id}`, { headers });
      const now = ((await r.json()) as { data: Intent }).data;
      assert.ok(!['expired', 'refunded'].includes(now.status), `intent ${now.status}`);
      return now.status === 'settled' ? now : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: 'the intent settled' },
  );
  const elapsed = Date.now() - started;
  assert.ok(elapsed < 60_000, `settled in ${elapsed} ms`);
  assert.equal(settled.transactions.open?.txHash, hash);
  const destination = createPublicClient({ transport: http(chains['base-sepolia']?.http as string) });
  assert.equal(await destination.getBalance({ address: recipient }), parseEther(settled.outputAmount));
  assert.equal(settled.transactions.fill?.status, 'confirmed');
  assert.match(settled.transactions.fill?.txHash ?? '', /^0x[0-9a-f]{64}$/);
  const fill = await destination.getTransactionReceipt({ hash: settled.transactions.fill?.txHash as Hex });
  assert.equal(fill.status, 'success');
});
