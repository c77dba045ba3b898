// The interleaved bench's order of turns (bench/lib/load/pairs.ts): no target runs twice in a row
// across a round's end, and over as many rounds as targets each takes every place.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { roundOrder } from '../../bench/lib/load/pairs.ts';

test('interleaved rounds: each round has every target once, none runs twice in a row, and each takes every place in turn', () => {
  for (const n of [1, 2, 3, 5, 7]) {
    const targets = Array.from({ length: n }, (_, i) => `t${i}`);
    const runs: string[] = [];
    const places = new Map<string, Set<number>>(targets.map((t) => [t, new Set()]));
    for (let round = 0; round < 2 * n; round++) {
      const order = roundOrder(targets, round);
      assert.deepEqual([...order].sort(), [...targets].sort(), `round ${round} of ${n}: every target once`);
      order.forEach((t, i) => places.get(t)?.add(i));
      runs.push(...order);
    }
    if (n >= 2) for (let i = 1; i < runs.length; i++) assert.notEqual(runs[i], runs[i - 1], `${n} targets: run ${i} repeats the one before`);
    if (n >= 3) for (const [t, seen] of places) assert.equal(seen.size, n, `${t} took every place of ${n}`);
  }
});
