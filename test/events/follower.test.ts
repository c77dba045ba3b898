// The block follower (C33) in front of a real anvil chain: blocks in order and exactly once with
// exact transaction fields, restarts in the middle of a backlog, the catch-up limit, and a
// failing or stalled node on one network that does not hold up another.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { createWalletClient, defineChain, type Hex, http, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { followerCursors } from '../../src/events/schema.ts';
import { createTestDatabase, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import {
  chainHead,
  chainRpc,
  createSeenTable,
  mine,
  notExactlyOnce,
  Recorder,
  SEPOLIA,
  seenRows,
  startFollowingApp,
  TableRecorder,
} from './helpers.ts';

const SEPOLIA_ID = 11_155_111;
const AMOY = 'polygon-amoy';

let devnet: Devnet;
let chainUrl: string;
const dirs: string[] = [];
const drops: Array<() => Promise<void>> = [];
const pgSkip = await serviceSkip('PostgreSQL');
const apps: TestApp[] = [];

before(async () => {
  devnet = await startDevnet({ networks: [{ slug: SEPOLIA, chainId: SEPOLIA_ID }], nativeBlockTimeSeconds: 1 });
  chainUrl = devnet.upstreams[SEPOLIA]?.http as string;
});
after(async () => {
  for (const a of apps) await a.close().catch(() => {});
  await devnet?.stop();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
  for (const drop of drops) await drop();
});

/**
 * Storage that outlives an app, for restarts: a PostgreSQL database when the server answers (a
 * new PGlite directory costs an initdb of many seconds), else a PGlite directory.
 */
async function lastingStorage(): Promise<{ databaseUrl: string } | { dataDir: string }> {
  if (!pgSkip) {
    const db = await createTestDatabase();
    drops.push(() => db.drop());
    return { databaseUrl: db.url };
  }
  const d = await mkdtemp(path.join(tmpdir(), 'junction-follower-'));
  dirs.push(d);
  return { dataDir: d };
}

async function app(opts: Parameters<typeof startFollowingApp>[1] = {}, upstreams: Record<string, string> = { [SEPOLIA]: chainUrl }): Promise<TestApp> {
  const a = await startFollowingApp(upstreams, opts);
  apps.push(a);
  return a;
}

async function closeApp(a: TestApp): Promise<void> {
  apps.splice(apps.indexOf(a), 1);
  await a.close();
}

const cursorOf = async (a: TestApp, network: string): Promise<number | undefined> =>
  (await a.storage.db.select().from(followerCursors).where(eq(followerCursors.network, network)))[0]?.nextBlock;

const statsOf = (a: TestApp, network: string) => a.app.parts.follower.stats().find((s) => s.network === network);

describe('block follower on a devnet chain (C33)', () => {
  test('hands every block once, in order, with the exact fields of its transactions', async () => {
    const a = await app();
    const rec = new Recorder([SEPOLIA]);
    // Registered after the start: the follower asks for its networks at once.
    a.app.parts.follower.register(rec);
    await waitFor(() => statsOf(a, SEPOLIA)?.leaseHeld && rec.numbers(SEPOLIA).length > 0, { what: 'the follower to take the network' });

    const chain = defineChain({ id: SEPOLIA_ID, name: 'sepolia devnet', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [chainUrl] } } });
    const sender = privateKeyToAccount(devnet.accounts[3]?.privateKey as Hex);
    const wallet = createWalletClient({ account: sender, chain, transport: http(chainUrl) });
    const recipient = privateKeyToAddress(generatePrivateKey());
    // More wei than a double holds exactly.
    const value = parseEther('1234.567890123456789') + 7n;
    const transfer = await wallet.sendTransaction({ to: recipient, value, data: '0xc0ffee' });
    // A contract creation has no `to`.
    const creation = await wallet.sendTransaction({ data: '0x00' });
    await mine(chainUrl, 25);
    const head = await chainHead(chainUrl);

    await waitFor(() => rec.numbers(SEPOLIA).at(-1) === head, { what: `block ${head} handed on` });
    const numbers = rec.numbers(SEPOLIA);
    const first = numbers[0] as number;
    assert.deepEqual(numbers, Array.from({ length: head - first + 1 }, (_, i) => first + i), 'each block once, in order, none left out');

    const found = rec.committed.flatMap((b) => b.transactions.map((tx) => ({ b, tx }))).find(({ tx }) => tx.hash === transfer);
    assert.ok(found, 'the transfer is in a handed block');
    const receipt = await chainRpc<{ blockNumber: Hex; blockHash: Hex; transactionIndex: Hex }>(chainUrl, 'eth_getTransactionReceipt', [transfer]);
    const block = await chainRpc<{ timestamp: Hex }>(chainUrl, 'eth_getBlockByNumber', [receipt.blockNumber, false]);
    assert.equal(found.b.network, SEPOLIA);
    assert.equal(found.b.chainId, SEPOLIA_ID);
    assert.equal(found.b.number, Number(receipt.blockNumber));
    assert.equal(found.b.hash, receipt.blockHash.toLowerCase());
    assert.equal(found.b.timestamp, Number(block.timestamp));
    assert.equal(found.b.parentHash, rec.committed.find((b) => b.number === found.b.number - 1)?.hash);
    assert.deepEqual(found.tx, {
      hash: transfer,
      from: sender.address.toLowerCase(),
      to: recipient.toLowerCase(),
      value,
      index: Number(receipt.transactionIndex),
      input: '0xc0ffee',
    });
    assert.equal(typeof found.tx.value, 'bigint');
    const created = rec.committed.flatMap((b) => b.transactions).find((tx) => tx.hash === creation);
    assert.ok(created, 'the contract creation is in a handed block');
    assert.equal(created.to, null);

    const stats = statsOf(a, SEPOLIA);
    assert.equal(stats?.cursor, head);
    assert.equal(stats?.blocksHandled, numbers.length);
    await closeApp(a);
  });

  test('a reorg deeper than the confirmation depth is logged and not followed', async () => {
    const a = await app();
    const rec = new Recorder([SEPOLIA]);
    a.app.parts.follower.register(rec);
    await mine(chainUrl, 5);
    const head = await chainHead(chainUrl);
    await waitFor(() => rec.numbers(SEPOLIA).at(-1) === head, { what: `block ${head}` });
    const handed = rec.committed.at(-1);
    // The last 3 blocks are replaced (1 confirmation here), then the chain goes on.
    await chainRpc(chainUrl, 'anvil_reorg', [3, []]);
    await mine(chainUrl, 2);
    await waitFor(() => rec.numbers(SEPOLIA).at(-1) === head + 2, { what: `block ${head + 2}` });
    assert.deepEqual(rec.numbers(SEPOLIA).slice(-3), [head, head + 1, head + 2], 'the replaced blocks are not handed again');
    const line = a.logs.find((l) => l.includes('reorganised'));
    assert.ok(line, 'the reorg is logged');
    const logged = JSON.parse(line) as Record<string, unknown>;
    assert.equal(logged.block, head + 1);
    assert.equal(logged.handedHash, handed?.hash);
    assert.notEqual(logged.parentHash, handed?.hash);
    await closeApp(a);
  });

  test('a restart in the middle of a backlog neither loses nor repeats a block, and a failing consumer rolls its block back', async () => {
    const storage = await lastingStorage();
    const a1 = await app(storage);
    await createSeenTable(a1.storage.db);
    a1.app.parts.follower.register(new TableRecorder([SEPOLIA], 'a1'));
    // The chain mines only when asked: once the first block is handed on, the cursor stays.
    const start = (await waitFor(async () => (await seenRows(a1.storage.db, SEPOLIA))[0], { what: 'a first block' })).number;
    assert.equal(await cursorOf(a1, SEPOLIA), start + 1);
    await closeApp(a1);

    await mine(chainUrl, 2000);
    const head = await chainHead(chainUrl);
    const stopAt = start + 1234;

    // Second run: its consumer refuses one block in the middle (after writing its row); the
    // follower stops there, retries, and is stopped while it waits.
    const a2 = await app(storage);
    const failing = new TableRecorder([SEPOLIA], 'a2');
    failing.failOn.add(stopAt);
    a2.app.parts.follower.register(failing);
    await waitFor(() => a2.logs.some((l) => l.includes('a consumer failed on a block') && l.includes(`"block":${stopAt}`)), { what: 'the refused block' });
    assert.equal(await cursorOf(a2, SEPOLIA), stopAt, 'the cursor stays on the refused block');
    await closeApp(a2);

    const a3 = await app(storage);
    a3.app.parts.follower.register(new TableRecorder([SEPOLIA], 'a3'));
    await waitFor(async () => (await cursorOf(a3, SEPOLIA)) === head + 1, { what: `the cursor past block ${head}`, timeoutMs: 30_000 });
    const rows = await seenRows(a3.storage.db, SEPOLIA);
    assert.deepEqual(notExactlyOnce(rows, start, head), [], 'every block seen exactly once');
    assert.ok(rows.some((r) => r.holder === 'a2') && rows.some((r) => r.holder === 'a3'), 'both runs handled part of the backlog');
    assert.ok(rows.filter((r) => r.holder === 'a2').every((r) => r.number < stopAt), 'the refused block rolled back');
    assert.equal(rows.find((r) => r.number === stopAt)?.holder, 'a3');
    await closeApp(a3);
  });

  test('a backlog longer than maxCatchUpBlocks is skipped down to the limit, and the skip is logged', async () => {
    const storage = await lastingStorage();
    const events = { maxCatchUpBlocks: 100 };
    const a1 = await app({ ...storage, events });
    const rec1 = new Recorder([SEPOLIA]);
    a1.app.parts.follower.register(rec1);
    // The chain mines only when asked: once a block is handed on, the cursor stays.
    const cursor = (await waitFor(() => rec1.numbers(SEPOLIA).at(-1), { what: 'a first block' })) + 1;
    await closeApp(a1);

    await mine(chainUrl, 500);
    const head = await chainHead(chainUrl);
    const a2 = await app({ ...storage, events });
    const rec2 = new Recorder([SEPOLIA]);
    a2.app.parts.follower.register(rec2);
    await waitFor(() => rec2.numbers(SEPOLIA).at(-1) === head, { what: `block ${head}` });
    const firstKept = head - 100 + 1;
    assert.deepEqual(rec2.numbers(SEPOLIA), Array.from({ length: 100 }, (_, i) => firstKept + i), 'exactly the newest 100 blocks');
    const line = a2.logs.find((l) => l.includes('blocks') && l.includes('skipped'));
    assert.ok(line, 'a line says blocks were skipped');
    const logged = JSON.parse(line) as Record<string, unknown>;
    assert.equal(logged.level, 40, 'logged as a warning');
    assert.equal(logged.network, SEPOLIA);
    assert.equal(logged.skippedFrom, cursor);
    assert.equal(logged.skippedTo, firstKept - 1);
    assert.equal(statsOf(a2, SEPOLIA)?.blocksSkipped, firstKept - cursor);
    await closeApp(a2);
  });

  test('a backlog is read in JSON-RPC batches of events.batchBlocks, not block by block', async () => {
    const storage = await lastingStorage();
    const counting = await startFakeNode({ forwardTo: chainUrl });
    try {
      const settings = { ...storage, events: { batchBlocks: 50 } };
      const a1 = await app(settings, { [SEPOLIA]: counting.url });
      const rec1 = new Recorder([SEPOLIA]);
      a1.app.parts.follower.register(rec1);
      const last = await waitFor(() => rec1.numbers(SEPOLIA).at(-1), { what: 'a first block' });
      await closeApp(a1);

      // A backlog of 500 blocks, mined while nobody follows; then a new start catches up.
      await mine(chainUrl, 500);
      const head = await chainHead(chainUrl);
      const before = counting.bodies.length;
      const a2 = await app(settings, { [SEPOLIA]: counting.url });
      const rec2 = new Recorder([SEPOLIA]);
      a2.app.parts.follower.register(rec2);
      await waitFor(() => rec2.numbers(SEPOLIA).at(-1) === head, { what: `block ${head}` });
      assert.deepEqual(rec2.numbers(SEPOLIA), Array.from({ length: head - last }, (_, i) => last + 1 + i), 'the backlog, once and in order');
      const sizes = counting.bodies
        .slice(before)
        .map((b) => b.match(/eth_getBlockByNumber/g)?.length ?? 0)
        .filter((n) => n > 0);
      assert.equal(
        sizes.reduce((x, y) => x + y, 0),
        head - last,
        'each block asked once',
      );
      // 500 blocks (and the few mined before): batches of 50, the last one shorter.
      assert.ok(sizes.length <= Math.ceil((head - last) / 50), `${sizes.length} requests (sizes ${sizes.join(', ')})`);
      assert.ok(sizes.every((n) => n <= 50));
      await closeApp(a2);
    } finally {
      await counting.close();
    }
  });

  describe('a failing node of a network with two is retried through the upstream pool', () => {
    let front: FakeNode;
    let back: FakeNode;
    before(async () => {
      // Both answer from the chain; the back one 25 ms later, so that the pool prefers the front
      // one until the test breaks it, however busy the machine (latency decides among equals).
      front = await startFakeNode({ forwardTo: chainUrl });
      back = await startFakeNode({ forwardTo: chainUrl, delayMs: 25 });
    });
    after(async () => {
      await front?.close();
      await back?.close();
    });

    for (const mode of ['status500', 'stall'] as const) {
      test(`blocks keep coming, in order, from the other node once the first ${mode === 'stall' ? 'stalls' : 'answers 500'}; the follower never sees a failure`, async () => {
        await front.setMode('ok');
        // A new app: its pool has not set the first node aside yet.
        const a = await app({ overrides: { rpc: { requestTimeoutMs: 1_000, totalTimeoutMs: 5_000 } } }, { [SEPOLIA]: `${front.url},${back.url}` });
        const rec = new Recorder([SEPOLIA]);
        a.app.parts.follower.register(rec);
        await waitFor(() => statsOf(a, SEPOLIA)?.cursor != null && rec.numbers(SEPOLIA).length > 0, { what: 'sepolia followed' });
        const served = front.callCount('eth_getBlockByNumber');
        assert.ok(served > 0, 'the first node served the blocks while it answered');
        await front.setMode(mode);
        const asked = front.log.length;
        await mine(chainUrl, 5);
        const head = await chainHead(chainUrl);
        await waitFor(() => rec.numbers(SEPOLIA).at(-1) === head, { what: `block ${head} while the first node is in ${mode} mode`, timeoutMs: 20_000 });
        assert.ok(front.log.length > asked, `the ${mode} node was tried`);
        assert.deepEqual(
          a.logs.filter((l) => l.includes('follower: reading or handing on blocks failed')),
          [],
          'the pool failed over: the follower saw no failure',
        );
        const numbers = rec.numbers(SEPOLIA);
        const first = numbers[0] as number;
        assert.deepEqual(numbers, Array.from({ length: head - first + 1 }, (_, i) => first + i), 'each block once, in order');
        await front.setMode('ok');
        await closeApp(a);
      });
    }
  });

  describe('a network whose node fails does not hold up another', () => {
    let fake: FakeNode;
    before(async () => {
      fake = await startFakeNode({ mode: 'stall' });
    });
    after(async () => {
      await fake?.close();
    });

    test('a stalled, then failing, then garbage-answering node on one network', async () => {
      const a = await app({ overrides: { rpc: { requestTimeoutMs: 2_000, totalTimeoutMs: 3_000 } } }, { [SEPOLIA]: chainUrl, [AMOY]: fake.url });
      const rec = new Recorder([SEPOLIA, AMOY]);
      a.app.parts.follower.register(rec);
      await waitFor(() => statsOf(a, SEPOLIA)?.cursor != null, { what: 'sepolia followed' });
      for (const mode of ['stall', 'status500', 'garbage'] as const) {
        await fake.setMode(mode);
        await mine(chainUrl, 5);
        const head = await chainHead(chainUrl);
        await waitFor(() => rec.numbers(SEPOLIA).at(-1) === head, { what: `sepolia block ${head} while the amoy node is in ${mode} mode` });
      }
      assert.ok(fake.callCount('eth_blockNumber') > 0, 'the amoy node was asked');
      assert.equal(rec.numbers(AMOY).length, 0, 'nothing handed from the failing node');
      const amoy = statsOf(a, AMOY);
      assert.ok(amoy?.leaseHeld, 'amoy is still followed');
      await waitFor(() => statsOf(a, AMOY)?.lastError, { what: 'the amoy error in stats' });
      // A stalled node does not hold up the stop either.
      await fake.setMode('stall');
      await closeApp(a);
    });
  });
});
