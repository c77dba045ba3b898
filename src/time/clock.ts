// The one clock type: where a rule depends on time passing (a sliding window, a cache's age, a
// price's staleness), the code takes a `Clock` (Date.now by default), so a test advances time
// instead of sleeping through it.

/** Epoch milliseconds now; `Date.now` unless a test hands in its own. */
export type Clock = () => number;

/** The real clock. */
export const systemClock: Clock = () => Date.now();
