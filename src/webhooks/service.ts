// C37-C39: webhook endpoints, their events (an outbox in storage) and the signed delivery.
import { randomUUID } from 'node:crypto';
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { users } from '../auth/schema.ts';
import type { NetworkConfig, PlansConfig, WebhooksConfig } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
import type { Db } from '../storage/db.ts';
import { EndpointStore, webhookPlans } from './endpoints.ts';
import { eventBody, matchesFilters, type PublishedEvent } from './events.ts';
import { webhookDeliveries, webhookEndpoints, webhookEvents } from './schema.ts';
import { QuotaNotices } from './quota-notices.ts';
import { Sender, type SenderStats } from './sender.ts';

export type { PublishedEvent, WebhookEventType } from './events.ts';

/** The settings webhooks read: their own section, the plans (quota notices) and the networks endpoints may name. */
export interface WebhooksSettings {
  webhooks: WebhooksConfig;
  plans: PlansConfig;
  networks: readonly Pick<NetworkConfig, 'slug'>[];
}

export interface WebhooksOptions {
  db: Db;
  settings: WebhooksSettings;
  logger: Logger;
  /** The server secret that encrypts signing secrets at rest (as API keys, C19). */
  encryptionSecret: string;
  /** Told after an endpoint is made, changed or deleted: an address.activity endpoint is followed at once. */
  onEndpointsChange?: (() => void) | undefined;
}

/** An endpoint an event goes to, as the address.activity producer finds them. */
export interface ActivityEndpoint {
  id: string;
  addresses: readonly string[];
  minValue: string | undefined;
}

/** A new event id: the `webhook-id` header (C39). */
const newEventId = () => `msg_${randomUUID().replaceAll('-', '')}`;

export class Webhooks {
  readonly endpoints: EndpointStore;
  /** usage.quota: told by the usage service after each flush (C38). */
  readonly quota: QuotaNotices;
  readonly #db: Db;
  readonly #sender: Sender;
  readonly #plans: string[];

  constructor(opts: WebhooksOptions) {
    this.#db = opts.db;
    this.#plans = webhookPlans(opts.settings.webhooks.maxEndpoints);
    this.endpoints = new EndpointStore({ db: opts.db, settings: opts.settings, encryptionSecret: opts.encryptionSecret, onChange: opts.onEndpointsChange });
    this.#sender = new Sender({ db: opts.db, settings: opts.settings.webhooks, logger: opts.logger.child({ component: 'webhooks' }), store: this.endpoints });
    this.quota = new QuotaNotices({ db: opts.db, settings: opts.settings, webhooks: this, logger: opts.logger });
  }

  /** Counters of the sender on this instance (tests, benchmark). */
  get stats(): Readonly<SenderStats> {
    return this.#sender.stats;
  }

  /**
   * Writes the event to the outbox of every enabled endpoint that wants it (type, filters,
   * account; accounts on a plan with webhooks only), inside `tx`: the event is stored before any
   * attempt (C39). Returns how many deliveries it made. Call `wake()` after the commit.
   */
  async publish(tx: Db, event: PublishedEvent): Promise<number> {
    const where = [
      eq(webhookEndpoints.status, 'enabled'),
      sql`${webhookEndpoints.events} @> ${JSON.stringify([event.type])}::jsonb`,
      inArray(users.tier, this.#plans),
    ];
    if (event.accountId !== undefined) where.push(eq(webhookEndpoints.userId, event.accountId));
    const rows = await tx
      .select({ id: webhookEndpoints.id, filters: webhookEndpoints.filters })
      .from(webhookEndpoints)
      .innerJoin(users, eq(users.id, webhookEndpoints.userId))
      .where(and(...where));
    const targets = rows.filter((r) => {
      if (!matchesFilters(r.filters, event.data)) return false;
      if (event.type !== 'address.activity') return true;
      const watched = r.filters.addresses ?? [];
      return watched.includes(String(event.data.from)) || watched.includes(String(event.data.to));
    });
    return this.enqueue(
      tx,
      event,
      targets.map((t) => t.id),
    );
  }

  /** Stores one event for exactly these endpoints (the producer chose them). Returns how many deliveries. */
  async enqueue(tx: Db, event: PublishedEvent, endpointIds: readonly string[]): Promise<number> {
    if (endpointIds.length === 0) return 0;
    // One statement: the event and a delivery row per endpoint (the outbox, C39). clock_timestamp(),
    // not now(): events of one transaction get distinct creation times, the order of an endpoint's queue.
    await tx.execute(sql`
      with ev as (insert into webhook_events (id, type, body) values (${newEventId()}, ${event.type}, ${eventBody(event)}) returning id)
      insert into webhook_deliveries (id, event_id, endpoint_id, created_at)
      select gen_random_uuid()::text, ev.id, e, clock_timestamp() from ev, unnest(string_to_array(${endpointIds.join(',')}::text, ',')) as e`);
    return endpointIds.length;
  }

  /**
   * The enabled address.activity endpoints watching `network`, of accounts whose plan has
   * webhooks (C38). Read inside the follower's transaction.
   */
  async activityEndpoints(network: string, tx: Db = this.#db): Promise<ActivityEndpoint[]> {
    const rows = await tx
      .select({ id: webhookEndpoints.id, filters: webhookEndpoints.filters })
      .from(webhookEndpoints)
      .innerJoin(users, eq(users.id, webhookEndpoints.userId))
      .where(
        and(
          eq(webhookEndpoints.status, 'enabled'),
          sql`${webhookEndpoints.events} @> '["address.activity"]'::jsonb`,
          sql`${webhookEndpoints.filters} -> 'networks' @> ${JSON.stringify([network])}::jsonb`,
          inArray(users.tier, this.#plans),
        ),
      );
    return rows.map((r) => ({ id: r.id, addresses: r.filters.addresses ?? [], minValue: r.filters.minValue }));
  }

  /** The networks of enabled address.activity endpoints (C33: the follower follows them). */
  async activityNetworks(): Promise<string[]> {
    const result = await this.#db.execute(sql`
      select distinct jsonb_array_elements_text(e.filters -> 'networks') as network
      from webhook_endpoints e join users u on u.id = e.user_id
      where e.status = 'enabled' and e.events @> '["address.activity"]'::jsonb
        and u.tier = any(string_to_array(${this.#plans.join(',')}::text, ','))`);
    return (result as { rows: Array<{ network: string }> }).rows.map((r) => r.network);
  }

  /** `POST /webhooks/:id/test`: a webhook.test event for this endpoint only, sent now (C37). */
  async sendTest(userId: string, id: string): Promise<{ eventId: string; deliveryId: string }> {
    const row = await this.endpoints.get(userId, id);
    if (row.status !== 'enabled') throw new HttpError('CONFLICT', 'The webhook is disabled; enable it first');
    const eventId = newEventId();
    const deliveryId = randomUUID();
    const event: PublishedEvent = {
      type: 'webhook.test',
      data: { webhookId: id, message: 'A test event from Junction: your endpoint receives and verifies webhooks.' },
    };
    await this.#db.transaction(async (tx) => {
      await tx.insert(webhookEvents).values({ id: eventId, type: event.type, body: eventBody(event) });
      await tx.insert(webhookDeliveries).values({ id: deliveryId, eventId, endpointId: id, createdAt: sql`clock_timestamp()` });
    });
    this.wake();
    return { eventId, deliveryId };
  }

  /** Wakes the sender after a commit that published events. */
  wake(): void {
    this.#sender.wake();
  }

  /** Deletes settled deliveries past `deliveryRetentionDays` (also hourly on its own). */
  sweep(): Promise<void> {
    return this.#sender.sweep();
  }

  start(): void {
    this.#sender.start();
  }

  async close(): Promise<void> {
    await this.quota.idle();
    await this.#sender.close();
  }
}
