// One follower per network across instances (C33): the lease and the cursor in storage, on both
// backends, and two app instances on one PostgreSQL database in front of a real chain, one of
// which dies without giving its lease up.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { followerCursors, followerLeases } from '../../src/events/schema.ts';
import { FollowerStore } from '../../src/events/store.ts';
import type { Storage } from '../../src/storage/db.ts';
import { createTestDatabase, openTestStorage, type TestApp } from '../support/app.ts';
import { serviceSkip, storageBackends } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { chainHead, createSeenTable, mine, notExactlyOnce, SEPOLIA, seenRows, startFollowingApp, TableRecorder } from './helpers.ts';

for (const backend of await storageBackends()) {
  describe(`follower lease and cursor on ${backend.name} (C33)`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: (() => Promise<void>) | undefined;
    let store: FollowerStore;
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
      store = new FollowerStore(storage.db);
    });
    after(async () => {
      await close?.();
    });

    test('one holder at a time; the holder renews; another takes an expired lease; the former holder can no longer move the cursor', async () => {
      assert.equal(await store.acquire('net-a', 'one', 1), true);
      assert.equal(await store.acquire('net-a', 'two', 1), false, 'held by another');
      assert.equal(await store.acquire('net-a', 'one', 1), true, 'renewed by its holder');
      assert.equal(await store.initCursor('net-a', 100), 100);
      assert.equal(await store.initCursor('net-a', 5), 100, 'an existing cursor is kept');
      assert.equal(await store.advance(storage.db, 'net-a', 100, 101, 'two'), false, 'not the holder');
      assert.equal(await store.advance(storage.db, 'net-a', 100, 101, 'one'), true);
      assert.equal(await store.advance(storage.db, 'net-a', 100, 101, 'one'), false, 'the cursor is no longer at 100');

      // "one" stops renewing (paused or dead): "two" gets the lease once it expired.
      await waitFor(() => store.acquire('net-a', 'two', 5), { what: 'the lease to expire', timeoutMs: 5_000 });
      assert.equal(await store.acquire('net-a', 'one', 5), false, 'the former holder cannot take it back');
      assert.equal(await store.advance(storage.db, 'net-a', 101, 102, 'one'), false, 'the former holder cannot commit a block');
      assert.equal(await store.cursor('net-a'), 101);
      assert.equal(await store.advance(storage.db, 'net-a', 101, 102, 'two'), true);
    });

    test('a released lease is free at once, and only its holder can release it', async () => {
      assert.equal(await store.acquire('net-b', 'one', 10), true);
      await store.release('net-b', 'two');
      assert.equal(await store.acquire('net-b', 'two', 10), false, 'released by someone else: still held');
      await store.release('net-b', 'one');
      assert.equal(await store.acquire('net-b', 'two', 10), true);
    });

    test('networks have their own leases and cursors', async () => {
      assert.equal(await store.acquire('net-c', 'one', 10), true);
      assert.equal(await store.acquire('net-d', 'two', 10), true);
      assert.equal(await store.cursor('net-c'), null);
      await store.initCursor('net-c', 7);
      await store.initCursor('net-d', 9);
      assert.equal(await store.advance(storage.db, 'net-c', 7, 8, 'two'), false);
      assert.equal(await store.advance(storage.db, 'net-d', 9, 10, 'two'), true);
      assert.deepEqual([await store.cursor('net-c'), await store.cursor('net-d')], [7, 10]);
    });
  });
}

describe('two instances on one PostgreSQL database (C33)', { skip: await serviceSkip('PostgreSQL') }, () => {
  let devnet: Devnet;
  let chainUrl: string;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  const apps: TestApp[] = [];

  before(async () => {
    devnet = await startDevnet({ networks: [{ slug: SEPOLIA, chainId: 11_155_111 }], nativeBlockTimeSeconds: 1 });
    chainUrl = devnet.upstreams[SEPOLIA]?.http as string;
    database = await createTestDatabase();
  });
  after(async () => {
    for (const a of apps) await a.close().catch(() => {});
    await devnet?.stop();
    await database?.drop();
  });

  test('only one follows a network; when it dies without releasing, the other takes over within 15 s and no block is handled twice', async () => {
    const start = async (name: string) => {
      const a = await startFollowingApp({ [SEPOLIA]: chainUrl }, { databaseUrl: database.url });
      apps.push(a);
      await createSeenTable(a.storage.db);
      a.app.parts.follower.register(new TableRecorder([SEPOLIA], name));
      return a;
    };
    const a = await start('a');
    const b = await start('b');
    const stats = (t: TestApp) => t.app.parts.follower.stats().find((s) => s.network === SEPOLIA);
    const db = a.storage.db;
    const cursor = async () => (await db.select().from(followerCursors).where(eq(followerCursors.network, SEPOLIA)))[0]?.nextBlock;

    await waitFor(() => stats(a)?.leaseHeld || stats(b)?.leaseHeld, { what: 'one instance to take the network' });
    await waitFor(() => stats(a) && stats(b), { what: 'both instances to try' });
    const [holder, other] = stats(a)?.leaseHeld ? [a, b] : [b, a];
    const [holderName, otherName] = holder === a ? ['a', 'b'] : ['b', 'a'];

    await mine(chainUrl, 30);
    const head1 = await chainHead(chainUrl);
    await waitFor(async () => (await cursor()) === head1 + 1, { what: `block ${head1} handed on` });
    let rows = await seenRows(db, SEPOLIA);
    const first = rows[0]?.number as number;
    assert.deepEqual(notExactlyOnce(rows, first, head1), []);
    assert.ok(rows.every((r) => r.holder === holderName), 'only the lease holder handled blocks');
    assert.equal(stats(other)?.leaseHeld, false);
    assert.equal(stats(other)?.blocksHandled, 0);

    // The holder dies: its renewals stop and its lease is not released.
    await holder.app.parts.follower.close({ releaseLeases: false });
    const diedAt = Date.now();
    await mine(chainUrl, 20);
    const head2 = await chainHead(chainUrl);
    await waitFor(() => stats(other)?.leaseHeld, { what: 'the other instance to take over', timeoutMs: 15_000 });
    const tookMs = Date.now() - diedAt;
    await waitFor(async () => (await cursor()) === head2 + 1, { what: `block ${head2} handed on after the takeover` });
    rows = await seenRows(db, SEPOLIA);
    assert.deepEqual(notExactlyOnce(rows, first, head2), [], 'every block exactly once across both instances');
    assert.ok(rows.filter((r) => r.number > head1).every((r) => r.holder === otherName), 'the blocks after the death are the new holder’s');
    assert.ok(tookMs < 15_000, `took over in ${tookMs} ms`);
    const [lease] = await db.select().from(followerLeases).where(eq(followerLeases.network, SEPOLIA));
    assert.equal(lease?.holder, other.app.parts.follower.id);

    // A graceful stop gives the lease up.
    await other.app.parts.follower.close();
    assert.deepEqual(await db.select().from(followerLeases).where(eq(followerLeases.network, SEPOLIA)), []);
  });
});
