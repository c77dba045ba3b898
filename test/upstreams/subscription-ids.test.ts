// Client subscription ids (src/upstreams/ws/subscription-messages.ts): drawn from a pool of random
// bytes 256 at a time, each id from bytes of its own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newSubscriptionId } from '../../src/upstreams/ws/subscription-messages.ts';

test('subscription ids are 0x and 32 hex digits, all different over many pool refills, digits evenly spread', () => {
  const n = 20_000; // 78 refills of the 256-id pool
  const ids = new Set<string>();
  const digits = new Array<number>(16).fill(0);
  for (let i = 0; i < n; i++) {
    const id = newSubscriptionId();
    assert.match(id, /^0x[0-9a-f]{32}$/);
    ids.add(id);
    for (let k = 2; k < id.length; k++) (digits[Number.parseInt(id[k] as string, 16)] as number)++;
  }
  assert.equal(ids.size, n);
  // 640,000 digits: each of the 16 within 2% of its share (a byte reused, or one half of it lost, would skew them).
  const share = (n * 32) / 16;
  for (const [d, count] of digits.entries()) assert.ok(Math.abs(count - share) < share * 0.02, `digit ${d.toString(16)}: ${count} of ~${share}`);
});

test('an id is a string of its own: a later id does not change an earlier one', () => {
  const first = newSubscriptionId();
  const copy = `${first}`;
  for (let i = 0; i < 300; i++) newSubscriptionId();
  assert.equal(first, copy);
  assert.notEqual(newSubscriptionId(), first);
});
