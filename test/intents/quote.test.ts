// C41: an intent's quote (src/intents/quote.ts): the fee and the output, in wei.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseEther } from 'viem';
import { quote } from '../../src/intents/quote.ts';

describe('the quote of an intent (C41)', () => {
  test('the fee is the bps of the amount rounded up plus the fill gas at the gas price, and the output the rest', () => {
    const q = quote({ inputWei: parseEther('1'), feeBps: 10, fillGasLimit: 100_000n, gasPrice: 2_000_000_000n, maxPerGas: 5_000_000_000n });
    assert.equal(q.feeWei, parseEther('0.001') + 200_000_000_000_000n);
    assert.equal(q.outputWei, parseEther('1') - q.feeWei);
    assert.equal(q.gasReserveWei, 500_000_000_000_000n);
    assert.equal(quote({ inputWei: 1n, feeBps: 10, fillGasLimit: 0n, gasPrice: 0n, maxPerGas: 0n }).feeWei, 1n);
  });
});
