/** UTC calendar periods for quotas (C11): day resets at 00:00 UTC, month at 00:00 UTC on the 1st. */
export interface Periods {
  day: string; // YYYY-MM-DD
  month: string; // YYYY-MM
  dayEndsAt: number; // epoch ms
  monthEndsAt: number; // epoch ms
}

let cached: Periods | undefined;

/** The current UTC day and month; recomputed only when the day rolls over (cheap per request). */
export function currentPeriods(now = Date.now()): Periods {
  if (cached && now < cached.dayEndsAt && now >= cached.dayEndsAt - 86_400_000) return cached;
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const day = d.toISOString().slice(0, 10);
  const p: Periods = {
    day,
    month: day.slice(0, 7),
    dayEndsAt: Date.UTC(y, m, d.getUTCDate() + 1),
    monthEndsAt: Date.UTC(y, m + 1, 1),
  };
  cached = p;
  return p;
}
