// C35: a whale alert's USD value is value * price to the cent, on integers, rounded once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseUnits } from 'viem';
import { decimalOf, usdCents } from '../../src/prices/money.ts';

const wei = (coins: string) => parseUnits(coins, 18);

describe('USD cents of a native amount (C35)', () => {
  test('a price is taken as the decimal its shortest text says', () => {
    assert.deepEqual(decimalOf(0.05), { units: 5n, scale: 2 });
    assert.deepEqual(decimalOf(3000), { units: 3000n, scale: 0 });
    assert.deepEqual(decimalOf(1e-7), { units: 1n, scale: 7 });
    assert.deepEqual(decimalOf(1e21), { units: 10n ** 21n, scale: 0 });
    assert.deepEqual(decimalOf(0), { units: 0n, scale: 0 });
    assert.throws(() => decimalOf(Number.NaN), RangeError);
    assert.throws(() => decimalOf(-1), RangeError);
  });

  test('150,000 coins at 0.05 USD are 7,500.00 USD', () => {
    assert.equal(usdCents(wei('150000'), 18, 0.05), 750_000n);
  });

  test('half a cent rounds up where floating point would round down', () => {
    // 1.005 * 100 is 100.49999999999999 in floating point: Math.round would give 1.00.
    assert.equal(Math.round(1.005 * 100), 100);
    assert.equal(usdCents(wei('1.005'), 18, 1), 101n);
    assert.equal(usdCents(wei('1.004999999999999999'), 18, 1), 100n);
  });

  test('amounts past 2^53 wei stay exact', () => {
    // 123,456,789.123456789123456789 coins at 3,000.12 USD = 370,385,182,185.0651... USD.
    assert.equal(usdCents(wei('123456789.123456789123456789'), 18, 3000.12), 37_038_518_218_507n);
    // One wei of anything is no cent.
    assert.equal(usdCents(1n, 18, 3000), 0n);
  });

  test('other decimals count as the currency says', () => {
    assert.equal(usdCents(150_000_000_000n, 6, 0.05), 750_000n); // 150,000 units with 6 decimals
    assert.equal(usdCents(15n, 0, 0.5), 750n);
  });
});
