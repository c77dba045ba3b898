// C41: the solver's destination liquidity, checked in storage under the lock. The wallet's balance
// is read before the lock at a known block; a fill mined after that block is not in that balance,
// so its intent still counts as reserved even once it is recorded as filled.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { intents } from '../../src/intents/schema.ts';
import { LiquidityError } from '../../src/errors/domain.ts';
import { IntentStore } from '../../src/intents/store.ts';
import { startTestApp, type TestApp } from '../support/app.ts';

const ETH = 10n ** 18n;
const SOLVER = `0x${'5'.repeat(40)}`;

function intentRow(outputEth: bigint) {
  const id = `in_${randomBytes(8).toString('hex')}`;
  return {
    id,
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
});
