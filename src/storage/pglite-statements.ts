// Statements that embedded storage runs again and again kept prepared by name, so that PGlite
// parses and plans them once (the worker side of pglite-remote.ts).
import { type PGlite, parse, protocol, type QueryOptions, type Results } from '@electric-sql/pglite';

type BackendMessage = Parameters<typeof parse.parseResults>[0][number];

/** Named statements kept at most; past it the least recently used is closed. */
const MAX_NAMED = 256;
/** Texts remembered as seen once, at most (the set starts again when full). */
const MAX_SEEN = 1024;

/**
 * PGlite's `query` as its own, but a text with parameters run a second time is prepared under a
 * name and from then on only bound and executed (docs/choices.md). PGlite's `query` parses,
 * analyses and plans every statement it runs, on one WebAssembly thread: a usage flush's analytics
 * upserts, whose histogram merge (histogram.ts) is a large expression, spent most of their time
 * there. A prepared statement is planned as PostgreSQL plans any (a custom plan for its first five
 * runs, then its generic plan when that costs no more), as on PostgreSQL itself, where the driver
 * prepares the reads of `prepareSql` (prepared.ts) by name.
 *
 * Texts without parameters go to `query` as before (transaction control, DDL, one-off reads). A
 * statement's name lives in the session, not its transaction: a rollback keeps it.
 *
 * Callers run one operation at a time (the worker runs its messages in order): this class does not
 * order them itself.
 */
export class PreparedStatements {
  readonly #client: PGlite;
  readonly #maxNamed: number;
  /** By text: its name and its parameters' types; Map order is use order (the first is the least recent). */
  readonly #named = new Map<string, { name: string; types: number[] }>();
  readonly #seen = new Set<string>();
  #next = 0;
  /** Statements prepared so far, and runs that used one (tests). */
  prepared = 0;
  reused = 0;

  constructor(client: PGlite, opts: { maxNamed?: number } = {}) {
    this.#client = client;
    this.#maxNamed = opts.maxNamed ?? MAX_NAMED;
  }

  async query(sql: string, params: unknown[] | undefined, options?: QueryOptions): Promise<Results> {
    if (!params?.length) return this.#client.query(sql, params, options);
    const kept = this.#named.get(sql);
    if (kept) {
      this.#named.delete(sql);
      this.#named.set(sql, kept);
      this.reused++;
      return this.#run(sql, kept, params, options, false);
    }
    if (!this.#seen.has(sql)) {
      if (this.#seen.size >= MAX_SEEN) this.#seen.clear();
      this.#seen.add(sql);
      return this.#client.query(sql, params, options);
    }
    this.#seen.delete(sql);
    return this.#run(sql, { name: `junction_s${this.#next++}`, types: [] }, params, options, true);
  }

  /** Number of statements kept prepared (tests). */
  get size(): number {
    return this.#named.size;
  }

  /**
   * The statement bound and executed by name (parsed first when `fresh`), as PGlite's `query` runs
   * an unnamed one: under its query lock, every message's answer collected, Sync always sent last
   * (an error ends the extended-protocol exchange there), results parsed by its own parsers.
   */
  #run(sql: string, statement: { name: string; types: number[] }, params: unknown[], options: QueryOptions | undefined, fresh: boolean): Promise<Results> {
    const client = this.#client;
    const { serialize } = protocol;
    const send = (message: Uint8Array) => client.execProtocolStream(message, { syncToFs: false });
    return client.runExclusive(async () => {
      const messages: BackendMessage[] = [];
      let parsed = false;
      let evicted: string | undefined = undefined;
      try {
        if (fresh) {
          await send(serialize.parse({ name: statement.name, text: sql, types: options?.paramTypes ?? [] }));
          statement.types = parse.parseDescribeStatementResults(await send(serialize.describe({ type: 'S', name: statement.name })));
          parsed = true;
        }
        const values = params.map((v, i) => {
          if (v === null || v === undefined) return null;
          const oid = statement.types[i] as number;
          const serializer = options?.serializers?.[oid] ?? client.serializers[oid];
          // As PGlite: a type without a serializer is sent as the value's own text.
          return serializer ? serializer(v) : (v as { toString(): string }).toString();
        });
        messages.push(...(await send(serialize.bind({ statement: statement.name, values }))));
        messages.push(...(await send(serialize.describe({ type: 'P' }))));
        messages.push(...(await send(serialize.execute({}))));
      } catch (err) {
        // As PGlite's own: PostgreSQL's error with the statement it came from.
        if (err && typeof err === 'object') Object.assign(err, { query: sql, params, queryOptions: options });
        throw err;
      } finally {
        messages.push(...(await send(serialize.sync())));
        if (parsed) evicted = this.#keep(sql, statement);
        if (evicted !== undefined) await send(serialize.close({ type: 'S', name: evicted })).then(() => send(serialize.sync()), () => {});
      }
      await client.syncToFs();
      return parse.parseResults(messages, client.parsers, options)[0] as Results;
    });
  }

  /** A statement newly prepared is kept; past the most kept (MAX_NAMED) the least recently used leaves: its name is answered, to be closed. */
  #keep(sql: string, statement: { name: string; types: number[] }): string | undefined {
    this.#named.set(sql, statement);
    this.prepared++;
    if (this.#named.size <= this.#maxNamed) return undefined;
    const [oldest, { name }] = this.#named.entries().next().value as [string, { name: string }];
    this.#named.delete(oldest);
    return name;
  }
}
