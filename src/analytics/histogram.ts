/**
 * A fixed log-bucket latency histogram (C46): mergeable by adding counts bucket by bucket, so two
 * instances, two flushes or the hours of a day sum exactly, and percentiles are read from the
 * merged counts (never averaged). Bucket 0 holds answers under 0.1 ms; bucket i (1..LAST-1)
 * holds [0.1 * 2^((i-1)/4), 0.1 * 2^(i/4)) ms, a quarter octave (each bound 19% above the last);
 * the last bucket holds everything from about 210 s up. A percentile is given as the geometric
 * middle of its bucket, within 9.5% of any latency in it.
 */

/** Buckets per octave. */
const PER_OCTAVE = 4;
/** Upper bound of bucket 0, in milliseconds. */
const BASE_MS = 0.1;
/** 21 octaves above 0.1 ms (about 210 s), plus bucket 0 and the overflow bucket. */
export const BUCKETS = 2 + 21 * PER_OCTAVE;
const LAST = BUCKETS - 1;

/** The bucket of a latency in milliseconds. */
export function bucketOf(ms: number): number {
  if (!(ms >= BASE_MS)) return 0; // also NaN
  const i = 1 + Math.floor(Math.log2(ms / BASE_MS) * PER_OCTAVE);
  return i > LAST ? LAST : i;
}

/** Lower bound of bucket `i` in milliseconds. */
export function bucketLow(i: number): number {
  return i <= 0 ? 0 : BASE_MS * 2 ** ((i - 1) / PER_OCTAVE);
}

/** Upper bound of bucket `i` in milliseconds (Infinity for the last). */
export function bucketHigh(i: number): number {
  return i >= LAST ? Number.POSITIVE_INFINITY : BASE_MS * 2 ** (i / PER_OCTAVE);
}

/** What a percentile in bucket `i` is reported as: its geometric middle in ms, three significant digits. */
export function bucketValue(i: number): number {
  const v = i <= 0 ? BASE_MS / 2 : i >= LAST ? bucketLow(LAST) : Math.sqrt(bucketLow(i) * bucketHigh(i));
  return Number(v.toPrecision(3));
}

/** Adds `from` into `into` bucket by bucket (`into` grows when shorter). */
export function mergeInto(into: number[], from: ArrayLike<number>): void {
  for (let i = 0; i < from.length; i++) into[i] = (into[i] ?? 0) + (from[i] ?? 0);
}

/**
 * The q-quantile (0 < q <= 1) of the merged counts by nearest rank, as its bucket's value; null
 * when the histogram is empty.
 */
export function percentile(counts: ArrayLike<number>, q: number): number | null {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] ?? 0;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= rank) return bucketValue(i);
  }
  return bucketValue(counts.length - 1);
}

/** PostgreSQL array text of the counts, trailing empty buckets left out (`{}` when empty). */
export function toArrayText(counts: ArrayLike<number>): string {
  let end = counts.length;
  while (end > 0 && !counts[end - 1]) end--;
  const parts: string[] = [];
  for (let i = 0; i < end; i++) parts.push(String(counts[i] ?? 0));
  return `{${parts.join(',')}}`;
}

/** Counts from PostgreSQL array text (`{1,0,3}`), as stored. */
export function fromArrayText(text: string | null | undefined): number[] {
  if (!text || text.length <= 2) return [];
  return text.slice(1, -1).split(',').map((v) => (v === 'NULL' ? 0 : Number(v)));
}
