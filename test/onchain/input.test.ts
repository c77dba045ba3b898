// The shared chain helpers' rules for user input (src/onchain/): amounts as exact decimal text,
// addresses by C28's rule, used alike by the faucet, the balance and the intents.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseAddress, parseRecipient } from '../../src/onchain/addresses.ts';
import { parseAmount } from '../../src/onchain/amounts.ts';

describe('amounts and addresses', () => {
  test('amounts are exact decimal text; addresses follow EIP-55, xdc only on the native networks', () => {
    assert.equal(parseAmount('1', 18), 10n ** 18n);
    assert.equal(parseAmount('0.000000000000000001', 18), 1n);
    assert.equal(parseAmount('007.50', 18), 75n * 10n ** 17n);
    for (const bad of ['', '.5', '5.', '1e3', '-1', '+1', ' 1', '1,5', '0x10']) assert.equal(typeof parseAmount(bad, 18), 'string', bad);
    const good = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'; // an EIP-55 test vector
    assert.equal(parseRecipient(good, false), good);
    assert.equal(parseRecipient(good.toLowerCase(), false), good);
    assert.equal(parseRecipient(`0x${good.slice(2).toUpperCase()}`, false), good);
    assert.match(parseRecipient(good.replace('aA', 'Aa'), false), /checksum/);
    assert.equal(parseRecipient(`xdc${good.slice(2)}`, true), good);
    assert.equal(parseRecipient(`XDC${good.slice(2).toLowerCase()}`, true), good);
    assert.match(parseRecipient(`xdc${good.slice(2)}`, false), /native networks only/);
    assert.match(parseRecipient(`0X${good.slice(2)}`, false), /0x followed by 40 hex digits/);
    // The zero address is an address (a balance may be asked for it) but receives no coins.
    const zero = `0x${'0'.repeat(40)}`;
    assert.equal(parseAddress(zero, false), zero);
    assert.equal(parseAddress(`xdc${'0'.repeat(40)}`, true), zero);
    assert.match(parseRecipient(zero, false), /zero address/);
  });
});
