// What the features show on /metrics, read at scrape time from the parts that keep the figures:
// Redis and the limiter (C48), the block follower (C33), usage held while storage is away (C48),
// the webhook sender (C37-C39), slow consumers (C60). The RPC side's are rpc-metrics.ts's; the metrics' plumbing is metrics.ts's.
import type { BlockFollower } from '../events/follower.ts';
import type { Outbound } from '../http/outbound.ts';
import type { RedisLimiter } from '../metering/redis-limiter.ts';
import type { RedisLink } from '../storage/redis.ts';
import type { UsageService } from '../usage/service.ts';
import type { Webhooks } from '../webhooks/service.ts';
import type { Metrics } from './metrics.ts';

export function observeFeatures(
  metrics: Metrics,
  parts: { link: RedisLink | undefined; redisLimiter: RedisLimiter | undefined; follower: BlockFollower; usage: UsageService; webhooks: Webhooks; outbound: Outbound },
): void {
  const { link, redisLimiter, follower, usage, webhooks, outbound } = parts;
  if (link) {
    metrics.define({ name: 'junction_redis_up', help: '1 while Redis answers; 0 while limits are enforced by this instance in memory (C48)', type: 'gauge', read: () => (link.up ? 1 : 0) });
    metrics.define({ name: 'junction_redis_outages_total', help: 'Times this instance found Redis not answering (C48)', type: 'counter', read: () => link.outages });
    if (redisLimiter) metrics.define({ name: 'junction_limiter_memory_calls_total', help: 'Limiter calls answered in memory because Redis did not (C48)', type: 'counter', read: () => redisLimiter.memoryCalls });
  }
  // The follower's figures per network, read at each scrape (C33).
  const followed = (pick: (f: ReturnType<BlockFollower['stats']>[number]) => number | null) => () =>
    follower.stats().flatMap((f): [Record<string, string>, number][] => {
      const v = pick(f);
      return v === null ? [] : [[{ network: f.network }, v]];
    });
  metrics.define({ name: 'junction_follower_cursor', help: 'Last block handed to the consumers, by network', type: 'gauge', labelNames: ['network'], read: followed((f) => f.cursor) });
  metrics.define({ name: 'junction_follower_lag_blocks', help: 'Blocks between the newest head and the cursor (confirmations included), by network', type: 'gauge', labelNames: ['network'], read: followed((f) => f.lag) });
  metrics.define({ name: 'junction_follower_blocks_total', help: 'Blocks handed on by this instance, by network', type: 'counter', labelNames: ['network'], read: followed((f) => f.blocksHandled) });
  metrics.define({ name: 'junction_follower_lease_held', help: '1 where this instance holds the network\'s follower lease', type: 'gauge', labelNames: ['network'], read: followed((f) => (f.leaseHeld ? 1 : 0)) });
  // C48: usage and analytics held in memory while storage cannot take them.
  metrics.define({ name: 'junction_usage_pending_rows', help: 'Usage rows in memory waiting to be stored (grows while the database is unreachable)', type: 'gauge', read: () => usage.pendingRows });
  metrics.define({ name: 'junction_analytics_pending_rows', help: 'Analytics rows in memory waiting to be stored', type: 'gauge', read: () => usage.pendingAnalyticsRows });
  metrics.define({ name: 'junction_usage_flush_failing', help: '1 while usage flushes fail (storage unreachable): counts are held in memory', type: 'gauge', read: () => (usage.failing ? 1 : 0) });
  metrics.define({ name: 'junction_usage_dropped_rows_total', help: 'Rows dropped past usage.maxPendingRows while storage was unreachable, by kind', type: 'counter', labelNames: ['kind'], read: () => [[{ kind: 'usage' }, usage.dropped.usageRows], [{ kind: 'analytics' }, usage.dropped.analyticsRows]] });
  metrics.define({ name: 'junction_usage_dropped_requests_total', help: 'Requests in the usage rows dropped past usage.maxPendingRows', type: 'counter', read: () => usage.dropped.usageRequests });
  // C60: connections cut for not reading their answers, nodes' answers refused for want of room, and the bytes in memory now.
  metrics.define({
    name: 'junction_connections_cut_total',
    help: 'Connections cut for not taking their answers, by reason (write_timeout: server.writeTimeoutMs; instance_cap: server.maxPendingBytes)',
    type: 'counter',
    labelNames: ['reason'],
    read: () => [[{ reason: 'write_timeout' }, outbound.cuts.writeTimeout], [{ reason: 'instance_cap' }, outbound.cuts.instanceCap]],
  });
  metrics.define({ name: 'junction_upstream_answers_refused_room_total', help: 'Calls refused (503) because the large answers of nodes being read filled server.maxPendingBytes', type: 'counter', read: () => outbound.refused });
  metrics.define({ name: 'junction_answers_unsent_bytes', help: 'Bytes of answers written and not yet taken by their clients, on the watched connections', type: 'gauge', read: () => outbound.pendingBytes() });
  // The webhook sender's figures on this instance (C37-C39).
  metrics.define({ name: 'junction_webhook_attempts_total', help: 'Webhook delivery attempts sent by this instance', type: 'counter', read: () => webhooks.stats.attempts });
  metrics.define({ name: 'junction_webhook_deliveries_total', help: 'Webhook deliveries ended by this instance, by outcome (delivered, failed after the last retry)', type: 'counter', labelNames: ['outcome'], read: () => [[{ outcome: 'delivered' }, webhooks.stats.delivered], [{ outcome: 'failed' }, webhooks.stats.failed]] });
  metrics.define({ name: 'junction_webhook_in_flight', help: 'Webhook attempts waiting for the receiver on this instance', type: 'gauge', read: () => webhooks.stats.inFlight });
}
