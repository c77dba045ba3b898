// C26: WebSocket subscribers miss nothing when the gateway's upstream connection
// drops. The hub's connection to a devnet chain (mining every second) goes through a relay that
// the test cuts and keeps refusing while blocks are mined and events emitted; once the relay lets
// the hub back in, the client must have seen every block number once, in order, and every log.
// (The hub's gap fill on a scripted node: test/upstreams/gap-fill.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { encodeFunctionData, type Hex } from 'viem';
import { rpc, waitForReceipt } from '../../../src/json/rpc-client.ts';
import { createKey } from '../../support/app.ts';
import { TINY_ABI, TINY_BYTECODE } from '../../support/tiny-contract.ts';
import { waitFor } from '../../support/wait.ts';
import { type Client, connect, type Head, type Log, type Relay, startRelayedGateway, wsAddress } from '../../support/ws.ts';

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
