// eth_subscribe over the gateway (spec 6.1): newHeads, logs and newPendingTransactions, shared
// upstream subscriptions (counted at a relay between the gateway and the node), per-client ids,
// reconnection that keeps them, and real clients (viem's webSocket transport).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  createPublicClient,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  pad,
  parseEther,
  toEventSelector,
  webSocket,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { mainnet } from 'viem/chains';
import { createKey } from '../../support/app.ts';
import { TINY_ABI, TINY_BYTECODE } from '../../support/tiny-contract.ts';
import { waitFor } from '../../support/wait.ts';
import { connect, type Head, type Log, type Relay, sleep, startRelayedGateway, wsAddress } from '../../support/ws.ts';

let g: Awaited<ReturnType<typeof startRelayedGateway>>;
let key: string;
let native: [Relay, Relay];
let eth: Relay;

const STORED = toEventSelector('Stored(address,uint256)');

before(async () => {
  // native-mainnet has two upstreams (two relays to the same chain) to show failover.
  g = await startRelayedGateway(['native-mainnet', 'ethereum'], {
    relaysPerNetwork: 2,
    // No whale alerts: the block follower's own newHeads subscription would share the hub and
    // change the counts these tests make of the clients' subscriptions.
    overrides: { ws: { reconnectMinMs: 50, reconnectMaxMs: 1_000, upstreamTimeoutMs: 5_000 }, whaleAlerts: { networks: [] } },
  });
  native = g.relays['native-mainnet'] as [Relay, Relay];
  eth = g.relays.ethereum?.[0] as Relay;
  // A free account may name up to 5 networks (C16).
  key = (await createKey(g.t.app, { networks: ['native-mainnet', 'ethereum'] })).key;
});

after(async () => {
  await g?.close();
});

const url = (network = '') => wsAddress(g.t, `/ws${network ? `/${network}` : ''}?apiKey=${key}`);
const hub = (slug: string) => g.t.app.parts.upstreams.peekHub(slug)?.stats();
const upstreamSubscribes = (relays: Relay[]) => relays.reduce((n, r) => n + r.count('eth_subscribe'), 0);
const upstreamUnsubscribes = (relays: Relay[]) => relays.reduce((n, r) => n + r.count('eth_unsubscribe'), 0);

describe('newHeads', () => {
  test('two clients share one upstream subscription, each under its own id; it is dropped when the last one leaves', async () => {
    const before = upstreamSubscribes(native);
    const a = await connect(url());
    const b = await connect(url());
    const idA = await a.subscribe(['newHeads']);
    const idB = await b.subscribe(['newHeads']);
    assert.notEqual(idA, idB);
    assert.match(idA, /^0x[0-9a-f]{32}$/);
    assert.equal(upstreamSubscribes(native) - before, 1, 'one eth_subscribe upstream for two clients');

    // The same block reaches both, each under its own id.
    const noteA = await a.notification<Head>(idA);
    const noteB = await b.next<Head>((m) => m.params?.subscription === idB && m.params.result.number === noteA.params.result.number);
    assert.equal(noteB.params.result.hash, noteA.params.result.hash);
    assert.equal(noteA.jsonrpc, '2.0');
    assert.equal(noteA.method, 'eth_subscription');

    assert.equal((await a.call('eth_unsubscribe', [idA])).result, true);
    assert.equal((await a.call('eth_unsubscribe', [idA])).result, false, 'already gone');
    assert.equal((await a.call('eth_unsubscribe', [idB])).result, false, "another client's id is not ours");
    const unsubscribesBefore = upstreamUnsubscribes(native);
    await b.notification(idB);
    assert.equal(upstreamUnsubscribes(native), unsubscribesBefore, 'B still follows the stream');

    // The last client disconnects without unsubscribing: the upstream subscription goes too.
    await b.close();
    await waitFor(() => upstreamUnsubscribes(native) === unsubscribesBefore + 1, { timeoutMs: 5_000, what: 'upstream eth_unsubscribe' });
    assert.equal(hub('native-mainnet')?.topics, 0);
    const countA = a.notificationsOf(idA).length;
    // An absence over more than one block time (the native devnet mines every second): nothing to poll for.
    await sleep(1_300);
    assert.equal(a.notificationsOf(idA).length, countA, 'no notification after eth_unsubscribe');
    await a.close();
  });

  test("viem's webSocket transport watches blocks through the gateway, on the same upstream subscription as a raw client", async () => {
    const raw = await connect(url());
    const rawId = await raw.subscribe(['newHeads']);
    const before = upstreamSubscribes(native);
    const client = createPublicClient({ transport: webSocket(url()) });
    assert.equal(await client.getChainId(), 50);
    const numbers: bigint[] = [];
    const hashes: string[] = [];
    const unwatchNumbers = client.watchBlockNumber({ onBlockNumber: (n) => void numbers.push(n), onError: (e) => assert.fail(e) });
    const unwatchBlocks = client.watchBlocks({ onBlock: (b) => void hashes.push(b.hash as string), onError: (e) => assert.fail(e) });
    await waitFor(() => numbers.length >= 2 && hashes.length >= 2, { timeoutMs: 8_000, what: 'two blocks from viem' });
    assert.ok((numbers[1] as bigint) > (numbers[0] as bigint));
    assert.equal(upstreamSubscribes(native), before, 'viem joined the running newHeads subscription');
    assert.equal(hub('native-mainnet')?.topics, 1);
    assert.equal(hub('native-mainnet')?.subscribers, 3);
    unwatchNumbers();
    unwatchBlocks();
    (await client.transport.getRpcClient()).close();
    await raw.call('eth_unsubscribe', [rawId]);
    await raw.close();
  });
});

describe('logs and pending transactions', () => {
  const chain = () => g.devnet.upstreams.ethereum as { http: string; ws: string };
  const wallet = (i: number) =>
    createWalletClient({ account: privateKeyToAccount(g.devnet.accounts[i]?.privateKey as Hex), transport: http(chain().http), chain: mainnet });
  const publicNode = () => createPublicClient({ transport: http(chain().http) });

  async function deploy(): Promise<Hex> {
    const hash = await wallet(0).deployContract({ abi: TINY_ABI, bytecode: TINY_BYTECODE });
    const receipt = await publicNode().waitForTransactionReceipt({ hash, pollingInterval: 50 });
    return receipt.contractAddress as Hex;
  }

  async function store(i: number, address: Hex, value: bigint): Promise<Hex> {
    const hash = await wallet(i).writeContract({ address, abi: TINY_ABI, functionName: 'store', args: [value] });
    await publicNode().waitForTransactionReceipt({ hash, pollingInterval: 50 });
    return hash;
  }

  test('one upstream subscription per distinct filter (equivalent filters share one); each client gets only the logs its filter matches', async () => {
    const x = await deploy();
    const y = await deploy();
    const sender1 = g.devnet.accounts[1]?.address as Hex;
    const before = eth.count('eth_subscribe');
    const a = await connect(url('ethereum'));
    const b = await connect(url('ethereum'));
    const c = await connect(url('ethereum'));
    const d = await connect(url('ethereum'));
    const idA = await a.subscribe(['logs', { address: x }]);
    // The same filter written differently: upper-case hex in a list, empty topics.
    const idB = await b.subscribe(['logs', { address: [`0x${x.slice(2).toUpperCase()}`], topics: [] }]);
    const idC = await c.subscribe(['logs', { topics: [STORED, pad(sender1).toLowerCase()] }]);
    const idD = await d.subscribe(['logs', { address: y }]);
    assert.equal(eth.count('eth_subscribe') - before, 3, 'A and B share one upstream subscription');

    // viem's watchContractEvent (topics: the event) and getLogs, over the gateway's WebSocket.
    const viem = createPublicClient({ transport: webSocket(url('ethereum')) });
    const events: Array<{ value?: bigint }> = [];
    const unwatch = viem.watchContractEvent({ address: x, abi: TINY_ABI, eventName: 'Stored', onLogs: (logs) => events.push(...logs.map((l) => l.args)) });
    await waitFor(() => eth.count('eth_subscribe') - before === 4, { timeoutMs: 5_000, what: "viem's subscription" });

    await store(0, x, 7n);
    const logA = await a.notification<Log>(idA);
    const logB = await b.notification<Log>(idB);
    assert.equal(getAddress(logA.params.result.address), getAddress(x));
    assert.equal(BigInt(logA.params.result.data), 7n);
    assert.deepEqual(logB.params.result, logA.params.result);
    await waitFor(() => events.length === 1, { timeoutMs: 5_000, what: "viem's event" });
    assert.equal(events[0]?.value, 7n);

    await store(1, y, 8n);
    const logC = await c.notification<Log>(idC);
    const logD = await d.notification<Log>(idD);
    assert.equal(BigInt(logC.params.result.data), 8n);
    assert.equal(logC.params.result.topics[1], pad(sender1).toLowerCase());
    assert.equal(logD.params.result.transactionHash, logC.params.result.transactionHash);
    // An absence: give a stray notification time to arrive.
    await sleep(300);
    assert.equal(a.notificationsOf(idA).length, 1, 'A saw only the log of x');
    assert.equal(c.notificationsOf(idC).length, 1, "C saw only sender 1's log");
    assert.equal(d.notificationsOf(idD).length, 1, 'D saw only the log of y');

    const logs = await viem.getLogs({ address: x, fromBlock: 0n });
    assert.equal(logs.length, 1);
    unwatch();
    (await viem.transport.getRpcClient()).close();
    for (const cl of [a, b, c, d]) await cl.close();
    await waitFor(() => eth.count('eth_unsubscribe') >= 4, { timeoutMs: 5_000, what: 'every logs subscription dropped upstream' });
  });

  test('newPendingTransactions notifies the hash of a sent transaction', async () => {
    const c = await connect(url('ethereum'));
    const id = await c.subscribe(['newPendingTransactions']);
    const hash = await wallet(2).sendTransaction({ to: g.devnet.accounts[3]?.address as Hex, value: parseEther('1') });
    const note = await c.next((m) => m.params?.subscription === id && m.params.result === hash);
    assert.equal(note.params.result, hash);
    await c.close();
  });

  test('refuses unsupported subscriptions and bad filters with -32602; ignores a subscription sent without an id', async () => {
    const c = await connect(url());
    for (const params of [['syncing'], [], ['logs', { address: 'nope' }], ['logs', { fromBlock: '0x1' }], ['logs', { topics: [1] }], ['newHeads', { x: 1 }]]) {
      const answer = await c.call('eth_subscribe', params);
      assert.equal(answer.error?.code, -32602, JSON.stringify(params));
    }
    assert.equal((await c.call('eth_unsubscribe', [])).error?.code, -32602);
    c.ws.send('{"jsonrpc":"2.0","method":"eth_subscribe","params":["newHeads"]}');
    assert.equal((await c.call('eth_chainId')).result, '0x32');
    assert.equal(c.messages.filter((m) => m.method === 'eth_subscription').length, 0);
    await c.close();
  });

  test('a batch may mix eth_subscribe with other calls, answered in request order', async () => {
    const c = await connect(url());
    c.ws.send(
      JSON.stringify([
        { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
        { jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['newHeads'] },
        { jsonrpc: '2.0', id: 3, method: 'net_version', params: [] },
      ]),
    );
    const answers = (await c.next((m) => Array.isArray(m))) as unknown as Array<{ id: number; result: string }>;
    assert.deepEqual(answers.map((x) => x.id), [1, 2, 3]);
    await c.notification(answers[1]?.result as string);
    await c.close();
  });
});

describe('upstream failures', () => {
  test('when the upstream connection drops, the hub reconnects to the next upstream, subscribes again, and clients keep their ids', async () => {
    const a = await connect(url());
    const b = await connect(url());
    const idA = await a.subscribe(['newHeads']);
    const idB = await b.subscribe(['newHeads']);
    const idL = await b.subscribe(['logs', {}]);
    await a.notification(idA);
    const [first, second] = native;
    const active = first.open === 1 ? first : second;
    const other = active === first ? second : first;
    const otherBefore = other.count('eth_subscribe');

    const lastBefore = Number(a.notificationsOf<Head>(idA).at(-1)?.params.result.number);
    active.refuse(true);
    active.cut();
    // Both topics are subscribed again on the other upstream.
    await waitFor(() => other.count('eth_subscribe') - otherBefore === 2, { timeoutMs: 5_000, what: 'resubscription on the other upstream' });
    const afterA = await a.next<Head>((m) => m.params?.subscription === idA && Number(m.params.result.number) > lastBefore);
    const afterB = await b.next<Head>((m) => m.params?.subscription === idB && Number(m.params.result.number) > lastBefore);
    assert.equal(afterA.params.result.hash, afterB.params.result.hash);
    assert.equal(hub('native-mainnet')?.reconnects, 1);

    // And back again when that one drops.
    active.refuse(false);
    const activeBefore = active.count('eth_subscribe');
    const lastMiddle = Number(afterA.params.result.number);
    other.cut();
    await waitFor(() => active.count('eth_subscribe') - activeBefore === 2, { timeoutMs: 5_000, what: 'resubscription on the first upstream' });
    await a.next<Head>((m) => m.params?.subscription === idA && Number(m.params.result.number) > lastMiddle);
    assert.equal((await b.call('eth_unsubscribe', [idL])).result, true, 'ids survive reconnections');
    await a.close();
    await b.close();
  });
});
