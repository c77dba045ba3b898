// The latency histogram of the analytics (C46): fixed log buckets that merge by addition.
import { type SQL, sql } from 'drizzle-orm';

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
  return VALUES[i <= 0 ? 0 : i >= LAST ? LAST : i] as number;
}
/** Every bucket's value, computed once: an hourly answer reads three per bucket (docs/scaling.md). */
const VALUES = Array.from({ length: BUCKETS }, (_, i) => {
  const v = i <= 0 ? BASE_MS / 2 : i >= LAST ? bucketLow(LAST) : Math.sqrt(bucketLow(i) * bucketHigh(i));
  return Number(v.toPrecision(3));
});

/** Adds `from` into `into` bucket by bucket (`into` grows when shorter). */
export function mergeInto(into: number[], from: ArrayLike<number>): void {
  for (let i = 0; i < from.length; i++) into[i] = (into[i] ?? 0) + (from[i] ?? 0);
}

/**
 * The q-quantile (0 < q <= 1) of the merged counts by nearest rank, as its bucket's value; null
 * when the histogram is empty.
 */
export function percentile(counts: ArrayLike<number>, q: number): number | null {
  return percentiles(counts, [q])[0] as number | null;
}

/**
 * The q-quantiles of `qs` (ascending, each 0 < q <= 1) of the merged counts by nearest rank, as
 * their buckets' values, in one pass over the counts; nulls when the histogram is empty.
 */
export function percentiles(counts: ArrayLike<number>, qs: readonly number[]): Array<number | null> {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] ?? 0;
  if (total === 0) return qs.map(() => null);
  const out: number[] = [];
  let seen = 0;
  let i = -1;
  for (const q of qs) {
    const rank = Math.max(1, Math.ceil(q * total));
    while (seen < rank && i < counts.length - 1) seen += counts[++i] ?? 0;
    out.push(bucketValue(i));
  }
  return out;
}

/**
 * How a histogram is stored (for scale, docs/scaling.md: most rows have a few non-empty buckets): empty when no
 * bucket counts, else one byte `w` (1, 2, 4 or 8: the bytes the largest count needs), then for
 * each non-empty bucket in order its index (one byte) and its count (`w` bytes, big-endian). In
 * hex, for SQL's `decode(..., 'hex')` (a text parameter: PGlite and node-postgres alike).
 */
export function encodeLatency(counts: ArrayLike<number>): string {
  let max = 0;
  for (let i = 0; i < counts.length; i++) max = Math.max(max, counts[i] ?? 0);
  if (max === 0) return '';
  const w = max < 0x100 ? 1 : max < 0x1_0000 ? 2 : max < 0x1_0000_0000 ? 4 : 8;
  let hex = w.toString(16).padStart(2, '0');
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i] ?? 0;
    if (n > 0) hex += i.toString(16).padStart(2, '0') + n.toString(16).padStart(2 * w, '0');
  }
  return hex;
}

/** Counts from the stored form (`encodeLatency`), in hex or as bytes; trailing empty buckets left out. */
export function decodeLatency(stored: string | Uint8Array): number[] {
  const b = typeof stored === 'string' ? Buffer.from(stored, 'hex') : stored;
  const counts: number[] = [];
  if (b.length === 0) return counts;
  const w = b[0] as number;
  for (let o = 1; o + w < b.length; o += w + 1) {
    let n = 0;
    for (let j = 1; j <= w; j++) n = n * 256 + (b[o + j] as number);
    const i = b[o] as number;
    for (let k = counts.length; k < i; k++) counts.push(0);
    counts[i] = n;
  }
  return counts;
}

/**
 * Adds into `into` the histograms of `stored` (from byte `from` to `to`, by default all of it):
 * stored forms (`encodeLatency`, as bytes) one after the other, each after its length in two bytes,
 * big-endian (SQL: `string_agg(int2send(length(h)::int2) || h, '')`).
 */
export function addStoredLatencies(into: number[], stored: Uint8Array, from = 0, to = stored.length): void {
  for (let at = from; at + 2 <= to; ) {
    const end = at + 2 + (((stored[at] as number) << 8) | (stored[at + 1] as number));
    const w = stored[at + 2] as number;
    for (let o = at + 3; o + w < end; o += w + 1) {
      let n = 0;
      for (let j = 1; j <= w; j++) n = n * 256 + (stored[o + j] as number);
      const i = stored[o] as number;
      for (let k = into.length; k < i; k++) into.push(0);
      into[i] = (into[i] ?? 0) + n;
    }
    at = end;
  }
}

/**
 * SQL: the (i, n) rows of a stored histogram `h` (`encodeLatency`), its non-empty buckets; for
 * `from ..., lateral` or a scalar subquery. Unrolled by width: no loop per byte.
 */
export function latencyBucketsSql(h: SQL): SQL {
  const byte = (k: number) => sql.raw(`get_byte(h.b, o + ${k})::int8`);
  return sql`select get_byte(h.b, o) as i, (case get_byte(h.b, 0)
      when 1 then ${byte(1)}
      when 2 then (${byte(1)} << 8) | ${byte(2)}
      when 4 then (${byte(1)} << 24) | (${byte(2)} << 16) | (${byte(3)} << 8) | ${byte(4)}
      else (${byte(1)} << 56) | (${byte(2)} << 48) | (${byte(3)} << 40) | (${byte(4)} << 32) | (${byte(5)} << 24) | (${byte(6)} << 16) | (${byte(7)} << 8) | ${byte(8)} end) as n
    from (select ${h} as b) h, generate_series(1, length(h.b) - 1, case when length(h.b) > 0 then get_byte(h.b, 0) + 1 else 1 end) o`;
}

/** SQL: the stored form (`encodeLatency`) of two stored histograms merged, bucket by bucket (C46). */
export function mergeLatencySql(a: SQL, b: SQL): SQL {
  return sql`coalesce((
    select set_byte('\\x00'::bytea, 0, max(w)) || string_agg(set_byte('\\x00'::bytea, 0, i) || substring(int8send(n) from 9 - w), ''::bytea order by i)
    from (select i, n, case when max(n) over () < 256 then 1 when max(n) over () < 65536 then 2 when max(n) over () < 4294967296 then 4 else 8 end as w
          from (select i, sum(n)::int8 as n from (${latencyBucketsSql(a)} union all ${latencyBucketsSql(b)}) u group by i) s where n > 0) e), ''::bytea)`;
}
