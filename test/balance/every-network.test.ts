// C40 on every network of the devnet (all 16 chains): each chain's entry of the unified balance
// equals eth_getBalance of that chain at the block the answer names, mainnets by default and
// testnets with ?testnets=true.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createPublicClient, http, parseEther } from 'viem';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

let t: TestApp;
let auth: { authorization: string };
const HOLDER = '0x00000000000000000000000000000000000b0b01';

interface Entry {
  network: string;
  chainId: number;
  balanceRaw: string;
  blockNumber: number;
}

before(async () => {
  t = await startTestApp({ devnet: true, listen: true });
  ({ auth } = await registerUser(t.app));
  // A different balance on each chain, so that no chain can stand in for another.
  await Promise.all(
    t.config.networks.map(async (n, i) => {
      const url = t.devnet!.upstreams[n.slug]!.http;
      await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_setBalance', params: [HOLDER, `0x${(parseEther('1') * BigInt(i + 1) + 7n).toString(16)}`] }),
      });
    }),
  );
});

after(async () => {
  await t?.close();
});

for (const testnets of [false, true]) {
  test(`every ${testnets ? 'testnet' : 'mainnet'}: the answer equals eth_getBalance at the answered block`, async () => {
    const res = await t.app.inject({ method: 'GET', url: `/api/v1/chain-abstraction/balance/${HOLDER}${testnets ? '?testnets=true' : ''}`, headers: auth });
    assert.equal(res.statusCode, 200, res.body);
    const data = res.json().data as { assets: { chains: Entry[] }[]; errors: { network: string; code: string }[] };
    // The shipped USDC/USDT addresses hold no contract on a local chain (--devnet swaps them for its
    // test token; test apps keep the shipped list): those are token errors, never a network's.
    assert.deepEqual(data.errors.filter((e) => e.code !== 'TOKEN_ERROR'), []);
    const entries = new Map(data.assets.flatMap((a) => a.chains).filter((c) => BigInt(c.balanceRaw) > 0n).map((c) => [c.network, c]));
    const expected = t.config.networks.filter((n) => (n.type === 'testnet') === testnets);
    assert.equal(expected.length, 8);
    for (const n of expected) {
      const entry = entries.get(n.slug);
      assert.ok(entry, `${n.slug} is in the answer`);
      assert.equal(entry.chainId, n.chainId);
      const client = createPublicClient({ transport: http(t.devnet!.upstreams[n.slug]!.http) });
      const onChain = await client.getBalance({ address: HOLDER, blockNumber: BigInt(entry.blockNumber) });
      assert.equal(entry.balanceRaw, onChain.toString(), n.slug);
      assert.equal(onChain, parseEther('1') * BigInt(t.config.networks.indexOf(n) + 1) + 7n);
    }
    assert.equal(entries.size, 8, 'no chain of the other kind');
  });
}
