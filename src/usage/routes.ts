// GET /usage/stats (C27): an account's usage over a period.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import { badRequest, notFound } from '../errors/http.ts';
import { checkLength, Day, type Problem, resolvePeriod } from '../http/period.ts';
import { ErrorResponse, ok } from '../http/schemas.ts';
import { currentPeriods } from '../metering/periods.ts';
import { type AnswerCache, sendKept } from '../analytics/answer-cache.ts';
import type { StatsQuery, UsageQueries, UsageStats } from './queries.ts';

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
  totalComputeUnits: T.Integer({ minimum: 0, description: 'compute units of those requests (the monthly quota counts these)' }), // C10
  requestsByNetwork: T.Record(T.String(), Count, { description: 'network slug to requests; networks without requests are left out' }),
  requestsByMethod: T.Record(T.String(), Count, { description: 'JSON-RPC method to requests' }),
  dailyBreakdown: T.Array(T.Object({ date: T.String({ format: 'date' }), requests: Count }), {
    description: 'every day of the period, zeros included, oldest first',
  }),
}, { title: 'UsageStats' });

/** GET /usage/stats (spec 4.2; C27). Registered behind the bearer hook. */
export const usageRoutes: FastifyPluginAsyncTypebox<{
  usage: UsageQueries;
  /** C27: answers kept one flush interval as their bodies, one query for identical concurrent ones (analytics/answer-cache.ts). */
  answers?: AnswerCache<string> | undefined;
}> = async (app, { usage, answers }) => {
  app.get(
    '/usage/stats',
    {
      schema: {
        tags: ['usage'],
        operationId: 'getUsageStats',
        summary: "The account's request counts over a period (default: the 30 days ending today, UTC)",
        description:
          'Counts every admitted JSON-RPC call of all the account’s keys (HTTP and WebSocket, batch items one by one), deleted keys included; refused calls are not counted. Counts appear within 5 seconds.',
        security: [{ bearerAuth: [] }],
        querystring: StatsQuery,
        response: { 200: ok(UsageStats), 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse },
      },
    },
    async (req, reply) => {
      const { startDate, endDate, apiKeyId, network } = req.query;
      // C27: omitted dates are the 30 days ending today; one given, the other is derived from it.
      const problems: Problem[] = [];
      const period = resolvePeriod({ startDate, endDate }, currentPeriods().day, problems);
      if (period) checkLength(period.days, problems);
      if (network !== undefined && !usage.hasNetwork(network)) problems.push({ field: 'querystring.network', message: `unknown network "${network}"` });
      if (problems.length || !period) {
        throw badRequest(`Invalid request: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);
      }
      const q: StatsQuery = { userId: req.userId, start: period.start, end: period.end, keyId: apiKeyId, network };
      return sendKept(reply, answers, q.userId, JSON.stringify([q.start, q.end, q.keyId, q.network]), async () => {
        const found = await usage.stats(q);
        // C7: another account's key is a 404; ownership is read only when no row of the key under
        // this account proves it (as /usage/analytics does).
        if (apiKeyId !== undefined && found.totalRequests === 0 && !(await usage.ownsKey(q.userId, apiKeyId))) throw notFound('API key');
        return found;
      });
    },
  );
};
