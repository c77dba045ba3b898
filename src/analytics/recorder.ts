// Records each admitted or refused RPC call into the analytics' in-memory rows (C46, C46a)
// and flushes them to storage in batches.
import { type SQL, sql } from 'drizzle-orm';
import { ApiKeyRevokedError, InvalidApiKeyError, KeyAccessDeniedError, MethodNotSupportedError, NetworkNotAllowedError, QuotaExceededError, RateLimitedError, type RpcError } from '../errors/rpc.ts';
import type { Db } from '../storage/db.ts';
import { type Column, unnest } from '../storage/unnest.ts';
import { absorb, mergeBack } from '../storage/write-behind.ts';
import { BUCKETS, bucketOf, encodeLatency, mergeInto, mergeLatencySql } from './histogram.ts';

/** How an admitted call ended (C46): an answer with a result, a node's error, or no usable answer from any node. */
export const OK = 0;
export const NODE_ERROR = 1;
export const UPSTREAM_ERROR = 2;
export type CallOutcome = typeof OK | typeof NODE_ERROR | typeof UPSTREAM_ERROR;

/** The reasons a call is refused, in the order of C46's `refused` object (C46a). */
export const REFUSAL_REASONS = ['rate', 'quota', 'key', 'network', 'method', 'access'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];
const RATE = 0;
const QUOTA = 1;
const KEY = 2;
const NETWORK = 3;
const METHOD = 4;
const ACCESS = 5;

/** The refusal reason of each refusing error class, by its pinned JSON-RPC code (C22). */
const REASON_BY_CODE: ReadonlyMap<number, number> = new Map([
  [RateLimitedError.code, RATE],
  [QuotaExceededError.code, QUOTA],
  [InvalidApiKeyError.code, KEY],
  [ApiKeyRevokedError.code, KEY],
  [NetworkNotAllowedError.code, NETWORK],
  [MethodNotSupportedError.code, METHOD],
]);

/**
 * The refusal reason of an error (C46a), or -1 when it is not a refusal. By the class's pinned
 * code, except the key's own allowlists (origin, IP, JWT, method and contract lists), whose
 * -32003 is `access`, not `network`.
 */
export function refusalOf(err: RpcError): number {
  if (err instanceof KeyAccessDeniedError) return ACCESS;
  return REASON_BY_CODE.get(err.code) ?? -1;
}

const HOUR_MS = 3_600_000;
/** Rows per INSERT statement (one array parameter per column: a bounded statement per round trip). */
const CHUNK = 1000;
// Stored as text in PostgreSQL: no NUL or control characters (as usage does).
const UNSAFE_METHOD_CHARS = /[^\x20-\x7e]/g;

/** One (account, key, network, method, hour) in memory. */
export interface Row extends Counts {
  userId: string;
  keyId: string;
  network: string;
  method: string;
  /** Start of the UTC hour, epoch ms. */
  hour: number;
}

/** What one flush takes: every row recorded since the last one. */
export type AnalyticsBatch = Map<string, Row>;

/**
 * C46: per (account, key, network, method, UTC hour) a request count, compute units, errors,
 * refusals by reason and a latency histogram, aggregated in memory. Recording costs three map
 * lookups and a few additions (the row is made once per hour and combination); the usage flush
 * (UsageService) takes the rows and writes them in its own transaction, so one write per flush
 * and the same loss bound as usage.
 */
export class AnalyticsRecorder {
  #rows: AnalyticsBatch = new Map();
  /** The current hour's rows by key, network and method: no string built per call. */
  #index = new Map<string, Map<string, Map<string, Row>>>();
  #hour = 0;
  #hourEndsAt = 0;
  /** Configured method names; refusals of other names count as `other` (callers can send any name). */
  readonly #methods: ReadonlySet<string>;

  constructor(methods: Iterable<string>) {
    this.#methods = new Set(methods);
  }

  /** One admitted call answered after `ms` milliseconds (from its arrival to its answer). */
  call(userId: string, keyId: string, network: string, method: string, computeUnits: number, outcome: CallOutcome, ms: number): void {
    const row = this.#row(userId, keyId, network, method);
    row.requests += 1;
    row.computeUnits += computeUnits;
    if (outcome === NODE_ERROR) row.errorsNode += 1;
    else if (outcome === UPSTREAM_ERROR) row.errorsUpstream += 1;
    const h = row.latency;
    const b = bucketOf(ms);
    h[b] = (h[b] as number) + 1;
  }

  /** `calls` calls of a known key refused with `err` (C46a: under its reason); errors that are no refusal are ignored. */
  refused(userId: string, keyId: string, network: string, method: string, err: RpcError, calls = 1): void {
    const reason = refusalOf(err);
    if (reason < 0) return;
    const row = this.#row(userId, keyId, network, this.#methods.has(method) ? method : 'other');
    row.refused[reason] = (row.refused[reason] as number) + calls;
  }

  #row(userId: string, keyId: string, network: string, method: string): Row {
    const now = Date.now();
    if (now >= this.#hourEndsAt) {
      this.#hour = now - (now % HOUR_MS);
      this.#hourEndsAt = this.#hour + HOUR_MS;
      this.#index.clear();
    }
    let byNetwork = this.#index.get(keyId);
    if (!byNetwork) this.#index.set(keyId, (byNetwork = new Map<string, Map<string, Row>>()));
    let byMethod = byNetwork.get(network);
    if (!byMethod) byNetwork.set(network, (byMethod = new Map<string, Row>()));
    let row = byMethod.get(method);
    if (!row) {
      const clean = method.replace(UNSAFE_METHOD_CHARS, '?');
      // Method last: the other parts never contain '|', so the id is unambiguous.
      const id = `${userId}|${keyId}|${network}|${this.#hour}|${clean}`;
      row = this.#rows.get(id);
      if (!row) {
        row = {
          userId,
          keyId,
          network,
          method: clean,
          hour: this.#hour,
          requests: 0,
          computeUnits: 0,
          errorsNode: 0,
          errorsUpstream: 0,
          refused: [0, 0, 0, 0, 0, 0],
          latency: new Array<number>(BUCKETS).fill(0),
        };
        this.#rows.set(id, row);
      }
      byMethod.set(method, row);
    }
    return row;
  }

  /** Rows waiting for the next flush. */
  get pendingRows(): number {
    return this.#rows.size;
  }

  /** Takes what was recorded so far (null when nothing); what comes after goes to the next batch. */
  take(): AnalyticsBatch | null {
    if (this.#rows.size === 0) return null;
    const batch = this.#rows;
    this.#rows = new Map();
    this.#index.clear();
    return batch;
  }

  /**
   * Puts a batch that could not be stored back, added to what was recorded meanwhile; past
   * `maxRows` the oldest rows are dropped (C48: memory stays bounded while storage is away).
   * Answers how many rows were dropped. The order and the cap are usage's too
   * (storage/write-behind.ts `mergeBack`).
   */
  mergeBack(batch: AnalyticsBatch, maxRows = Number.POSITIVE_INFINITY): number {
    let dropped = 0;
    this.#rows = mergeBack(this.#rows, batch, this.#index, maxRows, addCounts, () => dropped++);
    return dropped;
  }

  /**
   * Adds the rows a worker handed over (UsageService.absorb), as usage does its own: counts of a
   * row held go into it; a new row goes last while fewer than `maxRows` are held, else it is
   * dropped (C48; storage/write-behind.ts `absorb`). Answers how many rows were dropped.
   */
  absorb(batch: AnalyticsBatch, maxRows = Number.POSITIVE_INFINITY): number {
    let dropped = 0;
    absorb(this.#rows, batch, maxRows, addCounts, () => dropped++);
    return dropped;
  }

  /**
   * Writes a batch inside the caller's transaction (the usage flush): hourly rows, and the same
   * counts added to each day's row, then to the account's roll-ups of that hour and day, to the
   * key's of that hour, and to the account's of that day per key, network and method (C46:
   * the day's rows and the roll-ups are the sums of the hour's rows by construction: same batch,
   * same transaction). Counters are added and histograms merged bucket by bucket in SQL, so
   * instances writing the same row never overwrite one another. Rows are written in (series,
   * period) and (account, period) order so two instances take their locks in the same order.
   */
  static async write(tx: Pick<Db, 'execute'>, batch: AnalyticsBatch): Promise<void> {
    const hourly = [...batch.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
    const days = sumRows(
      hourly.map((r) => ({ ...r, day: new Date(r.hour).toISOString().slice(0, 10) })),
      (r) => `${r.userId}|${r.keyId}|${r.network}|${r.day}|${r.method}`,
    );
    // The series first (for scale, docs/scaling.md: a row carries its series' number, not four texts), only those not
    // yet numbered: an identity number is spent by each row tried, even one ON CONFLICT drops.
    const series = [...new Map(days.map((r) => [`${r.userId}|${r.keyId}|${r.network}|${r.method}`, r])).entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, r]) => r);
    for (let i = 0; i < series.length; i += CHUNK) {
      // Rows of an account deleted meanwhile are dropped rather than failing the batch forever (as usage does).
      await tx.execute(sql`
        insert into analytics_series (user_id, key_id, network, method)
        select v.user_id, v.key_id, v.network, v.method from ${unnest(series.slice(i, i + CHUNK), SERIES)}
        where exists (select 1 from users u where u.id = v.user_id)
          and not exists (select 1 from analytics_series s where (s.user_id, s.key_id, s.network, s.method) = (v.user_id, v.key_id, v.network, v.method))
        on conflict do nothing`);
    }
    for (let i = 0; i < hourly.length; i += CHUNK) {
      await tx.execute(upsert('analytics_hours', 'hour', unnest(hourly.slice(i, i + CHUNK), [...SERIES, HOUR, ...COUNTS])));
    }
    for (let i = 0; i < days.length; i += CHUNK) {
      await tx.execute(upsert('analytics_days', 'day', unnest(days.slice(i, i + CHUNK), [...SERIES, DAY, ...COUNTS])));
    }
    // For scale (docs/scaling.md): the account roll-ups, one row per (account, hour) and (account, day), summed from the
    // same rows in the same transaction: always the sums of the account's series rows (C46).
    const accountHours = sumRows(hourly, (r) => `${r.userId}|${r.hour}`);
    for (let i = 0; i < accountHours.length; i += CHUNK) {
      await tx.execute(upsertAccount('analytics_account_hours', ['hour'], unnest(accountHours.slice(i, i + CHUNK), [USER, HOUR, ...COUNTS])));
    }
    const accountDays = sumRows(days, (r) => `${r.userId}|${r.day}`);
    for (let i = 0; i < accountDays.length; i += CHUNK) {
      await tx.execute(upsertAccount('analytics_account_days', ['day'], unnest(accountDays.slice(i, i + CHUNK), [USER, DAY, ...COUNTS])));
    }
    // One key's hours (a query by key reads one row per hour, not one per series and hour), likewise.
    const keyHours = sumRows(hourly, (r) => `${r.userId}|${r.keyId}|${r.hour}`);
    for (let i = 0; i < keyHours.length; i += CHUNK) {
      await tx.execute(upsertAccount('analytics_key_hours', ['key_id', 'hour'], unnest(keyHours.slice(i, i + CHUNK), [USER, KEY_ID, HOUR, ...COUNTS])));
    }
    // The account's daily rows per key, network and method (the breakdowns' roll-up): a key's
    // without a histogram (byKey shows no latency).
    const parts = sumRows(
      days.flatMap((r) => [
        { ...r, kind: 'k', name: r.keyId, latency: [] },
        { ...r, kind: 'n', name: r.network },
        { ...r, kind: 'm', name: r.method },
      ]),
      (r) => `${r.userId}|${r.day}|${r.kind}|${r.name}`,
    );
    for (let i = 0; i < parts.length; i += CHUNK) {
      await tx.execute(upsertAccount('analytics_account_day_parts', ['day', 'kind', 'name'], unnest(parts.slice(i, i + CHUNK), [USER, DAY, KIND, NAME, ...COUNTS])));
    }
  }
}

/** What an analytics row counts: its counters, refusals by reason and latency histogram (C46). */
export interface Counts {
  requests: number;
  computeUnits: number;
  errorsNode: number;
  errorsUpstream: number;
  /** By REFUSAL_REASONS. */
  refused: number[];
  /** Counts per histogram bucket (histogram.ts). */
  latency: number[];
}

/** Adds `from`'s counts into `into`: counters summed, refusals and histogram bucket by bucket. */
export function addCounts(into: Counts, from: Counts): void {
  into.requests += from.requests;
  into.computeUnits += from.computeUnits;
  into.errorsNode += from.errorsNode;
  into.errorsUpstream += from.errorsUpstream;
  mergeInto(into.refused, from.refused);
  mergeInto(into.latency, from.latency);
}

/** Rows summed by `idOf`: counters added, histograms merged (copies: `rows` stay as they are); in id order (locks). */
function sumRows<R extends Row>(rows: R[], idOf: (r: R) => string): R[] {
  const sums = new Map<string, R>();
  for (const r of rows) {
    const id = idOf(r);
    const s = sums.get(id);
    if (!s) {
      sums.set(id, { ...r, refused: [...r.refused], latency: [...r.latency] });
      continue;
    }
    addCounts(s, r);
  }
  return [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

/** The counter columns of an analytics row, in the order of `COUNTS`. */
export const COUNTERS = ['requests', 'compute_units', 'errors_node', 'errors_upstream', 'refused_rate', 'refused_quota', 'refused_key', 'refused_network', 'refused_method', 'refused_access'] as const;

// The columns of the rows a flush writes, each an array parameter (storage/unnest.ts).
type DayRow = Row & { day: string };
type PartRow = DayRow & { kind: string; name: string };
const USER: Column<Row> = ['user_id', 'text', (r) => r.userId];
const KEY_ID: Column<Row> = ['key_id', 'text', (r) => r.keyId];
const SERIES: ReadonlyArray<Column<Row>> = [USER, KEY_ID, ['network', 'text', (r) => r.network], ['method', 'text', (r) => r.method]];
const HOUR: Column<Row> = ['hour', 'int', (r) => r.hour / HOUR_MS];
const DAY: Column<DayRow> = ['day', 'date', (r) => r.day];
const KIND: Column<PartRow> = ['kind', 'text', (r) => r.kind];
const NAME: Column<PartRow> = ['name', 'text', (r) => r.name];
/** The counters (as bigint, zero included: the upserts store NULL for zero) and the histogram, hex-encoded (`decode` in the upserts). */
const COUNTS: ReadonlyArray<Column<Row>> = [
  ['requests', 'bigint', (r) => r.requests],
  ['compute_units', 'bigint', (r) => r.computeUnits],
  ['errors_node', 'bigint', (r) => r.errorsNode],
  ['errors_upstream', 'bigint', (r) => r.errorsUpstream],
  ...REFUSAL_REASONS.map((reason, i): Column<Row> => [`refused_${reason}`, 'bigint', (r) => r.refused[i] ?? 0]),
  ['latency', 'text', (r) => encodeLatency(r.latency)],
];

/**
 * The ON CONFLICT clause of every analytics upsert: on `target` the stored row gets the new counters
 * added (NULL stands for zero) and the histograms merged bucket by bucket (histogram.ts), so
 * instances writing the same row never overwrite one another (C46).
 */
function addOnConflict(table: string, target: SQL) {
  const adds = sql.raw(COUNTERS.map((c) => `${c} = coalesce(${table}.${c} + excluded.${c}, ${table}.${c}, excluded.${c})`).join(', '));
  return sql`on conflict (${target}) do update set
      ${adds},
      latency = ${mergeLatencySql(sql.raw(`${table}.latency`), sql`excluded.latency`)}`;
}

/**
 * INSERT ... ON CONFLICT on (series, period) that adds counters and merges histograms
 * (`addOnConflict`). The series were numbered just before; a row whose account is gone finds none
 * and is dropped.
 */
function upsert(table: 'analytics_hours' | 'analytics_days', period: 'hour' | 'day', rows: SQL) {
  const t = sql.raw(table);
  const p = sql.raw(period);
  const cols = sql.raw(COUNTERS.join(', '));
  return sql`
    insert into ${t} (series, ${p}, ${cols}, latency)
    select s.id, v.${p}, ${sql.raw(COUNTERS.map((c) => `nullif(v.${c}, 0)`).join(', '))}, decode(v.latency, 'hex')
    from ${rows}
    join analytics_series s on (s.user_id, s.key_id, s.network, s.method) = (v.user_id, v.key_id, v.network, v.method)
    order by s.id, v.${p}
    ${addOnConflict(table, sql`series, ${p}`)}`;
}

/**
 * The same for an account roll-up, on (user_id, ...by): (user_id, hour), (user_id, day),
 * (user_id, day, kind, name) or (user_id, key_id, hour); a row whose account is gone is dropped, as its series rows are (the
 * series insert skips it).
 */
function upsertAccount(
  table: 'analytics_account_hours' | 'analytics_account_days' | 'analytics_account_day_parts' | 'analytics_key_hours',
  by: ReadonlyArray<'hour' | 'day' | 'kind' | 'name' | 'key_id'>,
  rows: SQL,
) {
  const t = sql.raw(table);
  const key = sql.raw(by.join(', '));
  const vKey = sql.raw(by.map((c) => `v.${c}`).join(', '));
  const cols = sql.raw(COUNTERS.join(', '));
  return sql`
    insert into ${t} (user_id, ${key}, ${cols}, latency)
    select v.user_id, ${vKey}, ${sql.raw(COUNTERS.map((c) => `nullif(v.${c}, 0)`).join(', '))}, decode(v.latency, 'hex')
    from ${rows}
    where exists (select 1 from users u where u.id = v.user_id)
    order by v.user_id, ${vKey}
    ${addOnConflict(table, sql`user_id, ${key}`)}`;
}
