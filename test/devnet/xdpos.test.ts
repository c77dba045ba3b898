// The native devnet chains answer every nat_* method (C25, C31): a responder in front of anvil
// derives the XDPoS answers from the chain. Called through the gateway, as a user would.
// slow: the devnet chains behind the app
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let key: string;

interface Reply {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** POSTs a call or a batch to the native devnet chain; the parsed answer. */
async function post(body: unknown): Promise<unknown> {
  const res = await fetch(`${t.url}/rpc/main/evm/50`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify(body),
  });
  // C22, C25: the native node is reachable, so every answer is 200, its errors and the gateway's
  // "nothing there" included; only a call no node could answer would be 502.
  assert.equal(res.status, 200);
  return res.json();
}

async function rpc(method: string, params: unknown[] = []): Promise<Reply> {
  return (await post({ jsonrpc: '2.0', id: 1, method, params })) as Reply;
}

async function anvil(method: string, params: unknown[]): Promise<unknown> {
  // The chain itself, past the responder: the WebSocket address is anvil's own port.
  const http = t.devnet!.upstreams['native-mainnet']!.ws.replace(/^ws/, 'http');
  const res = await fetch(http, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return ((await res.json()) as { result: unknown }).result;
}

before(async () => {
  t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], listen: true });
  ({ key } = await createKey(t.app));
  // Three epochs of 30 blocks, so that epoch 2 has a reward record for epoch 1.
  await anvil('anvil_mine', ['0x64']);
});

after(async () => {
  await t?.close();
});

describe('nat_* on the native devnet chain', () => {
  test('nat_getMasternodes names the first dev accounts, at the asked block', async () => {
    const { result, error } = await rpc('nat_getMasternodes', ['0x28']);
    assert.equal(error, undefined);
    const r = result as Record<string, unknown>;
    const accounts = t.devnet!.accounts.map((a) => a.address.toLowerCase());
    assert.deepEqual(r.masternodes, accounts.slice(0, 3));
    assert.deepEqual(r.standbynodes, accounts.slice(3, 5));
    assert.equal(r.number, 40);
    assert.equal(r.epoch, 1); // blocks 31..60
  });

  test('nat_getBlockByNumber answers the chain block with its signer and commitment', async () => {
    const block = (await anvil('eth_getBlockByNumber', ['0x10', false])) as { hash: string; timestamp: string };
    const { result } = await rpc('nat_getBlockByNumber', ['0x10']);
    const r = result as Record<string, unknown>;
    assert.equal(r.hash, block.hash);
    assert.equal(r.number, 16);
    assert.equal(r.round, 16);
    assert.equal(r.timestamp, Number(block.timestamp));
    assert.equal(r.committed, true);
    assert.equal(r.miner, t.devnet!.accounts[16 % 3]!.address.toLowerCase());
    // The node's own Error text for a block it does not have: -32000 with HTTP 200.
    const missing = await rpc('nat_getBlockByNumber', ['0xffffff']);
    assert.equal(missing.error?.code, -32000);
    assert.equal(missing.error?.message, 'can not find block from this number');
  });

  test('nat_getCandidates gives each candidate its balance on the chain as capacity', async () => {
    const { result } = await rpc('nat_getCandidates', [1]);
    const r = result as { success: boolean; candidates: Record<string, { capacity: string; status: string }> };
    assert.equal(r.success, true);
    const first = t.devnet!.accounts[0]!.address;
    const balance = BigInt((await anvil('eth_getBalance', [first, '0x1f'])) as string);
    assert.equal(r.candidates[first.toLowerCase()]?.capacity, balance.toString());
    assert.equal(r.candidates[first.toLowerCase()]?.status, 'MASTERNODE');
    assert.equal(r.candidates[t.devnet!.accounts[3]!.address.toLowerCase()]?.status, 'PROPOSED');
    const future = (await rpc('nat_getCandidates', [999])).result as { success: boolean };
    assert.equal(future.success, false);
  });

  test('rewards of an epoch are shared by the blocks each masternode signed', async () => {
    const accounts = t.devnet!.accounts.map((a) => a.address.toLowerCase());
    const rewards = await Promise.all(accounts.slice(0, 3).map(async (a) => (await rpc('nat_getValidatorReward', [2, a])).result as { sign: number; reward: string }));
    // Epoch 1 is blocks 31..60: 30 blocks, signed round-robin by three masternodes.
    assert.deepEqual(rewards.map((r) => r.sign), [10, 10, 10]);
    const total = rewards.reduce((sum, r) => sum + BigInt(r.reward), 0n);
    assert.ok(total <= 250n * 10n ** 18n && total > 249n * 10n ** 18n, `total ${total}`);
    const voter = (await rpc('nat_getVoterReward', [2, accounts[0], accounts[0]])).result;
    assert.equal(voter, (BigInt(rewards[0]!.reward) - BigInt(rewards[0]!.reward) / 10n).toString());
    assert.equal((await rpc('nat_getValidatorReward', [2, accounts[5]])).result, null);
  });

  test('an epoch the node has not reached is its own error, 200, single and in a batch', async () => {
    const a = t.devnet!.accounts[0]!.address;
    const notStarted = { code: -32000, message: 'epoch 999 has not started' };
    assert.deepEqual((await rpc('nat_getValidatorReward', [999, a])).error, notStarted);
    const batch = (await post([
      { jsonrpc: '2.0', id: 'v', method: 'nat_getValidatorReward', params: [999, a] },
      { jsonrpc: '2.0', id: 'w', method: 'nat_getVoterReward', params: [999, a, a] },
      { jsonrpc: '2.0', id: 'n', method: 'eth_chainId', params: [] },
    ])) as Reply[];
    assert.deepEqual(batch.map((r) => r.error ?? r.result), [notStarted, notStarted, '0x32']);
  });

  test('an epoch whose block keeps no reward record is -32000 saying so, 200', async () => {
    // Epoch 0 is block 0 alone, which pays no epoch before it.
    const { error } = await rpc('nat_getValidatorReward', [0, t.devnet!.accounts[0]!.address]);
    assert.equal(error?.code, -32000);
    assert.match(error?.message ?? '', /^no reward record for epoch 0: /);
  });

  test('everything else reaches anvil unchanged', async () => {
    assert.equal((await rpc('eth_chainId')).result, '0x32');
  });
});

describe('the devnet networks', () => {
  test('have no block explorer (explorerUrl null), not the real network\'s', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/networks/native-mainnet' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().data.explorerUrl, null);
  });
});
