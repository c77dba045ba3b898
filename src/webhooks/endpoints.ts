// C37: an account's webhook endpoints: create, list, change, rotate the secret, delete, and the
// list of deliveries. Validation that the route schema cannot do (known networks, checksums,
// what each event type needs, the target address) lives here.
import { randomBytes, randomUUID } from 'node:crypto';
import { and, count, desc, eq, sql } from 'drizzle-orm';
import { getAddress } from 'viem/utils';
import { users } from '../auth/schema.ts';
import type { NetworkConfig, Tier, WebhooksConfig } from '../config/schema.ts';
import { ForbiddenTargetError } from '../errors/domain.ts';
import { badRequest, HttpError, notFound } from '../errors/http.ts';
import { KeyCipher } from '../keys/crypto.ts';
import type { Db } from '../storage/db.ts';
import type { WebhookEventType } from './events.ts';
import { type WebhookFilters, webhookDeliveries, webhookEndpoints, webhookEvents } from './schema.ts';
import { checkTargetHost } from './ssrf.ts';

export type EndpointRow = typeof webhookEndpoints.$inferSelect;

/** What the API shows of an endpoint; `secret` only in the answers to create and rotate (C37). */
export interface EndpointView {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  filters: WebhookFilters;
  status: 'enabled' | 'disabled';
  disabledReason: string | null;
  createdAt: string;
  updatedAt: string;
  secret?: string;
}

export interface DeliveryView {
  id: string;
  eventId: string;
  type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatusCode: number | null;
  lastDurationMs: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  createdAt: string;
}

export interface EndpointInput {
  url: string;
  events: WebhookEventType[];
  filters?: { networks?: string[] | undefined; minValue?: string | undefined; addresses?: string[] | undefined } | undefined;
  description?: string | null | undefined;
}

export interface EndpointPatch {
  url?: string | undefined;
  events?: WebhookEventType[] | undefined;
  filters?: EndpointInput['filters'];
  description?: string | null | undefined;
  status?: 'enabled' | 'disabled' | undefined;
}

/** `whsec_` and the base64 of 32 random bytes: the Standard Webhooks secret format (C37). */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

const secretAad = (endpointId: string) => `webhook:${endpointId}`;

/** The plans that have webhooks: those with an endpoint allowance in `webhooks.maxEndpoints`. */
export function webhookPlans(maxEndpoints: WebhooksConfig['maxEndpoints']): Tier[] {
  return Object.keys(maxEndpoints) as Tier[];
}

type Problem = { field: string; message: string };

/** The settings the endpoint store reads: its webhooks settings, and the networks an endpoint may name. */
export interface EndpointSettings {
  webhooks: Pick<WebhooksConfig, 'maxEndpoints' | 'rotationOverlapSeconds' | 'allowPrivateTargets'>;
  networks: readonly Pick<NetworkConfig, 'slug'>[];
}

export class EndpointStore {
  readonly #db: Db;
  readonly #settings: EndpointSettings['webhooks'];
  readonly #cipher: KeyCipher;
  readonly #networks: ReadonlySet<string>;
  /** Told after an endpoint is made, changed or deleted (the follower asks for its networks again). */
  readonly #onChange: (() => void) | undefined;

  constructor(deps: { db: Db; settings: EndpointSettings; encryptionSecret: string; onChange?: (() => void) | undefined }) {
    this.#db = deps.db;
    this.#settings = deps.settings.webhooks;
    this.#cipher = new KeyCipher(deps.encryptionSecret);
    this.#networks = new Set(deps.settings.networks.map((n) => n.slug));
    this.#onChange = deps.onChange;
  }

  /** A signing secret of the endpoint from its stored ciphertext (current or previous). */
  decryptSecret(endpointId: string, ciphertext: string): string {
    return this.#cipher.decrypt(ciphertext, secretAad(endpointId));
  }

  view(row: EndpointRow, secret?: string): EndpointView {
    return {
      id: row.id,
      url: row.url,
      description: row.description,
      events: row.events,
      filters: row.filters,
      status: row.status,
      disabledReason: row.disabledReason,
      createdAt: row.createdAt.toISOString(),
      updatedAt: row.updatedAt.toISOString(),
      ...(secret === undefined ? {} : { secret }),
    };
  }

  async list(userId: string): Promise<EndpointRow[]> {
    return this.#db.select().from(webhookEndpoints).where(eq(webhookEndpoints.userId, userId)).orderBy(webhookEndpoints.createdAt, webhookEndpoints.id);
  }

  async get(userId: string, id: string): Promise<EndpointRow> {
    const [row] = await this.#db
      .select()
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.userId, userId)));
    // Another account's endpoint is "no such webhook" too (C7).
    if (!row) throw notFound('webhook');
    return row;
  }

  /**
   * A new endpoint and its secret (shown once). The account's row is locked while its endpoints
   * are counted, so N+k creates at once leave exactly the allowance (C37).
   */
  async create(userId: string, input: EndpointInput): Promise<{ row: EndpointRow; secret: string }> {
    const filters = this.#checkShape(input.events, input.filters, 'body');
    await this.#checkUrl(input.url, 'body.url');
    const id = randomUUID();
    const secret = generateSecret();
    const row = await this.#db.transaction(async (tx) => {
      const [user] = await tx.select({ tier: users.tier }).from(users).where(eq(users.id, userId)).for('update');
      if (!user) throw new HttpError('UNAUTHORIZED', 'The account no longer exists');
      const max = this.#settings.maxEndpoints[user.tier as keyof WebhooksConfig['maxEndpoints']];
      if (max === undefined) throw planFeature(this.#settings.maxEndpoints);
      if (max !== null) {
        const [have] = await tx.select({ n: count() }).from(webhookEndpoints).where(eq(webhookEndpoints.userId, userId));
        if ((have?.n ?? 0) >= max) {
          throw new HttpError('PLAN_LIMIT', `The ${user.tier} plan allows ${max} webhook endpoints`, { details: { limit: max } });
        }
      }
      const [created] = await tx
        .insert(webhookEndpoints)
        .values({
          id,
          userId,
          url: input.url,
          description: input.description ?? null,
          events: [...new Set(input.events)],
          filters,
          secretCiphertext: this.#cipher.encrypt(secret, secretAad(id)),
        })
        .returning();
      return created as EndpointRow;
    });
    this.#onChange?.();
    return { row, secret };
  }

  async update(userId: string, id: string, patch: EndpointPatch): Promise<EndpointRow> {
    const current = await this.get(userId, id);
    const events = patch.events ?? (current.events as WebhookEventType[]);
    const filters = this.#checkShape(events, patch.filters ?? current.filters, 'body');
    if (patch.url !== undefined) await this.#checkUrl(patch.url, 'body.url');
    const set: Partial<EndpointRow> = { updatedAt: new Date(), events: [...new Set(events)], filters };
    if (patch.url !== undefined) set.url = patch.url;
    if (patch.description !== undefined) set.description = patch.description;
    if (patch.status === 'enabled' && current.status !== 'enabled') Object.assign(set, { status: 'enabled', disabledReason: null, failingSince: null });
    if (patch.status === 'disabled' && current.status !== 'disabled') Object.assign(set, { status: 'disabled', disabledReason: 'owner' });
    const updated = await this.#db.transaction(async (tx) => {
      const [row] = await tx
        .update(webhookEndpoints)
        .set(set)
        .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.userId, userId)))
        .returning();
      if (!row) throw notFound('webhook');
      if (set.status === 'disabled') await failPending(tx, id, 'endpoint disabled');
      return row;
    });
    this.#onChange?.();
    return updated;
  }

  /** A new secret; the old one keeps signing for `rotationOverlapSeconds` (C39). */
  async rotate(userId: string, id: string): Promise<{ row: EndpointRow; secret: string }> {
    const secret = generateSecret();
    const overlap = this.#settings.rotationOverlapSeconds;
    const row = await this.#db.transaction(async (tx) => {
      const [current] = await tx
        .select()
        .from(webhookEndpoints)
        .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.userId, userId)))
        .for('update');
      if (!current) throw notFound('webhook');
      const [updated] = await tx
        .update(webhookEndpoints)
        .set({
          secretCiphertext: this.#cipher.encrypt(secret, secretAad(id)),
          previousSecretCiphertext: overlap > 0 ? current.secretCiphertext : null,
          previousSecretExpiresAt: overlap > 0 ? sql`now() + ${overlap} * interval '1 second'` : null,
          updatedAt: new Date(),
        })
        .where(eq(webhookEndpoints.id, id))
        .returning();
      return updated as EndpointRow;
    });
    return { row, secret };
  }

  async delete(userId: string, id: string): Promise<void> {
    const [row] = await this.#db
      .delete(webhookEndpoints)
      .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.userId, userId)))
      .returning({ id: webhookEndpoints.id });
    if (!row) throw notFound('webhook');
    this.#onChange?.();
  }

  /** The endpoint's deliveries, newest first (C37). */
  async deliveries(userId: string, id: string, limit: number): Promise<DeliveryView[]> {
    await this.get(userId, id);
    const rows = await this.#db
      .select({ d: webhookDeliveries, type: webhookEvents.type })
      .from(webhookDeliveries)
      .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
      .where(eq(webhookDeliveries.endpointId, id))
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id))
      .limit(limit);
    const iso = (d: Date | null) => d?.toISOString() ?? null;
    return rows.map(({ d, type }) => ({
      id: d.id,
      eventId: d.eventId,
      type,
      status: d.status,
      attempts: d.attempts,
      lastStatusCode: d.lastStatusCode,
      lastDurationMs: d.lastDurationMs,
      lastError: d.lastError,
      lastAttemptAt: iso(d.lastAttemptAt),
      nextAttemptAt: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
      deliveredAt: iso(d.deliveredAt),
      createdAt: d.createdAt.toISOString(),
    }));
  }

  /** C38: known networks, an exact decimal, valid addresses, and what each event type needs. */
  #checkShape(events: readonly WebhookEventType[], given: EndpointInput['filters'], where: string): WebhookFilters {
    const problems: Problem[] = [];
    const filters: WebhookFilters = {};
    if (given?.networks !== undefined) {
      const unknown = given.networks.filter((n) => !this.#networks.has(n));
      for (const n of unknown) problems.push({ field: `${where}.filters.networks`, message: `unknown network "${n}"` });
      filters.networks = [...new Set(given.networks)];
    }
    if (given?.minValue !== undefined) filters.minValue = normaliseDecimal(given.minValue);
    if (given?.addresses !== undefined) {
      const out = new Set<string>();
      given.addresses.forEach((text, i) => {
        const a = parseAddress(text);
        if (a.startsWith('0x')) out.add(a);
        else problems.push({ field: `${where}.filters.addresses.${i}`, message: a });
      });
      filters.addresses = [...out];
    }
    if (events.includes('address.activity')) {
      if (!filters.addresses?.length) problems.push({ field: `${where}.filters.addresses`, message: 'address.activity needs at least one address to watch' });
      if (!filters.networks?.length) problems.push({ field: `${where}.filters.networks`, message: 'address.activity needs the networks to watch' });
    }
    if (problems.length) throw badRequest(`Invalid webhook: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, problems);
    return filters;
  }

  /**
   * http(s) only, no credentials, a port from 1, no spaces or control characters (the URL parser
   * would drop them, so the stored text would not be the address called), and (unless private
   * targets are allowed) a public target (C39).
   */
  async #checkUrl(text: string, field: string): Promise<void> {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c <= 0x20 || c === 0x7f) {
        throw badRequest('url holds a space or a control character', [{ field, message: 'must not hold spaces or control characters (percent-encode them)' }]);
      }
    }
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw badRequest('url is not a valid URL', [{ field, message: 'must be an absolute http(s) URL' }]);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badRequest('url must be http or https', [{ field, message: 'must be http or https' }]);
    // Port 0 would be dialled as the scheme's default port: not the address given.
    if (url.port === '0') throw badRequest('url has port 0', [{ field, message: 'must have a port from 1 to 65535' }]);
    if (url.username || url.password) {
      throw badRequest('url must not hold credentials', [{ field, message: 'must not hold a user name or password (the signature authenticates the sender)' }]);
    }
    if (this.#settings.allowPrivateTargets) return;
    try {
      await checkTargetHost(url.hostname);
    } catch (err) {
      if (err instanceof ForbiddenTargetError) {
        // A refusal names the setting that would allow it (for a private or loopback target).
        const hint = /does not resolve/.test(err.message) ? '' : ' (the setting webhooks.allowPrivateTargets, on under --devnet, allows such targets)';
        throw new HttpError(ForbiddenTargetError.code, `url is not allowed: ${err.message}${hint}`, { details: [{ field, message: `${err.message}${hint}` }] });
      }
      throw err;
    }
  }
}

/** 403 PLAN_FEATURE naming the plans that have webhooks (C37). */
export function planFeature(maxEndpoints: WebhooksConfig['maxEndpoints']): HttpError {
  return new HttpError('PLAN_FEATURE', `Webhooks are available on the ${webhookPlans(maxEndpoints).join(' and ')} plans`, {
    details: { plans: webhookPlans(maxEndpoints) },
  });
}

/** Pending deliveries of an endpoint that stopped: failed, with the reason (none will be tried). */
export async function failPending(db: Db, endpointId: string, reason: string): Promise<void> {
  await db
    .update(webhookDeliveries)
    .set({ status: 'failed', lastError: reason, nextAttemptAt: null, claimedUntil: null, claimToken: null })
    .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.status, 'pending')));
}

/** "007.50" -> "7.5": the canonical form of a decimal string. */
function normaliseDecimal(text: string): string {
  const [int = '0', frac = ''] = text.split('.');
  const i = int.replace(/^0+(?=\d)/, '');
  const f = frac.replace(/0+$/, '');
  return f ? `${i}.${f}` : i;
}

/** A watched address: `0x` (or `xdc`) and 40 hex digits; mixed case must be the EIP-55 checksum. Lower case, or why not. */
function parseAddress(text: string): string {
  const hex = /^xdc/i.test(text) ? `0x${text.slice(3)}` : text;
  if (!/^0x[0-9a-fA-F]{40}$/.test(hex)) return 'must be 0x followed by 40 hex digits';
  const digits = hex.slice(2);
  const oneCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  if (!oneCase && getAddress(hex.toLowerCase()) !== hex) return 'has an invalid EIP-55 checksum (mixed case must match it; all lower case is accepted)';
  return hex.toLowerCase();
}
