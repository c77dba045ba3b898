/**
 * Hedged reads (C26): a read that a node has not answered within the hedge delay is
 * also sent to the next node; the first good answer wins and the other attempt is aborted. Which
 * methods may be hedged is the method catalogue's `hedge` (never a filter, a transaction or a
 * subscription: src/methods/catalogue.ts).
 */

/** Settings of a pool's hedging. */
export interface HedgeOptions {
  /** False: never hedge. */
  enabled: boolean;
  /** A fixed delay in milliseconds; null: the p90 of the node's recent call latency within the bounds below. */
  delayMs: number | null;
  /** Milliseconds: the shortest automatic delay. */
  minDelayMs: number;
  /** Milliseconds: the longest automatic delay, and the delay while a node has too few samples. */
  maxDelayMs: number;
}

export const DEFAULT_HEDGE: HedgeOptions = { enabled: true, delayMs: null, minDelayMs: 50, maxDelayMs: 1_000 };

const SIZE = 64;
/** Samples a node needs before its own p90 is trusted. */
const MIN_SAMPLES = 8;

/** The latest call durations of one node, and their p90 (recomputed every few samples, not per call). */
export class LatencyWindow {
  readonly #samples = new Float64Array(SIZE);
  #count = 0;
  #next = 0;
  #fresh = 0;
  #p90: number | null = null;

  add(ms: number): void {
    this.#samples[this.#next] = ms;
    this.#next = (this.#next + 1) % SIZE;
    if (this.#count < SIZE) this.#count++;
    this.#fresh++;
  }

  /** The 90th percentile in milliseconds, or null with fewer than 8 samples. */
  p90(): number | null {
    if (this.#count < MIN_SAMPLES) return null;
    if (this.#p90 === null || this.#fresh >= 8) {
      const sorted = this.#samples.slice(0, this.#count).sort();
      this.#p90 = sorted[Math.min(this.#count - 1, Math.ceil(this.#count * 0.9) - 1)] as number;
      this.#fresh = 0;
    }
    return this.#p90;
  }
}

/** The delay before a read on this node is hedged. */
export function hedgeDelay(opts: HedgeOptions, window: LatencyWindow): number {
  if (opts.delayMs !== null) return opts.delayMs;
  const p90 = window.p90();
  if (p90 === null) return opts.maxDelayMs;
  return Math.min(opts.maxDelayMs, Math.max(opts.minDelayMs, p90));
}

/**
 * What cancels the losing attempt of a hedge. undici takes an EventEmitter-like signal as well as
 * an AbortSignal; this one costs a plain object per read, where an AbortController (an
 * EventTarget) measurably slowed every hedgeable read on the hot path.
 */
export class Cancel {
  aborted = false;
  reason: Error | undefined = undefined;
  #listener: (() => void) | undefined;

  on(_event: 'abort', listener: () => void): this {
    this.#listener = listener;
    return this;
  }

  once(event: 'abort', listener: () => void): this {
    return this.on(event, listener);
  }

  removeListener(_event: 'abort', listener: () => void): this {
    if (this.#listener === listener) this.#listener = undefined;
    return this;
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = new Error('another upstream answered first');
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }
}
