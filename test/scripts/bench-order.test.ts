// The interleaved bench's order of turns (bench/lib/load/pairs.ts): every target once a round, no
// target twice in a row across a round's end, and no fixed place or neighbour for any target.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { roundOrders } from '../../bench/lib/load/pairs.ts';

test('interleaved rounds: every target once a round, none twice in a row, each in every place and after every other in turn, the same orders every run', () => {
  for (const n of [1, 2, 3, 5, 7]) {
    const targets = Array.from({ length: n }, (_, i) => `t${i}`);
    const orders = roundOrders(targets, 60);
    assert.deepEqual(roundOrders(targets, 60), orders, 'the same orders every run');
    const runs = orders.flat();
    for (const [round, order] of orders.entries()) assert.deepEqual([...order].sort(), targets, `round ${round} of ${n}: every target once`);
    if (n >= 2) for (let i = 1; i < runs.length; i++) assert.notEqual(runs[i], runs[i - 1], `${n} targets: run ${i} repeats the one before`);
    if (n < 3) continue;
    const places = new Set(orders.flatMap((order) => order.map((t, i) => `${t}@${i}`)));
    assert.equal(places.size, n * n, `${n} targets: each took every place`);
    const after = new Set(runs.slice(1).map((t, i) => `${runs[i]}>${t}`));
    assert.equal(after.size, n * (n - 1), `${n} targets: each ran right after every other`);
  }
});
