// C26: a filter stays on the upstream that made it. The network has two upstreams,
// scripted nodes (they count calls and can fail) in front of two different devnet chains, so a
// filter read on the wrong node would show the other chain's blocks or "filter not found".
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPublicClient, http as viemHttp } from 'viem';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { rpc } from '../../src/json/rpc-client.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { connect, withUpstreams, wsAddress } from '../support/ws.ts';

let devnet: Devnet;
let t: TestApp;
let key: string;
let a: FakeNode;
let b: FakeNode;
let chainA: string;
let chainB: string;

before(async () => {
  // Two chains (mining on demand), one behind each upstream of the ethereum network.
  devnet = await startDevnet({
    networks: [
      { slug: 'ethereum', chainId: 1, native: false },
      { slug: 'sepolia', chainId: 11155111, native: false },
    ],
    nativeBlockTimeSeconds: 1,
  });
  chainA = (devnet.upstreams.ethereum as { http: string }).http;
  chainB = (devnet.upstreams.sepolia as { http: string }).http;
  a = await startFakeNode({ forwardTo: chainA });
  b = await startFakeNode({ forwardTo: chainB });
  t = await startTestApp({
    listen: true,
    overrides: {
      networks: withUpstreams({ ethereum: [{ http: a.url, name: 'a' }, { http: b.url, name: 'b' }] }),
      rpc: { healthIntervalMs: 200, maxLagBlocks: 1_000_000 },
      whaleAlerts: { networks: [] },
    },
  });
  key = (await createKey(t.app, { networks: ['ethereum'] })).key;
});

after(async () => {
  await t?.close();
  await a?.close();
  await b?.close();
  await devnet?.stop();
});

const gateway = (k = key) => `${t.url}/v1/ethereum/${k}`;
async function call(method: string, params: unknown[] = [], k = key): Promise<{ status: number; result?: unknown; error?: { code: number; message: string } }> {
  const res = await fetch(gateway(k), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) });
  return { status: res.status, ...((await res.json()) as { result?: unknown; error?: { code: number; message: string } }) };
}
const mine = (url: string) => rpc(url, 'evm_mine', []);
const hashOn = async (url: string, hash: string) => (await rpc<unknown>(url, 'eth_getBlockByHash', [hash, false])) !== null;
const count = (n: FakeNode, m: string) => n.callCount(m);
/** The filter id the node was asked about in its latest call of `method`. */
const nodeIdAsked = (n: FakeNode, method: string) => (n.log.filter((c) => c.method === method).at(-1)?.params as string[] | undefined)?.[0];

describe('filters pinned to their upstream', () => {
  test('a filter made on one upstream is read there only, even after the other took over; ids are the gateway’s', async () => {
    // Both answer: the first upstream makes the filter (viem's createBlockFilter through the gateway).
    const client = createPublicClient({ transport: viemHttp(gateway()) });
    const onA = await client.createBlockFilter();
    assert.match(onA.id, /^0x[0-9a-f]{32}$/);
    assert.equal(count(a, 'eth_newBlockFilter'), 1);

    // A fails: reads move to B, and a new filter is made there.
    await a.setMode('refuse');
    const onB = await call('eth_newBlockFilter');
    assert.equal(onB.status, 200);
    assert.equal(count(b, 'eth_newBlockFilter'), 1);
    await a.setMode('ok');
    await waitFor(() => t.app.parts.upstreams.pool('ethereum').health()[0]?.state === 'up', { what: 'A answering again' });

    await mine(chainA);
    await mine(chainB);
    const changesA = await client.getFilterChanges({ filter: onA });
    assert.ok(changesA.length >= 1);
    for (const h of changesA) assert.ok(await hashOn(chainA, h), 'blocks of the chain behind A');
    assert.equal(count(b, 'eth_getFilterChanges'), 0, 'B was never asked about A’s filter');
    assert.notEqual(nodeIdAsked(a, 'eth_getFilterChanges'), onA.id, 'the node is asked with its own id');

    const changesB = await call('eth_getFilterChanges', [onB.result]);
    assert.ok(Array.isArray(changesB.result) && changesB.result.length >= 1);
    for (const h of changesB.result as string[]) assert.ok(await hashOn(chainB, h), 'blocks of the chain behind B');
    assert.equal(count(a, 'eth_getFilterChanges'), 1, 'A was never asked about B’s filter');

    assert.equal((await call('eth_uninstallFilter', [onA.id])).result, true);
    assert.equal(count(a, 'eth_uninstallFilter'), 1);
    assert.equal((await call('eth_uninstallFilter', [onB.result])).result, true);
    assert.equal(count(b, 'eth_uninstallFilter'), 1);
  });

  test('an unknown id, a removed one, one of another account, or one whose node is gone is "filter not found"', async () => {
    const before = count(a, 'eth_getFilterChanges') + count(b, 'eth_getFilterChanges');
    const unknown = await call('eth_getFilterChanges', [`0x${'ab'.repeat(16)}`]);
    assert.equal(unknown.status, 200);
    assert.deepEqual(unknown.error, { code: -32000, message: 'filter not found' });
    assert.equal((await call('eth_getFilterLogs', [`0x${'ab'.repeat(16)}`])).error?.message, 'filter not found');
    assert.equal((await call('eth_uninstallFilter', [`0x${'ab'.repeat(16)}`])).result, false, 'as geth: nothing to remove');
    assert.equal((await call('eth_getFilterChanges', [])).error?.code, -32602);

    const made = (await call('eth_newFilter', [{ fromBlock: 'latest' }])).result as string;
    const stranger = (await createKey(t.app, { networks: ['ethereum'] })).key;
    assert.equal((await call('eth_getFilterChanges', [made], stranger)).error?.message, 'filter not found', 'another account’s filter');
    assert.equal(count(a, 'eth_getFilterChanges') + count(b, 'eth_getFilterChanges'), before, 'no node was asked');
    assert.deepEqual((await call('eth_getFilterLogs', [made])).result, [], 'its owner reads it');

    // Its node goes away: not found, and B is never asked in its place.
    const holder = count(a, 'eth_newFilter') > 0 ? a : b;
    const other = holder === a ? b : a;
    const otherBefore = count(other, 'eth_getFilterChanges');
    await holder.setMode('refuse');
    assert.deepEqual((await call('eth_getFilterChanges', [made])).error, { code: -32000, message: 'filter not found' });
    assert.equal(count(other, 'eth_getFilterChanges'), otherBefore);
    await holder.setMode('ok');
    assert.equal((await call('eth_getFilterChanges', [made])).error?.message, 'filter not found', 'forgotten, even with the node back');
  });

  test('a filter made over the WebSocket is read over HTTP (one pipeline, one set of filters)', async () => {
    const ws = await connect(wsAddress(t, `/ws/ethereum?apiKey=${key}`));
    const made = await ws.call<string>('eth_newBlockFilter');
    assert.match(made.result, /^0x[0-9a-f]{32}$/);
    await mine(chainA);
    await mine(chainB);
    const changes = await call('eth_getFilterChanges', [made.result]);
    assert.ok(Array.isArray(changes.result) && changes.result.length >= 1);
    assert.equal((await ws.call('eth_uninstallFilter', [made.result])).result, true);
    await ws.close();
  });
});
