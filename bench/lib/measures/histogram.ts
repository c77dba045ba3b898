// The latency histogram of the Node load generators (load-undici.ts, load-open.ts): 10 µs buckets
// up to 100 ms, then 1 ms buckets up to 100 s (an open-loop run behind a stalled target can wait
// that long), then one overflow bucket; the largest value is kept exactly.

const FINE_US = 10;
const FINE = 10_000; // 10 µs x 10,000 = 100 ms
const COARSE_US = 1000;
const COARSE = 100_000; // then 1 ms x 100,000 = 100 s

export class Histogram {
  private readonly buckets = new Uint32Array(FINE + COARSE + 1);
  count = 0;
  maxUs = 0;

  record(us: number): void {
    const i = us < FINE * FINE_US ? Math.floor(us / FINE_US) : Math.min(FINE + COARSE, FINE + Math.floor((us - FINE * FINE_US) / COARSE_US));
    this.buckets[i]! += 1;
    this.count++;
    if (us > this.maxUs) this.maxUs = us;
  }

  /** The p-th percentile in ms (the middle of its bucket, never above the largest value), NaN when empty. */
  percentileMs(p: number): number {
    const target = Math.max(1, Math.ceil((this.count * p) / 100));
    let seen = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      seen += this.buckets[i] ?? 0;
      if (seen < target) continue;
      const mid = i < FINE ? (i + 0.5) * FINE_US : FINE * FINE_US + (i - FINE + 0.5) * COARSE_US;
      return Math.min(mid, this.maxUs) / 1000;
    }
    return Number.NaN;
  }
}
