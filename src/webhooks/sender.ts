// C39: the delivery of stored events. Due outbox rows are claimed under FOR UPDATE SKIP LOCKED
// with a lease (one instance per attempt; a crashed claimer's rows come back when the lease runs
// out), sent as signed Standard Webhooks POSTs with a bounded number in flight and a per-attempt
// timeout, and their outcome recorded: delivered, retried on the configured schedule, or failed.
import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import type { WebhooksConfig } from '../config/schema.ts';
import { ForbiddenTargetError } from '../errors/domain.ts';
import { SerialJob } from '../jobs/serial.ts';
import type { Db } from '../storage/db.ts';
import { type EndpointStore, failPending } from './endpoints.ts';
import { guardedLookup, isForbiddenAddress } from './ssrf.ts';
import { StorageOutageLog } from '../jobs/storage-outage.ts';

/** One claimed delivery with what its attempt needs. */
interface Claimed {
  id: string;
  /** Attempts counted so far, this one included (counted as it was claimed). */
  attempts: number;
  endpointId: string;
  eventId: string;
  body: string;
  url: string;
  secretCiphertext: string;
  previousSecretCiphertext: string | null;
  /** The endpoint has a failure streak (a success ends it). */
  failing: boolean;
  /** This claim's token: the outcome is recorded only while the row still carries it. */
  token: string;
}

interface Outcome {
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  /** Seconds from a Retry-After header on a 429 or 503. */
  retryAfter?: number;
}

/** What the sender has done, for tests and the benchmark. */
export interface SenderStats {
  attempts: number;
  delivered: number;
  failed: number;
  inFlight: number;
}

const MAX_RETRY_AFTER_SECONDS = 86_400;
/** At most this share of the slots goes to one endpoint, so a slow receiver leaves room for the others. */
const PER_ENDPOINT_SHARE = 0.5;
const RETENTION_SWEEP_MS = 3_600_000;
/** How long a stop waits for attempts in flight before aborting them. */
const SHUTDOWN_GRACE_MS = 2_000;
const QUOTA_NOTICE_RETENTION_DAYS = 62;

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/** Seconds from a Retry-After value (delta-seconds or an HTTP date), undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, Math.ceil((at - now) / 1000)), MAX_RETRY_AFTER_SECONDS);
}

/** Why an attempt got no answer, in a few words: never the URL (it may carry a token) or a secret. */
function describe(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: unknown };
  if (err instanceof ForbiddenTargetError) return `refused target: ${err.message}`;
  if (e.cause instanceof ForbiddenTargetError) return `refused target: ${e.cause.message}`;
  if (e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT' || e.code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `no answer within ${timeoutMs} ms`;
  }
  const code = e.code ?? (e.cause as { code?: string } | undefined)?.code;
  return code ? `connection failed (${code})` : `request failed (${e.name ?? 'Error'})`;
}

export class Sender {
  readonly #db: Db;
  readonly #cfg: WebhooksConfig;
  readonly #log: Logger;
  readonly #store: EndpointStore;
  readonly #agent: Agent;
  readonly #perEndpoint: number;
  readonly #claimBatch: number;
  readonly #leaseSeconds: number;
  readonly #inFlightByEndpoint = new Map<string, number>();
  readonly #running = new Set<Promise<void>>();
  #inFlight = 0;
  /** Claims due rows: now, or right after the claim in progress (C39). */
  readonly #pump = new SerialJob(() => this.#pumpOnce(), { onError: (err) => this.#warn(err, 'webhook outbox claim failed') });
  /** C48: the outbox is looked at every poll interval; an outage is said once, not at each look. */
  readonly #outage: StorageOutageLog;
  #wakeQueued = false;
  #timer: NodeJS.Timeout | undefined;
  #sweepTimer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #shutdown = new AbortController();
  readonly stats: SenderStats = { attempts: 0, delivered: 0, failed: 0, inFlight: 0 };

  constructor(deps: { db: Db; settings: WebhooksConfig; logger: Logger; store: EndpointStore }) {
    this.#db = deps.db;
    this.#cfg = deps.settings;
    this.#log = deps.logger;
    this.#outage = new StorageOutageLog(deps.logger, 'webhook outbox');
    this.#store = deps.store;
    this.#perEndpoint = Math.max(1, Math.floor(this.#cfg.concurrency * PER_ENDPOINT_SHARE));
    this.#claimBatch = Math.max(1, Math.floor(this.#cfg.concurrency / 4));
    // Long enough for the attempt's timeout and recording its outcome; then the row may be claimed
    // again (a SIGKILLed claimer's rows come back after it, C39).
    this.#leaseSeconds = Math.max(this.#cfg.leaseSeconds, this.#cfg.timeoutMs / 1000 + 1);
    this.#agent = new Agent({
      connect: { timeout: this.#cfg.timeoutMs, ...(this.#cfg.allowPrivateTargets ? {} : { lookup: guardedLookup }) },
      headersTimeout: this.#cfg.timeoutMs,
      bodyTimeout: this.#cfg.timeoutMs,
      connections: this.#cfg.concurrency,
    });
  }

  start(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setInterval(() => this.wake(), this.#cfg.pollIntervalMs);
    this.#timer.unref();
    this.#sweepTimer = setInterval(() => void this.sweep().catch((err: unknown) => this.#warn(err, 'webhook retention sweep failed')), RETENTION_SWEEP_MS);
    this.#sweepTimer.unref();
    this.wake();
  }

  /** Looks at the outbox soon (coalesced: many wakes make one look); nothing before `start`. */
  wake(): void {
    if (!this.#timer || this.#closed || this.#wakeQueued) return;
    this.#wakeQueued = true;
    setImmediate(() => {
      this.#wakeQueued = false;
      void this.#pump.request();
    });
  }

  /**
   * Stops claiming and lets the attempts in flight finish for up to SHUTDOWN_GRACE_MS; the rest
   * are aborted and their rows released unrecorded, for another instance or the next start.
   */
  async close(): Promise<void> {
    this.#closed = true;
    void this.#pump.stop();
    clearInterval(this.#timer);
    clearInterval(this.#sweepTimer);
    const settled = Promise.allSettled([...this.#running]);
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((resolve) => (grace = setTimeout(resolve, SHUTDOWN_GRACE_MS)))]);
    clearTimeout(grace);
    this.#shutdown.abort();
    await settled;
    await this.#agent.close();
  }

  /** Deletes deliveries and events older than `deliveryRetentionDays` that are settled (C39). */
  async sweep(): Promise<void> {
    const days = this.#cfg.deliveryRetentionDays;
    await this.#db.execute(sql`
      delete from webhook_deliveries
      where status <> 'pending' and created_at < now() - ${days} * interval '1 day'`);
    await this.#db.execute(sql`
      delete from webhook_events ev
      where ev.created_at < now() - ${days} * interval '1 day'
        and not exists (select 1 from webhook_deliveries d where d.event_id = ev.id)`);
    await this.#db.execute(sql`
      delete from webhook_quota_notices where created_at < now() - ${QUOTA_NOTICE_RETENTION_DAYS} * interval '1 day'`);
  }

  async #pumpOnce(): Promise<void> {
    const free = this.#cfg.concurrency - this.#inFlight;
    if (free <= 0 || this.#closed) return;
    // While attempts are in flight, claim in batches: one query for several freed slots.
    if (this.#inFlight > 0 && free < this.#claimBatch) return;
    const claimed = await this.#claim(free);
    this.#outage.ok();
    for (const c of claimed) this.#launch(c);
    // A full batch: there may be more due rows.
    if (claimed.length > 0 && claimed.length === free) void this.#pump.request();
  }

  /** Claims up to `n` due deliveries of enabled endpoints, at most `#perEndpoint` in flight per endpoint. */
  async #claim(n: number): Promise<Claimed[]> {
    const busy = [...this.#inFlightByEndpoint].filter(([, k]) => k >= this.#perEndpoint).map(([id]) => id);
    const token = randomUUID();
    const result = await this.#db.execute(sql`
      with picked as (
        select d.id from webhook_deliveries d
        join webhook_endpoints e on e.id = d.endpoint_id
        where d.status = 'pending' and d.next_attempt_at <= now()
          and (d.claimed_until is null or d.claimed_until < now())
          and e.status = 'enabled'
          and not (d.endpoint_id = any(string_to_array(${busy.join(',')}::text, ',')))
          -- An endpoint that is failing gets its oldest pending event only: newer ones wait behind it,
          -- so a receiver back from an outage gets its queue in creation order, none lost (C39).
          and (e.failing_since is null or not exists (
            select 1 from webhook_deliveries o
            where o.endpoint_id = d.endpoint_id and o.status = 'pending'
              and (o.created_at, o.id) < (d.created_at, d.id)))
        order by d.created_at, d.id
        limit ${n}
        for update of d skip locked
      )
      -- The attempt is counted as it is claimed, before anything is sent: a process killed in the
      -- middle of sending leaves the count true, and the next claim counts one more (C39).
      update webhook_deliveries d
      set claimed_until = now() + ${this.#leaseSeconds} * interval '1 second', claim_token = ${token}, attempts = d.attempts + 1
      from picked, webhook_endpoints e, webhook_events ev
      where d.id = picked.id and e.id = d.endpoint_id and ev.id = d.event_id
      returning d.id, d.attempts, d.endpoint_id, d.event_id, ev.body, e.url, e.secret_ciphertext,
        case when e.previous_secret_expires_at > now() then e.previous_secret_ciphertext end as previous_secret_ciphertext,
        e.failing_since is not null as failing`);
    const rows = rowsOf<{
      id: string;
      attempts: number;
      endpoint_id: string;
      event_id: string;
      body: string;
      url: string;
      secret_ciphertext: string;
      previous_secret_ciphertext: string | null;
      failing: boolean;
    }>(result);
    // Within one batch an endpoint may have more rows than its share: those go back unclaimed.
    const taken: Claimed[] = [];
    const extra: string[] = [];
    const counts = new Map(this.#inFlightByEndpoint);
    for (const r of rows) {
      const k = counts.get(r.endpoint_id) ?? 0;
      if (k >= this.#perEndpoint) {
        extra.push(r.id);
        continue;
      }
      counts.set(r.endpoint_id, k + 1);
      taken.push({
        id: r.id,
        attempts: r.attempts,
        endpointId: r.endpoint_id,
        eventId: r.event_id,
        body: r.body,
        url: r.url,
        secretCiphertext: r.secret_ciphertext,
        previousSecretCiphertext: r.previous_secret_ciphertext,
        failing: r.failing,
        token,
      });
    }
    if (extra.length) {
      await this.#db.execute(sql`
        update webhook_deliveries set claimed_until = null, claim_token = null, attempts = attempts - 1
        where claim_token = ${token} and id = any(string_to_array(${extra.join(',')}::text, ','))`);
    }
    return taken;
  }

  #launch(c: Claimed): void {
    this.#inFlight++;
    this.stats.inFlight = this.#inFlight;
    this.#inFlightByEndpoint.set(c.endpointId, (this.#inFlightByEndpoint.get(c.endpointId) ?? 0) + 1);
    const run = this.#attempt(c)
      .catch((err: unknown) => this.#warn(err, 'webhook attempt could not be recorded'))
      .finally(() => {
        this.#inFlight--;
        this.stats.inFlight = this.#inFlight;
        const k = (this.#inFlightByEndpoint.get(c.endpointId) ?? 1) - 1;
        if (k <= 0) this.#inFlightByEndpoint.delete(c.endpointId);
        else this.#inFlightByEndpoint.set(c.endpointId, k);
        this.#running.delete(run);
        this.wake();
      });
    this.#running.add(run);
  }

  async #attempt(c: Claimed): Promise<void> {
    const started = performance.now();
    const outcome: Outcome = { statusCode: null, error: null, durationMs: 0 };
    try {
      if (!this.#cfg.allowPrivateTargets) {
        // Address literals never reach the agent's lookup: checked here. Names are checked there.
        const host = new URL(c.url).hostname.replace(/^\[|\]$/g, '');
        if (isIP(host) && isForbiddenAddress(host)) throw new ForbiddenTargetError(`${host} is a loopback, private, link-local or reserved address`);
      }
      // The previous secret came only while it still signs (the claim compared its expiry).
      const secrets = [c.secretCiphertext, c.previousSecretCiphertext].flatMap((s) => (s ? [this.#store.decryptSecret(c.endpointId, s)] : []));
      const now = new Date();
      // C39: one `v1,<sig>` entry per secret, space-separated (the old one during the overlap).
      const signature = secrets.map((s) => new Webhook(s).sign(c.eventId, now, c.body)).join(' ');
      const res = await request(c.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Junction-Webhooks/1',
          'webhook-id': c.eventId,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: c.body,
        signal: AbortSignal.any([AbortSignal.timeout(this.#cfg.timeoutMs), this.#shutdown.signal]),
      });
      outcome.statusCode = res.statusCode;
      if (res.statusCode === 429 || res.statusCode === 503) {
        const after = parseRetryAfter(res.headers['retry-after']);
        if (after !== undefined) outcome.retryAfter = after;
      }
      // The answer's body is not used: read and dropped (bounded), so the connection is reused.
      await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
    } catch (err) {
      if (this.#shutdown.signal.aborted) {
        // Stopped mid-attempt (a graceful stop aborted it): not an attempt of the endpoint's, so the
        // count taken at the claim is given back; the row is due again at once.
        await this.#db.execute(
          sql`update webhook_deliveries set claimed_until = null, claim_token = null, attempts = attempts - 1 where id = ${c.id} and claim_token = ${c.token}`,
        );
        return;
      }
      outcome.error = describe(err, this.#cfg.timeoutMs);
    }
    outcome.durationMs = Math.round(performance.now() - started);
    this.stats.attempts++;
    await this.#record(c, outcome);
  }

  /** Stores an attempt's outcome and what follows from it, only if this instance still holds the claim. */
  async #record(c: Claimed, o: Outcome): Promise<void> {
    const ok = o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;
    const n = c.attempts; // counted at the claim
    const delays = this.#cfg.retryDelaysSeconds;
    const gone = o.statusCode === 410;
    const final = gone || n > delays.length;
    let delay = final ? 0 : (delays[n - 1] ?? 0);
    if (!final && o.retryAfter !== undefined) delay = Math.max(delay, o.retryAfter);
    if (ok) {
      await this.#delivered(c, n, o);
      this.stats.delivered++;
      return;
    }
    const status = final ? 'failed' : 'pending';
    const error = o.error ?? `HTTP ${o.statusCode}`;
    await this.#db.transaction(async (tx) => {
      const updated = rowsOf<{ next_attempt_at: Date | null }>(
        await tx.execute(sql`
          update webhook_deliveries set
            status = ${status},
            attempts = ${n},
            last_status_code = ${o.statusCode},
            last_duration_ms = ${o.durationMs},
            last_error = ${error},
            last_attempt_at = now(),
            next_attempt_at = ${final ? null : sql`now() + ${delay} * interval '1 second'`},
            claimed_until = null,
            claim_token = null
          where id = ${c.id} and claim_token = ${c.token}
          returning next_attempt_at`),
      );
      // The lease ran out and another instance took the row, or the endpoint is gone: its outcome stands.
      const row = updated[0];
      if (!row) return;
      await tx.execute(sql`
        insert into webhook_attempts (delivery_id, attempt, status_code, duration_ms, error, next_attempt_at)
        values (${c.id}, ${n}, ${o.statusCode}, ${o.durationMs}, ${error}, ${row.next_attempt_at})
        on conflict do nothing`);
      if (gone) {
        await this.#disable(tx, c.endpointId, 'gone');
        return;
      }
      // C39: failing for `disableAfterFailingDays` days in a row (no success since) disables it.
      const failing = rowsOf<{ long: boolean }>(
        await tx.execute(sql`
          update webhook_endpoints set failing_since = coalesce(failing_since, now())
          where id = ${c.endpointId}
          returning failing_since <= now() - ${this.#cfg.disableAfterFailingDays} * interval '1 day' as long`),
      );
      if (failing[0]?.long) await this.#disable(tx, c.endpointId, 'failing');
    });
    if (final) this.stats.failed++;
  }

  /** The common case in one statement: the delivery settled and its attempt recorded (C39). */
  async #delivered(c: Claimed, n: number, o: Outcome): Promise<void> {
    await this.#db.execute(sql`
      with d as (
        update webhook_deliveries set
          status = 'delivered', attempts = ${n}, last_status_code = ${o.statusCode}, last_duration_ms = ${o.durationMs},
          last_error = null, last_attempt_at = now(), delivered_at = now(), next_attempt_at = null,
          claimed_until = null, claim_token = null
        where id = ${c.id} and claim_token = ${c.token}
        returning id)
      insert into webhook_attempts (delivery_id, attempt, status_code, duration_ms)
      select id, ${n}, ${o.statusCode}, ${o.durationMs} from d
      on conflict do nothing`);
    // A success ends the endpoint's failure streak (C39: failing days in a row).
    if (c.failing) await this.#db.execute(sql`update webhook_endpoints set failing_since = null where id = ${c.endpointId}`);
  }

  async #disable(tx: Db, endpointId: string, reason: 'gone' | 'failing'): Promise<void> {
    await tx.execute(sql`
      update webhook_endpoints set status = 'disabled', disabled_reason = ${reason}, updated_at = now()
      where id = ${endpointId} and status = 'enabled'`);
    await failPending(tx, endpointId, reason === 'gone' ? 'endpoint disabled: the receiver answered 410 Gone' : 'endpoint disabled: failing for too long');
    this.#log.info({ endpointId, reason }, 'webhook endpoint disabled');
  }

  #warn(err: unknown, msg: string): void {
    if (this.#outage.failed(err)) return;
    const e = err as { name?: string; code?: string; cause?: { code?: string } };
    this.#log.warn({ error: e.name, code: e.cause?.code ?? e.code }, msg);
  }
}
