// C41: the solver's destination liquidity, checked in storage under the lock. The wallet's balance
// is read before the lock at a known block; a fill mined after that block is not in that balance,
// so its intent still counts as reserved even once it is recorded as filled.
// C51: the shares of that liquidity one intent, one account and the intents waiting for their open may hold.
// slow: contracts deployed and fills mined on anvil
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { intents } from '../../src/intents/schema.ts';
import { LiquidityError, ReserveCapError } from '../../src/errors/domain.ts';
import { IntentStore } from '../../src/intents/store.ts';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

const ETH = 10n ** 18n;
const SOLVER = `0x${'5'.repeat(40)}`;

function intentRow(outputEth: bigint, userId: string | null = null) {
  const id = `in_${randomBytes(8).toString('hex')}`;
  return {
    id,
    userId,
    status: 'awaiting_open' as const,
    fromNetwork: 'ethereum-sepolia',
    toNetwork: 'base-sepolia',
    originChainId: 11155111,
    destinationChainId: 84532,
    sender: `0x${'1'.repeat(40)}`,
    recipient: `0x${'1'.repeat(40)}`,
    inputWei: ((outputEth + 1n) * ETH).toString(),
    outputWei: (outputEth * ETH).toString(),
    feeWei: ETH.toString(),
    gasReserveWei: '0',
    solver: SOLVER,
    originSettler: `0x${'2'.repeat(40)}`,
    destinationSettler: `0x${'3'.repeat(40)}`,
    nonce: `0x${randomBytes(32).toString('hex')}`,
    orderId: `0x${randomBytes(32).toString('hex')}`,
    openDeadline: 2_000_000_000,
    fillWindow: 600,
    fillDeadline: 2_000_000_600,
  };
}

describe('solver liquidity and the block its balance was read at (C41)', () => {
  let t: TestApp;
  let store: IntentStore;
  before(async () => {
    t = await startTestApp();
    store = new IntentStore(t.storage.db);
  });
  after(() => t?.close());

  test('a fill mined after the balance was read still reserves its amount; one mined at or before it does not', async () => {
    // The wallet holds 10 ETH at block 100; intent A (6 ETH) is open.
    const a = await store.create(intentRow(6n), 10n * ETH, 100);
    await assert.rejects(store.create(intentRow(6n), 10n * ETH, 100), LiquidityError, 'A reserves 6 of the 10');

    // A's fill is mined in block 101 and recorded as filled. A balance read at block 100 does not
    // show the 6 ETH paid out: A must still count, or a second 6 ETH intent would pass.
    await t.storage.db.update(intents).set({ status: 'filled', fillBlock: 101 }).where(eq(intents.id, a.id));
    await assert.rejects(store.create(intentRow(6n), 10n * ETH, 100), (err: unknown) => {
      assert.ok(err instanceof LiquidityError);
      assert.equal(err.availableWei, 4n * ETH);
      return true;
    });

    // Read at block 101, the balance shows the payment (4 ETH left): A no longer counts.
    await assert.rejects(store.create(intentRow(6n), 4n * ETH, 101), LiquidityError);
    const b = await store.create(intentRow(3n), 4n * ETH, 101);
    assert.equal(b.status, 'awaiting_open');
  });

  test('C51: an opened intent still counts in its account\'s share but no longer in the share of intents waiting for their open', async () => {
    const user = await registerUser(t.app);
    const other = await registerUser(t.app);
    const solver = `0x${'6'.repeat(40)}`;
    const row = (eth: bigint, userId: string) => ({ ...intentRow(eth, userId), solver });
    // 100 ETH: 5 per intent, 10 per account, 20 for all waiting for their open.
    const shares = { maxReservePerIntent: 5, maxReservePerAccount: 10, maxReserveAwaitingOpen: 20 };
    const cap = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof ReserveCapError, `refused by a share: ${String(err)}`);
      return err.cap;
    };
    assert.equal(await cap(store.create(row(6n, user.id), 100n * ETH, 1, Infinity, shares)), 'maxReservePerIntent');
    const a = await store.create(row(5n, user.id), 100n * ETH, 1, Infinity, shares);
    await store.create(row(5n, user.id), 100n * ETH, 1, Infinity, shares);
    assert.equal(await cap(store.create(row(1n, user.id), 100n * ETH, 1, Infinity, shares)), 'maxReservePerAccount');
    await store.create(row(5n, other.id), 100n * ETH, 1, Infinity, shares);
    await store.create(row(5n, other.id), 100n * ETH, 1, Infinity, shares);
    const third = await registerUser(t.app);
    assert.equal(await cap(store.create(row(1n, third.id), 100n * ETH, 1, Infinity, shares)), 'maxReserveAwaitingOpen');
    // A opened: 15 ETH wait for their open; the user still holds 10 ETH.
    await t.storage.db.update(intents).set({ status: 'opened' }).where(eq(intents.id, a.id));
    await store.create(row(5n, third.id), 100n * ETH, 1, Infinity, shares);
    assert.equal(await cap(store.create(row(1n, user.id), 100n * ETH, 1, Infinity, shares)), 'maxReservePerAccount');
  });
});
