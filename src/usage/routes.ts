import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { badRequest, notFound } from '../errors/http.ts';
import { ErrorResponse, ok } from '../http/schemas.ts';
import { currentPeriods } from '../metering/periods.ts';
import type { UsageService } from './service.ts';

// `format: date` rejects impossible days such as 2026-02-30; the pattern keeps it to YYYY-MM-DD.
const Day = T.String({ format: 'date', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'UTC day, YYYY-MM-DD' });
const Count = T.Integer({ minimum: 0 });

const StatsQuery = T.Object(
  {
    startDate: T.Optional(Day),
    endDate: T.Optional(Day),
    apiKeyId: T.Optional(T.String({ minLength: 1, maxLength: 64, description: 'only this key (beyond the spec); another account’s key is 404' })),
    network: T.Optional(T.String({ pattern: '^[a-z0-9-]{1,64}$', description: 'only this network slug (beyond the spec)' })),
  },
  { additionalProperties: false },
);

const UsageStats = T.Object({
  period: T.Object({ start: T.String({ format: 'date' }), end: T.String({ format: 'date' }) }),
  totalRequests: Count,
  totalComputeUnits: T.Integer({ minimum: 0, description: 'compute units of those requests (C10; beyond the spec)' }),
  requestsByNetwork: T.Record(T.String(), Count, { description: 'network slug to requests; networks without requests are left out' }),
  requestsByMethod: T.Record(T.String(), Count, { description: 'JSON-RPC method to requests' }),
  dailyBreakdown: T.Array(T.Object({ date: T.String({ format: 'date' }), requests: Count }), {
    description: 'every day of the period, zeros included, oldest first',
  }),
});

/** The default and the largest period, in days (C27). */
const DEFAULT_DAYS = 30;
const MAX_DAYS = 366;
const DAY_MS = 86_400_000;

const toTime = (day: string) => Date.parse(`${day}T00:00:00Z`);
/** YYYY-MM-DD of a UTC midnight, or undefined outside years 0001–9999 (what a date column holds). */
function toDay(t: number): string | undefined {
  const d = new Date(t);
  const y = d.getUTCFullYear();
  return Number.isNaN(t) || y < 1 || y > 9999 ? undefined : d.toISOString().slice(0, 10);
}

/** GET /usage/stats (spec 4.2; C27). Registered behind the bearer hook. */
export const usageRoutes: FastifyPluginAsyncTypebox<{ usage: UsageService }> = async (app, { usage }) => {
  app.get(
    '/usage/stats',
    {
      schema: {
        tags: ['usage'],
        summary: "The account's request counts over a period (default: the 30 days ending today, UTC)",
        description:
          'Counts every admitted JSON-RPC call of all the account’s keys (HTTP and WebSocket, batch items one by one), deleted keys included; refused calls are not counted. Counts appear within 5 seconds.',
        security: [{ bearerAuth: [] }],
        querystring: StatsQuery,
        response: { 200: ok(UsageStats), 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req) => {
      const { startDate, endDate, apiKeyId, network } = req.query;
      // C27: omitted dates are the 30 days ending today; one given, the other is derived from it.
      const span = (DEFAULT_DAYS - 1) * DAY_MS;
      const end = endDate ?? (startDate === undefined ? currentPeriods().day : toDay(toTime(startDate) + span));
      const start = startDate ?? (end === undefined ? undefined : toDay(toTime(end) - span));
      const problems: Array<{ field: string; message: string }> = [];
      if (start === undefined || toDay(toTime(start)) === undefined) problems.push({ field: 'querystring.startDate', message: 'must be a day between 0001-01-01 and 9999-12-31' });
      if (end === undefined || toDay(toTime(end)) === undefined) problems.push({ field: 'querystring.endDate', message: 'must be a day between 0001-01-01 and 9999-12-31' });
      if (start !== undefined && end !== undefined && !problems.length) {
        const days = (toTime(end) - toTime(start)) / DAY_MS + 1;
        if (days < 1) problems.push({ field: 'querystring.startDate', message: 'must not be after endDate' });
        else if (days > MAX_DAYS) problems.push({ field: 'querystring.endDate', message: `the period covers ${days} days; at most ${MAX_DAYS}` });
      }
      if (network !== undefined && !usage.hasNetwork(network)) problems.push({ field: 'querystring.network', message: `unknown network "${network}"` });
      if (problems.length || start === undefined || end === undefined) {
        throw badRequest(`Invalid request: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);
      }
      if (apiKeyId !== undefined && !(await usage.ownsKey(req.userId, apiKeyId))) throw notFound('API key');
      return { success: true as const, data: await usage.stats({ userId: req.userId, start, end, keyId: apiKeyId, network }) };
    },
  );
};
