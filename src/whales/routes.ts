// GET /whale-alerts (C35, C36): whale alerts for the plans that include them.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type as T } from '@sinclair/typebox';
import type { AccountService } from '../auth/accounts.ts';
import { signedInAccount } from '../auth/bearer.ts';
import type { Tier } from '../config/schema.ts';
import { HttpError, unauthorized } from '../errors/http.ts';
import { ErrorResponse, ok } from '../http/schemas.ts';
import { WhaleAlertSchema } from './alert.ts';
import type { WhaleAlerts } from './service.ts';

/** C36: the plans that include whale alerts (spec 8: a Max feature; enterprise has every feature). */
export const WHALE_ALERT_PLANS: readonly Tier[] = ['max', 'enterprise'];

const WhaleQuery = T.Object(
  {
    limit: T.Integer({ minimum: 1, maximum: 100, default: 20, description: 'alerts per page, 1 to 100' }),
    minValue: T.String({
      pattern: '^[0-9]+(\\.[0-9]+)?$',
      maxLength: 80,
      default: '100000',
      description: "smallest value in whole native units, a non-negative decimal string with at most the currency's decimals",
    }),
    network: T.String({ pattern: '^[a-z0-9-]{1,64}$', default: 'native-mainnet', description: 'a whale-alert network (beyond the spec)' }),
    before: T.Optional(
      T.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', description: 'an alert id: only older alerts (the next page starts before the last id of this one)' }),
    ),
  },
  { additionalProperties: false },
);

/** GET /whale-alerts (spec 4.2; C35, C36). Registered behind the bearer hook. */
export const whaleRoutes: FastifyPluginAsyncTypebox<{ whales: WhaleAlerts; accounts: AccountService }> = async (
  app,
  { whales, accounts },
) => {
  app.get(
    '/whale-alerts',
    {
      schema: {
        operationId: 'listWhaleAlerts',
        tags: ['whale-alerts'],
        summary: 'Large native-coin transfers, newest first (plans max and enterprise)',
        description:
          'Transfers of at least `minValue` native units on `network`, newest first (block, then position in the block). `before` pages back: pass the id of the last alert of a page. Alerts are kept `whaleAlerts.retentionDays` (90 by default); an alert is listed within 5 s of its block being confirmed. Other plans: 403 PLAN_FEATURE.',
        security: [{ bearerAuth: [] }],
        querystring: WhaleQuery,
        response: { 200: ok(T.Array(WhaleAlertSchema)), 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse },
      },
      // C36: the plan is checked before the query, so another plan learns nothing from its input.
      preValidation: async (req) => {
        const user = await signedInAccount(accounts, req);
        if (!user) throw unauthorized('The account no longer exists');
        if (!WHALE_ALERT_PLANS.includes(user.tier as Tier)) {
          throw new HttpError('PLAN_FEATURE', `Whale alerts are included in the ${WHALE_ALERT_PLANS.join(' and ')} plans; this account is on ${user.tier}`, {
            details: { feature: 'whale-alerts', plans: WHALE_ALERT_PLANS, tier: user.tier },
          });
        }
      },
    },
    async (req) => ({ success: true as const, data: await whales.list(req.query) }),
  );
};
