// Slots (src/collections/slots.ts): objects under way kept so that one that leaves is let go at
// once. The lifetime tests measure bytes, not time: what V8 moves to its old generation per
// forwarded call or per connection, which grows when finished ones stay reachable across two
// scavenges (bench/README.md: "Garbage that lives too long").
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Slots } from '../../src/collections/slots.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('Slots', () => {
  test('holds what was added until it is removed, reusing emptied slots', () => {
    const slots = new Slots<{ n: number }>();
    const [a, b, c] = [{ n: 1 }, { n: 2 }, { n: 3 }];
    const sa = slots.add(a);
    const sb = slots.add(b);
    assert.equal(slots.size, 2);
    slots.remove(sa, a);
    assert.equal(slots.size, 1);
    const sc = slots.add(c);
    assert.equal(sc, sa, 'the emptied slot is taken again');
    const seen: number[] = [];
    slots.forEach((x) => seen.push(x.n));
    assert.deepEqual(seen.sort(), [2, 3]);
    assert.notEqual(sb, sc);
  });

  test('a second removal, or a stale slot number, leaves the object now in that slot alone', () => {
    const slots = new Slots<{ n: number }>();
    const a = { n: 1 };
    const b = { n: 2 };
    const sa = slots.add(a);
    slots.remove(sa, a);
    const sb = slots.add(b); // the same slot
    slots.remove(sa, a); // a's removal once more
    assert.equal(slots.size, 1);
    const seen: number[] = [];
    slots.forEach((x) => seen.push(x.n));
    assert.deepEqual(seen, [2]);
    assert.equal(slots.add({ n: 3 }) === sb, false, "b's slot was not put back on the free list");
  });

  test('an object removed while forEach runs is not visited after', () => {
    const slots = new Slots<{ n: number }>();
    const items = [{ n: 1 }, { n: 2 }, { n: 3 }];
    const at = items.map((x) => slots.add(x));
    const seen: number[] = [];
    slots.forEach((x) => {
      seen.push(x.n);
      if (x.n === 1) slots.remove(at[2] as number, items[2] as { n: number });
    });
    assert.deepEqual(seen, [1, 2]);
    assert.equal(slots.size, 2);
  });
});

/** Runs the fixture in a process of its own: the test runner's own bookkeeping would add to what is measured. */
async function grown(what: 'attempts' | 'connections'): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(here, 'lifetime-fixture.ts'), what], { timeout: 60_000 });
  return (JSON.parse(stdout.trim().split('\n').at(-1) as string) as { bytes: number }).bytes;
}

describe('objects under way are let go when they leave', () => {
  test('C48: a finished attempt is not kept by the attempt watch (old-generation growth per forwarded call)', async (t) => {
    const bytes = await grown('attempts');
    t.diagnostic(`old generation: ${bytes} bytes per call`);
    // With a Set of the attempts under way, the tables it left behind kept finished calls alive
    // through the scavenges: 1,430-1,970 bytes per call here (Node 20, 22, 24); with slots 240-300.
    assert.ok(bytes < 800, `the old generation grew by ${bytes} bytes per call`);
  });

  // Node 24 itself keeps about 4.5 KB per closed connection past a young collection (with the drain
  // or without), which hides what the drain adds or not.
  const node24 = Number(process.versions.node.split('.')[0]) >= 24;
  test('C57: a closed connection is not kept by the drain (old-generation growth per connection)', { skip: node24 && 'Node 24 keeps ~4.5 KB per connection of its own' }, async (t) => {
    const bytes = await grown('connections');
    t.diagnostic(`old generation: ${bytes} bytes per connection`);
    // With a Set of the open connections: 710-760 bytes per connection here (Node 20, 22); with slots 100-140.
    assert.ok(bytes < 400, `the old generation grew by ${bytes} bytes per connection`);
  });
});
