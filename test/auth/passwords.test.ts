// C5: passwords (src/auth/passwords.ts): scrypt at a configured cost, verified at the cost the hash
// was made with, and hashes bounded in number at once. The app hashing at its configured cost:
// test/auth/auth.test.ts; registrations refused for want of a slot: test/auth/login-limits.test.ts.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { DEFAULT_HASH_COST, HashSlots, hashPassword, verifyPassword } from '../../src/auth/passwords.ts';
import { loadConfig } from '../../src/config/load.ts';
import { HttpError } from '../../src/errors/http.ts';

/** The N written in a stored `scrypt$N$r$p$salt$hash`. */
const storedN = (hash: string) => Number(hash.split('$')[1]);

describe('password hash cost (auth.passwordHashCost)', () => {
  test('new hashes use 2^cost as N; the shipped default is 2^15 (C5)', async () => {
    assert.equal(DEFAULT_HASH_COST, 15);
    assert.equal(loadConfig({ env: {} }).auth.passwordHashCost, 15);
    assert.equal(storedN(await hashPassword('correct horse battery')), 2 ** 15);
    assert.equal(storedN(await hashPassword('correct horse battery', 10)), 2 ** 10);
  });

  test('verification reads N from the stored hash, whatever the cost of new hashes', async () => {
    const strong = await hashPassword('correct horse battery', 15);
    const cheap = await hashPassword('correct horse battery', 10);
    for (const stored of [strong, cheap]) {
      assert.equal(await verifyPassword('correct horse battery', stored), true);
      assert.equal(await verifyPassword('correct horse batterY', stored), false);
    }
  });
});

describe('password hashes at once are bounded (C5)', () => {
  test('at most `max` hashes run at once; the others wait their turn in order', async () => {
    const slots = new HashSlots(2, 10_000);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        slots.run(async () => {
          running++;
          most = Math.max(most, running);
          await sleep(5);
          order.push(i);
          running--;
        }),
      ),
    );
    assert.equal(most, 2);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(slots.busy, 0);
  });

  test('a hash that waits longer than waitMs is refused with 503 and Retry-After, and its place in line is dropped', async () => {
    const slots = new HashSlots(1, 20);
    let release!: () => void;
    const first = slots.run(() => new Promise<void>((r) => (release = r)));
    const waited = slots.run(async () => 'never');
    const err = await waited.then(
      () => assert.fail('should be refused'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof HttpError);
    assert.equal(err.statusCode, 503);
    assert.equal(err.code, 'SERVICE_UNAVAILABLE');
    assert.equal(err.headers['retry-after'], '1');
    release();
    await first;
    assert.equal(slots.busy, 0, 'the slot is free again');
    assert.equal(await slots.run(async () => 'next'), 'next');
  });
});
