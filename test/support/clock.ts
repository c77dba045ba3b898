import type { Clock } from '../../src/time/clock.ts';

/** A clock that stands still until `advance` moves it: windows, ages and penalties pass at once. */
export interface ManualClock {
  now: Clock;
  advance(ms: number): void;
}

/** A manual clock starting at `start` (epoch ms; the real time by default). */
export function manualClock(start = Date.now()): ManualClock {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}
