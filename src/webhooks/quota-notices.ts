// C38: usage.quota. After usage counts reach storage (never on the RPC path), the accounts just
// written are checked against their effective limits (plan and admin overrides, C8/C9): daily
// requests and monthly compute units passing 80% and 100% make one event per threshold and
// period. The notice is recorded in the same transaction as the event, under a primary key, so
// a restart or a second instance never sends it again.
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { PlansConfig, WebhooksConfig } from '../config/schema.ts';
import { currentPeriods } from '../metering/periods.ts';
import { effectiveLimits } from '../metering/plans.ts';
import { SerialJob } from '../jobs/serial.ts';
import type { Db } from '../storage/db.ts';
import { webhookPlans } from './endpoints.ts';
import type { PublishedEvent } from './events.ts';

export const QUOTA_THRESHOLDS = [80, 100] as const;

/** What the notices need of the webhooks service (it owns them): publish in a transaction, then wake the sender. */
export interface QuotaPublisher {
  publish(tx: Db, event: PublishedEvent): Promise<number>;
  wake(): void;
}

export interface QuotaData {
  /** `daily` (requests, C11 UTC day) or `monthly` (compute units, UTC month). */
  period: 'daily' | 'monthly';
  /** The period's first day, YYYY-MM-DD. */
  periodStart: string;
  metric: 'requests' | 'computeUnits';
  used: number;
  limit: number;
  /** used / limit in whole percent (rounded down). */
  percent: number;
  /** The threshold this notice is about: 80 or 100. */
  threshold: number;
}

interface AccountUsage {
  id: string;
  tier: string;
  requests_per_minute: number | null;
  daily_limit: number | null;
  monthly_limit: number | null;
  day_requests: string | number;
  month_units: string | number;
}

/** The settings quota notices read: the plans with webhooks and their monthly allowances. */
export interface QuotaNoticeSettings {
  plans: PlansConfig;
  webhooks: Pick<WebhooksConfig, 'maxEndpoints'>;
}

export class QuotaNotices {
  readonly #db: Db;
  readonly #settings: QuotaNoticeSettings;
  readonly #webhooks: QuotaPublisher;
  readonly #log: Logger;
  /** Accounts waiting for a check; checks run one at a time. */
  #queued = new Set<string>();
  readonly #checks = new SerialJob(() => this.#checkQueued());

  constructor(deps: { db: Db; settings: QuotaNoticeSettings; webhooks: QuotaPublisher; logger: Logger }) {
    this.#db = deps.db;
    this.#settings = deps.settings;
    this.#webhooks = deps.webhooks;
    this.#log = deps.logger.child({ component: 'webhooks' });
  }

  /** Called after a usage flush with the accounts it wrote; returns at once, the check runs after. */
  afterFlush(userIds: Iterable<string>): void {
    for (const id of userIds) this.#queued.add(id);
    if (this.#queued.size === 0) return;
    void this.#checks.request();
  }

  /** Waits for the checks queued so far (tests, shutdown). */
  idle(): Promise<void> {
    return this.#checks.idle();
  }

  /** One check of the accounts queued so far; those queued meanwhile are checked in the pass right after. */
  async #checkQueued(): Promise<void> {
    const ids = [...this.#queued];
    this.#queued = new Set();
    try {
      await this.check(ids);
    } catch (err) {
      const e = err as { name?: string; code?: string; cause?: { code?: string } };
      this.#log.warn({ error: e.name, code: e.cause?.code ?? e.code }, 'usage.quota check failed');
    }
  }

  /** Checks these accounts now; returns how many notices it published. */
  async check(userIds: readonly string[], now = Date.now()): Promise<number> {
    if (userIds.length === 0) return 0;
    const { day, month } = currentPeriods(now);
    const monthStart = `${month}-01`;
    // Only accounts on a plan with webhooks and an enabled usage.quota endpoint: the others need no sums.
    const result = await this.#db.execute(sql`
      select u.id, u.tier, u.requests_per_minute, u.daily_limit, u.monthly_limit,
        coalesce((select sum(requests) from usage_account_daily where user_id = u.id and day = ${day}::date), 0) as day_requests,
        coalesce((select sum(compute_units) from usage_account_daily where user_id = u.id and day >= ${monthStart}::date and day <= ${day}::date), 0) as month_units
      from users u
      where u.id = any(string_to_array(${userIds.join(',')}::text, ','))
        and u.tier = any(string_to_array(${webhookPlans(this.#settings.webhooks.maxEndpoints).join(',')}::text, ','))
        and exists (select 1 from webhook_endpoints e where e.user_id = u.id and e.status = 'enabled' and e.events @> '["usage.quota"]'::jsonb)`);
    let sent = 0;
    for (const a of (result as { rows: AccountUsage[] }).rows) {
      const limits = effectiveLimits(this.#settings.plans, {
        tier: a.tier,
        requestsPerMinute: a.requests_per_minute,
        dailyLimit: a.daily_limit,
        monthlyLimit: a.monthly_limit,
      });
      const checks: Array<Omit<QuotaData, 'percent' | 'threshold'>> = [];
      if (limits.dailyLimit !== null) {
        checks.push({ period: 'daily', periodStart: day, metric: 'requests', used: Number(a.day_requests), limit: limits.dailyLimit });
      }
      if (limits.monthlyComputeUnits !== null) {
        checks.push({ period: 'monthly', periodStart: monthStart, metric: 'computeUnits', used: Number(a.month_units), limit: limits.monthlyComputeUnits });
      }
      for (const c of checks) {
        for (const threshold of QUOTA_THRESHOLDS) {
          if (c.used * 100 < threshold * c.limit) continue;
          if (await this.#notify(a.id, { ...c, threshold, percent: Math.floor((c.used * 100) / c.limit) })) sent++;
        }
      }
    }
    if (sent) this.#webhooks.wake();
    return sent;
  }

  /** Records the notice and publishes its event in one transaction; false when it was sent before. */
  async #notify(userId: string, data: QuotaData): Promise<boolean> {
    const period = `${data.period}:${data.period === 'daily' ? data.periodStart : data.periodStart.slice(0, 7)}`;
    return this.#db.transaction(async (tx) => {
      const inserted = await tx.execute(sql`
        insert into webhook_quota_notices (user_id, period, threshold) values (${userId}, ${period}, ${data.threshold})
        on conflict do nothing returning threshold`);
      if ((inserted as { rows: unknown[] }).rows.length === 0) return false;
      await this.#webhooks.publish(tx, { type: 'usage.quota', accountId: userId, data: data as unknown as Record<string, unknown> });
      return true;
    });
  }
}
