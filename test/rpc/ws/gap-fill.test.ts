// C26: WebSocket subscribers miss nothing when the gateway's upstream connection
// drops. The hub's connection to a devnet chain (mining every second) goes through a relay that
// the test cuts and keeps refusing while blocks are mined and events emitted; once the relay lets
// the hub back in, the client must have seen every block number once, in order, and every log.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { encodeFunctionData, type Hex } from 'viem';
import { rpc, waitForReceipt } from '../../../src/json/rpc-client.ts';
import WebSocket, { WebSocketServer } from 'ws';
import { createKey, startTestApp } from '../../support/app.ts';
import { startFakeNode } from '../../support/fake-node.ts';
import { TINY_ABI, TINY_BYTECODE } from '../../support/tiny-contract.ts';
import { waitFor } from '../../support/wait.ts';
import { type Client, connect, type Head, type Log, type Relay, startRelayedGateway, withUpstreams, wsAddress } from '../../support/ws.ts';

let g: Awaited<ReturnType<typeof startRelayedGateway>>;
let key: string;
let relay: Relay;

before(async () => {
  g = await startRelayedGateway(['native-mainnet'], {
    // No whale alerts: the block follower would share the hub's newHeads topic.
    overrides: { ws: { reconnectMinMs: 50, reconnectMaxMs: 300, upstreamTimeoutMs: 5_000, gapFillMaxBlocks: 128 }, whaleAlerts: { networks: [] } },
  });
  relay = g.relays['native-mainnet']?.[0] as Relay;
  key = (await createKey(g.t.app, { networks: ['native-mainnet'] })).key;
});

after(async () => {
  await g?.close();
});

const chain = () => g.devnet.upstreams['native-mainnet'] as { http: string; ws: string };
const from = () => g.devnet.accounts[1]?.address as Hex;
const headOfChain = async () => Number.parseInt(await rpc<string>(chain().http, 'eth_blockNumber', []), 16);

/** Sends a transaction from an unlocked dev account and waits until it is in a block. */
async function send(tx: { to?: Hex; data: Hex }): Promise<{ contractAddress?: string | null }> {
  const hash = await rpc<Hex>(chain().http, 'eth_sendTransaction', [{ from: from(), ...tx }]);
  return waitForReceipt(chain().http, hash);
}
const store = (to: Hex, value: bigint) => send({ to, data: encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [value] }) });

const numbersOf = (c: Client, id: string) => c.notificationsOf<Head>(id).map((m) => Number(m.params.result.number));

describe('gap fill after an upstream reconnect', () => {
  test('newHeads and logs subscribers get every block and log of the outage once, in order, before live ones', async () => {
    const contract = (await send({ data: TINY_BYTECODE })).contractAddress as Hex;
    const c = await connect(wsAddress(g.t, `/ws?apiKey=${key}`));
    const heads = await c.subscribe(['newHeads']);
    const logs = await c.subscribe(['logs', { address: contract }]);
    await waitFor(() => numbersOf(c, heads).length >= 2, { timeoutMs: 15_000, what: 'two live blocks' });
    await store(contract, 1n);
    await waitFor(() => c.notificationsOf(logs).length === 1, { timeoutMs: 15_000, what: 'the first log, live' });

    // The hub's connection is cut and cannot come back while blocks are mined and events emitted.
    const beforeCut = numbersOf(c, heads).at(-1) as number;
    relay.refuse(true);
    relay.cut();
    await store(contract, 2n);
    await store(contract, 3n);
    await waitFor(async () => (await headOfChain()) >= beforeCut + 5, { timeoutMs: 20_000, what: 'five blocks mined during the outage' });
    const reopenedAt = await headOfChain();
    const seenDuringOutage = numbersOf(c, heads).length;
    relay.refuse(false);

    // Back: the blocks and logs of the outage arrive first, then live blocks go on.
    await waitFor(() => (numbersOf(c, heads).at(-1) ?? 0) >= reopenedAt + 2, { timeoutMs: 20_000, what: 'live blocks after the reconnect' });
    const numbers = numbersOf(c, heads);
    assert.ok(numbers.length > seenDuringOutage, 'blocks arrived after the reconnect');
    const first = numbers[0] as number;
    assert.deepEqual(
      numbers,
      numbers.map((_, i) => first + i),
      'every block number once, in order',
    );
    // Blocks sent from the gap fill have the shape of live ones (the header's members, no transactions list).
    const shapes = new Set(c.notificationsOf<Record<string, unknown>>(heads).map((m) => Object.keys(m.params.result).sort().join()));
    assert.equal(shapes.size, 1, 'every block notification has the same members');
    const values = c.notificationsOf<Log>(logs).map((m) => BigInt(m.params.result.data));
    assert.deepEqual(values, [1n, 2n, 3n], 'every log once, in order');
    const stats = g.t.app.parts.upstreams.peekHub('native-mainnet')?.stats();
    assert.ok((stats?.gapFilled ?? 0) >= 5 + 2, `the hub filled the gap (${stats?.gapFilled})`);
    assert.ok((stats?.reconnects ?? 0) >= 1);
    await c.close();
  });
});

describe('gap fill on a scripted node', () => {
  test('fills at most gapFillMaxBlocks blocks (the latest), then live ones; a block seen twice is sent once', async () => {
    // A node's WebSocket side that answers what the hub asks and emits heads when told.
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(server, 'listening');
    let head = 0;
    const block = (n: number) => ({ number: `0x${n.toString(16)}`, hash: `0x${n.toString(16).padStart(64, '0')}`, parentHash: `0x${(n - 1).toString(16).padStart(64, '0')}` });
    const subs = new Set<{ ws: WebSocket; id: string }>();
    server.on('connection', (ws) => {
      ws.on('error', () => {});
      ws.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8')) as { id: number; method: string; params: unknown[] };
        const answer = (result: unknown) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
        if (m.method === 'eth_subscribe') {
          const id = `0x${subs.size + 1}`;
          subs.add({ ws, id });
          answer(id);
        } else if (m.method === 'eth_blockNumber') answer(`0x${head.toString(16)}`);
        else if (m.method === 'eth_getBlockByNumber') {
          const n = Number.parseInt(m.params[0] as string, 16);
          answer(n <= head ? { ...block(n), transactions: [] } : null);
        } else answer(true);
      });
    });
    const emit = (n: number) => {
      for (const s of subs) if (s.ws.readyState === WebSocket.OPEN) s.ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: s.id, result: block(n) } }));
    };
    const node = await startFakeNode();
    const t = await startTestApp({
      listen: true,
      overrides: {
        networks: withUpstreams({ ethereum: [{ http: node.url, ws: `ws://127.0.0.1:${(server.address() as AddressInfo).port}` }] }),
        ws: { reconnectMinMs: 50, reconnectMaxMs: 200, upstreamTimeoutMs: 5_000, gapFillMaxBlocks: 3 },
        whaleAlerts: { networks: [] },
      },
    });
    try {
      const k = (await createKey(t.app, { networks: ['ethereum'] })).key;
      const c = await connect(wsAddress(t, `/ws/ethereum?apiKey=${k}`));
      const id = await c.subscribe(['newHeads']);
      for (head = 1; head <= 2; head++) emit(head);
      head = 2;
      await waitFor(() => numbersOf(c, id).length === 2, { what: 'two live blocks' });
      // The connection drops; the node moves on by 18 blocks meanwhile.
      head = 20;
      for (const s of subs) s.ws.terminate();
      subs.clear();
      await waitFor(() => subs.size === 1, { what: 'the hub subscribed again' });
      await waitFor(() => numbersOf(c, id).length === 5, { what: 'three filled blocks' });
      emit(20); // live, already filled: not sent again
      head = 21;
      emit(21);
      await waitFor(() => numbersOf(c, id).at(-1) === 21, { what: 'a live block after the fill' });
      assert.deepEqual(numbersOf(c, id), [1, 2, 18, 19, 20, 21]);
      const filled = c.notificationsOf<Record<string, unknown>>(id)[2]?.params.result;
      assert.deepEqual(Object.keys(filled ?? {}).sort(), ['hash', 'number', 'parentHash'], 'cut to the members of a live header');
      assert.equal(t.app.parts.upstreams.peekHub('ethereum')?.stats().duplicatesDropped, 1);
      await c.close();
    } finally {
      await t.close();
      await node.close();
      for (const ws of server.clients) ws.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
