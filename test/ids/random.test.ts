// Request ids and subscription ids from pooled random bytes (src/ids/random.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomHexId, randomUuid } from '../../src/ids/random.ts';

test('random UUIDs are version 4, variant 10, lower-case hex in 8-4-4-4-12, all different over many pool refills, the random digits evenly spread', () => {
  const n = 20_000; // 78 refills of the pool (a UUID takes 16 bytes of 4,096)
  const seen = new Set<string>();
  const digits = new Array<number>(16).fill(0);
  const variants = new Array<number>(16).fill(0);
  for (let i = 0; i < n; i++) {
    const id = randomUuid();
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    seen.add(id);
    const hex = id.replaceAll('-', '');
    (variants[Number.parseInt(hex[16] as string, 16)] as number)++;
    for (let k = 0; k < 32; k++) if (k !== 12 && k !== 16) (digits[Number.parseInt(hex[k] as string, 16)] as number)++;
  }
  assert.equal(seen.size, n);
  // 600,000 random digits: each of the 16 within 2% of its share; the variant digit 8-b, a quarter each within 5%.
  const share = (n * 30) / 16;
  for (const [d, count] of digits.entries()) assert.ok(Math.abs(count - share) < share * 0.02, `digit ${d.toString(16)}: ${count} of ~${share}`);
  for (const d of [8, 9, 10, 11]) assert.ok(Math.abs((variants[d] as number) - n / 4) < (n / 4) * 0.05, `variant digit ${d.toString(16)}: ${variants[d]}`);
});

test('ids of both kinds share one pool and never share bytes: no id repeats another\'s digits, and an id does not change when later ones are made', () => {
  const uuids: string[] = [];
  const hexes: string[] = [];
  for (let i = 0; i < 600; i++) {
    uuids.push(randomUuid());
    hexes.push(randomHexId());
  }
  const first = `${uuids[0]}`;
  // The random digits of every id, both kinds: bytes used twice would show as repeats.
  const digits = new Set([...uuids.map((u) => u.replaceAll('-', '').slice(0, 12) + u.replaceAll('-', '').slice(20)), ...hexes.map((h) => h.slice(2, 14) + h.slice(22))]);
  assert.equal(digits.size, 1200);
  for (const h of hexes) assert.match(h, /^0x[0-9a-f]{32}$/);
  assert.equal(uuids[0], first);
});
