// C27's period of days, shared by GET /usage/stats and GET /usage/analytics (C46). It sits with the
// other REST helpers so that analytics need not import from usage, which imports analytics' recorder.
import { Type as T } from '@sinclair/typebox';

/** A UTC day as a query parameter: `format: date` rejects impossible days such as 2026-02-30; the pattern keeps it to YYYY-MM-DD. */
export const Day = T.String({ format: 'date', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'UTC day, YYYY-MM-DD' });

/** The default and the largest period, in days (C27). */
export const DEFAULT_DAYS = 30;
export const MAX_DAYS = 366;
const DAY_MS = 86_400_000;

export interface Problem {
  field: string;
  message: string;
}

const toTime = (day: string) => Date.parse(`${day}T00:00:00Z`);
/** YYYY-MM-DD of a UTC midnight, or undefined outside years 0001–9999 (what a date column holds). */
function toDay(t: number): string | undefined {
  const d = new Date(t);
  const y = d.getUTCFullYear();
  return Number.isNaN(t) || y < 1 || y > 9999 ? undefined : d.toISOString().slice(0, 10);
}

/**
 * C27: omitted dates are the 30 days ending `today`; one given, the other is derived from it. The
 * days must lie in years 0001–9999, start on or before end, and cover at most 366 days. Pushes
 * what is wrong onto `problems` and returns the period (its length in days) when both ends exist.
 */
export function resolvePeriod(
  q: { startDate?: string | undefined; endDate?: string | undefined },
  today: string,
  problems: Problem[],
): { start: string; end: string; days: number } | undefined {
  const span = (DEFAULT_DAYS - 1) * DAY_MS;
  const end = q.endDate ?? (q.startDate === undefined ? today : toDay(toTime(q.startDate) + span));
  const start = q.startDate ?? (end === undefined ? undefined : toDay(toTime(end) - span));
  const before = problems.length;
  if (start === undefined || toDay(toTime(start)) === undefined) problems.push({ field: 'querystring.startDate', message: 'must be a day between 0001-01-01 and 9999-12-31' });
  if (end === undefined || toDay(toTime(end)) === undefined) problems.push({ field: 'querystring.endDate', message: 'must be a day between 0001-01-01 and 9999-12-31' });
  if (start === undefined || end === undefined || problems.length > before) return undefined;
  const days = (toTime(end) - toTime(start)) / DAY_MS + 1;
  return { start, end, days };
}

/** The usual checks of a resolved period's length: not reversed, at most MAX_DAYS. */
export function checkLength(days: number, problems: Problem[]): void {
  if (days < 1) problems.push({ field: 'querystring.startDate', message: 'must not be after endDate' });
  else if (days > MAX_DAYS) problems.push({ field: 'querystring.endDate', message: `the period covers ${days} days; at most ${MAX_DAYS}` });
}
