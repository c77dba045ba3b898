// C46: the latency histogram: fixed log buckets, mergeable, percentiles from merged counts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { addStoredLatencies, BUCKETS, bucketHigh, bucketLow, bucketOf, bucketValue, decodeLatency, encodeLatency, mergeInto, percentile, percentiles } from '../../src/analytics/histogram.ts';

describe('latency histogram (C46)', () => {
  test('every latency falls in a bucket whose reported value is within 9.5% of it', () => {
    for (let ms = 0.1; ms < 200_000; ms *= 1.013) {
      const i = bucketOf(ms);
      assert.ok(bucketLow(i) <= ms && ms < bucketHigh(i), `${ms} ms in bucket ${i} [${bucketLow(i)}, ${bucketHigh(i)})`);
      const v = bucketValue(i);
      assert.ok(Math.abs(v - ms) / ms <= 0.095, `${ms} ms reported as ${v}`);
    }
    assert.equal(bucketOf(0), 0);
    assert.equal(bucketOf(Number.NaN), 0);
    assert.equal(bucketOf(10 ** 9), BUCKETS - 1);
  });

  test('percentiles of merged histograms are those of all the latencies together, never an average of percentiles', () => {
    const fast = new Array<number>(BUCKETS).fill(0);
    const slow = new Array<number>(BUCKETS).fill(0);
    for (let i = 0; i < 90; i++) fast[bucketOf(2)]! += 1;
    for (let i = 0; i < 10; i++) slow[bucketOf(500)]! += 1;
    const merged: number[] = [];
    mergeInto(merged, fast);
    mergeInto(merged, slow);
    // 100 latencies: 90 of 2 ms and 10 of 500 ms. The 95th is 500 ms, the median 2 ms.
    assert.equal(percentile(merged, 0.5), bucketValue(bucketOf(2)));
    assert.equal(percentile(merged, 0.9), bucketValue(bucketOf(2)));
    assert.equal(percentile(merged, 0.95), bucketValue(bucketOf(500)));
    // Averaging the two instances' p95 (2 and 500) would say 251 ms, which no call took.
    assert.notEqual(percentile(merged, 0.95), (percentile(fast, 0.95)! + percentile(slow, 0.95)!) / 2);
    assert.equal(percentile([], 0.5), null);
  });

  test('percentiles in one pass: each the nearest rank of the latencies themselves, as its bucket value', () => {
    for (let round = 0; round < 200; round++) {
      const latencies = Array.from({ length: 1 + Math.floor(Math.random() * 300) }, () => Math.exp(Math.random() * 12) / 20);
      const counts: number[] = [];
      for (const ms of latencies) {
        const i = bucketOf(ms);
        for (let k = counts.length; k <= i; k++) counts.push(0);
        counts[i] = (counts[i] as number) + 1;
      }
      const sorted = [...latencies].sort((a, b) => a - b);
      const qs = [0.01, 0.5, 0.95, 0.99, 1];
      // Nearest rank: the ceil(q * n)-th smallest latency, reported as its bucket's value.
      const want = qs.map((q) => bucketValue(bucketOf(sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1] as number)));
      assert.deepEqual(percentiles(counts, qs), want);
      assert.deepEqual(qs.map((q) => percentile(counts, q)), want);
    }
    assert.deepEqual(percentiles([0, 0], [0.5, 0.99]), [null, null]);
  });

  test('stored sparse: a width byte, then (bucket, count) for each non-empty bucket, read back the same', () => {
    const h = new Array<number>(BUCKETS).fill(0);
    h[3] = 2;
    h[10] = 7;
    // Counts under 256: one byte each; 5 bytes instead of 86 counts.
    assert.equal(encodeLatency(h), '010302' + '0a07');
    assert.deepEqual(decodeLatency(encodeLatency(h)), h.slice(0, 11));
    h[85] = 70_000;
    assert.equal(encodeLatency(h), '04' + '0300000002' + '0a00000007' + '5500011170');
    assert.deepEqual(decodeLatency(encodeLatency(h)), h);
    h[0] = 2 ** 40;
    assert.deepEqual(decodeLatency(encodeLatency(h)), h);
    assert.equal(encodeLatency(new Array<number>(BUCKETS).fill(0)), '');
    assert.deepEqual(decodeLatency(''), []);
  });

  test('stored forms concatenated, each after its length (the roll-up query): added into one histogram', () => {
    const a = [0, 3, 0, 300];
    const b = [1, 0, 0, 0, 0, 2 ** 33];
    const joined = Buffer.concat(
      [a, [], b].map((h) => {
        const bytes = Buffer.from(encodeLatency(h), 'hex');
        return Buffer.concat([Buffer.from([bytes.length >> 8, bytes.length & 0xff]), bytes]);
      }),
    );
    const into = [0, 0, 5];
    addStoredLatencies(into, joined);
    assert.deepEqual(into, [1, 3, 5, 300, 0, 2 ** 33]);
    addStoredLatencies(into, new Uint8Array(0));
    assert.deepEqual(into, [1, 3, 5, 300, 0, 2 ** 33]);
  });
});
