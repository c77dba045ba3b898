// The embedded store shared by the workers of one gateway (WORKERS; docs/scaling.md "Workers"):
// PGlite is one database in one process, so the primary opens it (as a single process does, in
// its worker thread) and each worker reaches it through this stand-in, over the cluster's IPC
// channel. The seam is the one drizzle's pglite driver calls (`query`, `exec`, `transaction`), as
// for pglite-remote.ts: features keep their queries as they are.
import type { QueryOptions } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import type { PGlite } from '@electric-sql/pglite';
import { DatabaseError, StorageError } from '../errors/storage.ts';
import type { Storage } from './db.ts';
import type { IpcChannel } from './ipc.ts';
import type { RemotePglite, RemoteTransaction } from './pglite-remote.ts';

interface QueryBody {
  sql: string;
  params?: unknown[];
  rowMode?: 'array' | 'object';
  /** Types kept as PostgreSQL's text (drizzle's parsers; functions cannot be sent). */
  keepText?: number[];
  /** The transaction the query belongs to; absent: none. */
  tx?: number;
}

/** PostgreSQL's own errors (a severity and a SQLSTATE) come back as DatabaseError, as from the worker thread. */
function asStorageError(err: unknown): Error {
  const e = err as { message?: string; code?: unknown; severity?: unknown; name?: string };
  if (typeof e.code === 'string' && typeof e.severity === 'string') return Object.assign(new DatabaseError(e.message ?? 'database error'), err);
  if (err instanceof Error && err.name === 'IpcClosedError') return new StorageError(`embedded storage is out of reach: ${err.message}`, { cause: err });
  return err instanceof Error ? err : new StorageError(String(err));
}

/**
 * A worker's stand-in for the primary's PGlite. Queries go to the primary as they come; a
 * transaction is opened there (it holds the one connection, as PGlite's own lock does, and the
 * other workers' queries wait for it) and its queries are sent with its number.
 */
export class SharedPglite {
  readonly #channel: IpcChannel;

  constructor(channel: IpcChannel) {
    this.#channel = channel;
  }

  query(sql: string, params?: unknown[], options?: QueryOptions): Promise<unknown> {
    return this.#query(sql, params, options, undefined);
  }

  exec(sql: string): Promise<unknown> {
    return this.#channel.call('pg.exec', { sql }).catch((err: unknown) => {
      throw asStorageError(err);
    });
  }

  async transaction<T>(fn: (tx: RemoteTransaction) => Promise<T>): Promise<T> {
    const id = await this.#channel.call<number>('pg.begin', null).catch((err: unknown) => {
      throw asStorageError(err);
    });
    let closed = false;
    const check = () => {
      if (closed) throw new StorageError('the transaction is closed');
    };
    const end = async (commit: boolean) => {
      closed = true;
      await this.#channel.call('pg.end', { tx: id, commit }).catch((err: unknown) => {
        throw asStorageError(err);
      });
    };
    const tx: RemoteTransaction = {
      query: async (sql, params, options) => (check(), this.#query(sql, params, options, id)),
      exec: async (sql) => (check(), this.#query(sql, undefined, undefined, id, true)),
      rollback: async () => {
        check();
        await end(false);
      },
      get closed() {
        return closed;
      },
    };
    try {
      const result = await fn(tx);
      if (!closed) await end(true);
      return result;
    } catch (err) {
      if (!closed) await end(false).catch(() => {});
      throw err;
    }
  }

  #query(sql: string, params: unknown[] | undefined, options: QueryOptions | undefined, tx: number | undefined, exec = false): Promise<unknown> {
    const keepText = options?.parsers ? Object.keys(options.parsers).map(Number) : undefined;
    const body: QueryBody = { sql, ...(params?.length ? { params } : {}), ...(options?.rowMode ? { rowMode: options.rowMode } : {}), ...(keepText ? { keepText } : {}), ...(tx === undefined ? {} : { tx }) };
    return this.#channel.call(exec ? 'pg.txExec' : 'pg.query', body).catch((err: unknown) => {
      throw asStorageError(err);
    });
  }
}

/** A worker's storage: the primary's embedded database through `channel` (migrations were applied there). */
export function sharedStorage(channel: IpcChannel): Storage {
  const client = new SharedPglite(channel);
  const db = drizzlePglite({ client: client as unknown as PGlite });
  return {
    db,
    kind: 'pglite',
    ping: async () => {
      await client.query('select 1');
    },
    // The database is the primary's to close.
    close: async () => {},
  };
}

const textParsers = new Map<string, QueryOptions['parsers']>();
const parsersFor = (oids: number[] | undefined): QueryOptions['parsers'] => {
  if (!oids?.length) return undefined;
  const key = oids.join(',');
  let parsers = textParsers.get(key);
  if (!parsers) textParsers.set(key, (parsers = Object.fromEntries(oids.map((oid) => [oid, (value: string) => value]))));
  return parsers;
};

/** Transactions a worker has open on the primary's database. */
export interface OpenTransactions {
  /** Rolls back what the worker left open (it died or stopped mid-transaction). */
  abandon(): void;
}

/**
 * The primary's side: answers one worker's queries on `client`. A transaction holds `client`
 * until the worker ends it, or until the worker goes away (`abandon`: rolled back).
 */
export function serveSharedPglite(channel: IpcChannel, client: RemotePglite | PGlite): OpenTransactions {
  let next = 1;
  const open = new Map<number, { tx: RemoteTransaction; end: (commit: boolean) => void; ended: Promise<void> }>();
  const options = (b: QueryBody): QueryOptions => {
    const parsers = parsersFor(b.keepText);
    return { ...(b.rowMode ? { rowMode: b.rowMode } : {}), ...(parsers ? { parsers } : {}) };
  };
  const inTx = (b: QueryBody) => {
    const t = b.tx === undefined ? undefined : open.get(b.tx);
    if (!t) throw new StorageError('the transaction is closed');
    return t.tx;
  };
  channel.handle('pg.query', (body) => {
    const b = body as QueryBody;
    return b.tx === undefined ? client.query(b.sql, b.params, options(b)) : inTx(b).query(b.sql, b.params, options(b));
  });
  channel.handle('pg.exec', (body) => client.exec((body as QueryBody).sql));
  channel.handle('pg.txExec', (body) => inTx(body as QueryBody).exec((body as QueryBody).sql));
  channel.handle('pg.begin', () => {
    const id = next++;
    return new Promise<number>((begun, failed) => {
      let finish!: (commit: boolean) => void;
      const decided = new Promise<boolean>((resolve) => (finish = resolve));
      const ended: Promise<void> = (client as RemotePglite)
        .transaction(async (tx) => {
          open.set(id, { tx, end: finish, ended });
          begun(id);
          if (!(await decided)) await tx.rollback();
        })
        .then(() => {});
      // A BEGIN that failed fails the worker's `pg.begin`; a COMMIT that failed, its `pg.end`.
      ended.catch((err: unknown) => failed(err instanceof Error ? err : new StorageError(String(err)))).finally(() => open.delete(id));
    });
  });
  channel.handle('pg.end', async (body) => {
    const { tx, commit } = body as { tx: number; commit: boolean };
    const t = open.get(tx);
    if (!t) throw new StorageError('the transaction is closed');
    t.end(commit);
    await t.ended;
  });
  return {
    abandon: () => {
      for (const t of open.values()) t.end(false);
    },
  };
}
