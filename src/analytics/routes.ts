// GET /usage/analytics (C46): an account's advanced analytics over a period, for the plans that have them.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService } from '../auth/accounts.ts';
import { signedInAccount } from '../auth/bearer.ts';
import type { Tier } from '../config/schema.ts';
import { badRequest, HttpError, notFound, unauthorized } from '../errors/http.ts';
import { checkLength, Day, type Problem, resolvePeriod } from '../http/period.ts';
import { ErrorResponse, ok } from '../http/schemas.ts';
import { currentPeriods } from '../metering/periods.ts';
import { type AnswerCache, sendKept } from './answer-cache.ts';
import { type AnalyticsQuery, AnalyticsStore, DAILY_RETENTION_DAYS, type Granularity, HOURLY_RETENTION_DAYS } from './store.ts';

/** C46: the plans with advanced analytics (spec: Pro and above). */
export const ANALYTICS_PLANS: readonly Tier[] = ['pro', 'max', 'enterprise'];

const Count = T.Integer({ minimum: 0 });
const Ms = T.Union([T.Number({ minimum: 0 }), T.Null()], { description: 'milliseconds; null when there was no request' });
const Rate = T.Number({ minimum: 0, maximum: 1, description: '(node errors + upstream failures) / requests, 0 without requests' });

const AnalyticsQuerySchema = T.Object(
  {
    startDate: T.Optional(Day),
    endDate: T.Optional(Day),
    granularity: T.Optional(T.Union([T.Literal('hour'), T.Literal('day')], { description: 'series buckets; `hour` for periods of up to 7 days (default `day`)' })),
    apiKeyId: T.Optional(T.String({ minLength: 1, maxLength: 64, description: 'only this key; another account’s key is 404' })),
    network: T.Optional(T.String({ pattern: '^[a-z0-9-]{1,64}$', description: 'only this network slug' })),
    method: T.Optional(T.String({ pattern: '^[A-Za-z0-9_]{1,100}$', description: 'only this JSON-RPC method' })),
  },
  { additionalProperties: false },
);

const Analytics = T.Object({
  period: T.Object({ start: T.String({ format: 'date' }), end: T.String({ format: 'date' }) }),
  granularity: T.Union([T.Literal('hour'), T.Literal('day')]),
  series: T.Array(
    T.Object({
      start: T.String({ format: 'date-time', description: 'start of the hour or day, UTC' }),
      requests: Count,
      computeUnits: Count,
      errors: T.Object({
        node: T.Integer({ minimum: 0, description: 'calls a node answered with an error (revert, bad params...)' }),
        upstream: T.Integer({ minimum: 0, description: 'calls no node answered usably (-32000 and other 5xx answers)' }),
      }),
      refused: T.Object(
        { rate: Count, quota: Count, key: Count, network: Count, method: Count, access: Count },
        { description: 'calls refused before reaching a node, by reason (never counted as usage)' },
      ),
      latencyMs: T.Object({ p50: Ms, p95: Ms, p99: Ms }, { description: 'from arrival to answer, measured in the gateway, from merged histograms (within 9.5%)' }),
    }),
    { description: 'every hour or day of the period, zeros included, oldest first' },
  ),
  topMethods: T.Array(T.Object({ method: T.String(), requests: Count, computeUnits: Count, errorRate: Rate, p95Ms: Ms }), {
    description: 'the 10 methods with the most requests',
  }),
  byKey: T.Array(T.Object({ apiKeyId: T.String(), name: T.Union([T.String(), T.Null()], { description: 'null for a deleted key' }), requests: Count, computeUnits: Count })),
  byNetwork: T.Array(T.Object({ network: T.String(), requests: Count, errorRate: Rate, p95Ms: Ms })),
}, { title: 'Analytics' });

/** `hour` covers at most 7 days (C46); the period's default and largest length are C27's (src/http/period.ts). */
const MAX_HOURLY_DAYS = 7;

/** GET /usage/analytics (C46). Registered behind the bearer hook. */
export const analyticsRoutes: FastifyPluginAsyncTypebox<{
  store: AnalyticsStore;
  /** C46: answers kept one flush interval as their bodies, one query for identical concurrent ones (answer-cache.ts). */
  answers?: AnswerCache<string> | undefined;
  accounts: AccountService;
  networks: ReadonlySet<string>;
}> = async (app, { store, answers, accounts, networks }) => {
  app.get(
    '/usage/analytics',
    {
      schema: {
        tags: ['usage'],
        operationId: 'getUsageAnalytics',
        summary: 'Latency percentiles, errors and refusals per hour or day, top methods, by key and by network (plans pro, max, enterprise)',
        description:
          'Over a period (default: the 30 days ending today, UTC). Latency is measured in the gateway from the arrival of a request to its answer; percentiles come from merged histograms. Refused calls are counted by reason. Hourly buckets are kept 35 days (granularity `hour` for periods of up to 7 days), daily ones 400 days; a period reaching past that is 400. Figures appear within 5 seconds. Free plan: 403 PLAN_FEATURE.',
        security: [{ bearerAuth: [] }],
        querystring: AnalyticsQuerySchema,
        response: { 200: ok(Analytics), 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse },
      },
      // The plan is checked before the query, so another plan learns nothing from its input (as whale alerts do).
      preValidation: async (req) => {
        const user = await signedInAccount(accounts, req);
        if (!user) throw unauthorized('The account no longer exists');
        if (!ANALYTICS_PLANS.includes(user.tier as Tier)) {
          throw new HttpError('PLAN_FEATURE', `Advanced analytics are included in the ${ANALYTICS_PLANS.join(', ')} plans; this account is on ${user.tier}`, {
            details: { feature: 'analytics', plans: ANALYTICS_PLANS, tier: user.tier },
          });
        }
      },
    },
    async (req, reply) => {
      const { startDate, endDate, apiKeyId, network, method } = req.query;
      const granularity: Granularity = req.query.granularity ?? 'day';
      // C27's defaults: the 30 days ending today; one date given, the other is derived from it.
      const today = currentPeriods().day;
      const problems: Problem[] = [];
      const period = resolvePeriod({ startDate, endDate }, today, problems);
      if (period) {
        const { days } = period;
        if (days >= 1 && granularity === 'hour' && days > MAX_HOURLY_DAYS) {
          problems.push({ field: 'querystring.granularity', message: `hour covers periods of up to ${MAX_HOURLY_DAYS} days; this one covers ${days}` });
        } else {
          checkLength(days, problems);
          const oldest = AnalyticsStore.oldestDay(granularity, today);
          if (problems.length === 0 && period.start < oldest) {
            const kept = granularity === 'hour' ? `hourly figures are kept ${HOURLY_RETENTION_DAYS} days` : `daily figures are kept ${DAILY_RETENTION_DAYS} days`;
            problems.push({ field: 'querystring.startDate', message: `must be ${oldest} or later: ${kept}` });
          }
        }
      }
      if (network !== undefined && !networks.has(network)) problems.push({ field: 'querystring.network', message: `unknown network "${network}"` });
      if (problems.length || !period) {
        throw badRequest(`Invalid request: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);
      }
      const q: AnalyticsQuery = { userId: req.userId, start: period.start, end: period.end, granularity, keyId: apiKeyId, network, method };
      const query = JSON.stringify([q.start, q.end, q.granularity, q.keyId, q.network, q.method]);
      return sendKept(reply, answers, q.userId, query, async () => {
        const found = await store.query(q);
        // C7: another account's key is a 404. For scale (docs/scaling.md): the rows of the key
        // read under this account prove it is the account's, so ownership is read only for an
        // answer without them; a kept answer makes no read at all.
        if (apiKeyId !== undefined && found.byKey.length === 0 && !(await store.ownsKey(q.userId, apiKeyId))) throw notFound('API key');
        return found;
      });
    },
  );
};
