// When the open-loop tail gives a verdict (bench/lib/load/pairs.ts): the generator on time, by its
// share of late sends or by its own delay against the tail under test, and other work on the
// machine under a quarter of a core in two runs of three.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { uncleanBecause } from '../../bench/lib/load/pairs.ts';

const quiet = Array.from({ length: 18 }, () => 1);

test('open-loop verdict: late sends over 0.1% are the generator\'s fault only when its own delay is over a tenth of the lowest p99', () => {
  // A stalling host: 0.6% sent late, but 0.62 ms of the generator's delay against tails of 12.7 ms and more.
  assert.deepEqual(uncleanBecause({ late: 0.006, delayP99: 0.62, lowestP99: 12.7, otherPct: quiet }), []);
  // The same delay against a 2 ms tail would shape it: no verdict.
  const [why, ...more] = uncleanBecause({ late: 0.006, delayP99: 0.62, lowestP99: 2, otherPct: quiet });
  assert.match(why ?? '', /^0\.6% of the requests sent late, the generator's own delay p99 0\.62 ms against the lowest p99 2\.00 ms$/);
  assert.deepEqual(more, []);
  // Exactly a tenth still passes; a little more does not.
  assert.deepEqual(uncleanBecause({ late: 0.006, delayP99: 0.2, lowestP99: 2, otherPct: quiet }), []);
  assert.equal(uncleanBecause({ late: 0.006, delayP99: 0.21, lowestP99: 2, otherPct: quiet }).length, 1);
  // At most 0.1% late is on time whatever the delay.
  assert.deepEqual(uncleanBecause({ late: 0.001, delayP99: 5, lowestP99: 2, otherPct: quiet }), []);
});

test('open-loop verdict: other work over a quarter of a core in more than one run of three leaves no verdict', () => {
  const busy = (n: number) => quiet.map((p, i) => (i < n ? 26 : p));
  assert.deepEqual(uncleanBecause({ late: 0, delayP99: 0, lowestP99: 1, otherPct: busy(6) }), []);
  assert.deepEqual(uncleanBecause({ late: 0, delayP99: 0, lowestP99: 1, otherPct: busy(7) }), ['other work over 25% of a core in 7 of 18 runs']);
  // Both reasons at once are both given.
  assert.equal(uncleanBecause({ late: 0.01, delayP99: 1, lowestP99: 1, otherPct: busy(18) }).length, 2);
});
