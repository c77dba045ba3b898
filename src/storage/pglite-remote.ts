// Embedded storage off the gateway's thread: the stand-in for PGlite running in a worker.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { QueryOptions } from '@electric-sql/pglite';
import { DatabaseError, StorageError } from '../errors/storage.ts';
import type { PgliteRequest, PgliteResponse, PgliteWorkerData, WireError } from './pglite-wire.ts';

/**
 * Embedded storage off the gateway's thread (docs/scaling.md): PGlite runs in a worker thread
 * (pglite-worker.ts) and this object stands in for it on the gateway's thread, with the part of
 * PGlite's interface drizzle's pglite driver calls (`query(sql, params, options)`, `exec`,
 * `transaction(fn)`). PGlite's work (parsing, planning, the WebAssembly PostgreSQL, writing its
 * files) then never holds the event loop that answers RPC calls: a usage flush, a sweep or an
 * analytics query of many rows costs this thread a message and a copy of the rows only.
 *
 * PGlite is one connection: a transaction holds it whole. As PGlite's own lock does, a
 * transaction here waits for the ones before it and holds back queries made after it began (they
 * are posted when it ends); queries outside transactions are posted at once, and the worker runs
 * everything in the order posted.
 */
export class RemotePglite {
  readonly #worker: Worker;
  readonly #exited: Promise<number>;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 1;
  /** Settles when the last transaction begun or waiting has ended. */
  #tail: Promise<void> = Promise.resolve();
  #transactions = 0;
  #gone: Error | null = null;

  private constructor(worker: Worker) {
    this.#worker = worker;
    this.#exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.on('message', (msg: PgliteResponse) => this.#answer(msg));
    worker.on('error', (err) => this.#end(new StorageError(`embedded storage's thread failed: ${err.message}`, { cause: err })));
    worker.once('exit', () => this.#end(new StorageError('embedded storage is closed')));
  }

  /** Starts the worker, which opens the database and applies the migrations; resolves once it answers queries. */
  static async open(data: PgliteWorkerData): Promise<RemotePglite> {
    const worker = startStorageThread('pglite-worker', 'storage', { ...(await pgliteAssets()), ...data });
    const remote = new RemotePglite(worker);
    try {
      await new Promise<unknown>((resolve, reject) => remote.#pending.set(0, { resolve, reject }));
    } catch (err) {
      await remote.#exited;
      throw err;
    }
    worker.unref();
    return remote;
  }

  query(sql: string, params?: unknown[], options?: QueryOptions): Promise<unknown> {
    if (this.#transactions === 0) return this.#query(sql, params, options);
    return this.#tail.then(() => this.#query(sql, params, options));
  }

  exec(sql: string): Promise<unknown> {
    if (this.#transactions === 0) return this.#post({ op: 'exec', id: 0, sql });
    return this.#tail.then(() => this.#post({ op: 'exec', id: 0, sql }));
  }

  /** As PGlite's: BEGIN, the callback's queries, COMMIT (ROLLBACK if it throws or calls `rollback()`). */
  async transaction<T>(fn: (tx: RemoteTransaction) => Promise<T>): Promise<T> {
    const before = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    this.#transactions++;
    try {
      await before;
      await this.#query('BEGIN');
      let closed = false;
      const check = () => {
        if (closed) throw new StorageError('the transaction is closed');
      };
      const tx: RemoteTransaction = {
        query: async (sql, params, options) => (check(), this.#query(sql, params, options)),
        exec: async (sql) => (check(), this.#post({ op: 'exec', id: 0, sql })),
        rollback: async () => {
          check();
          await this.#query('ROLLBACK');
          closed = true;
        },
        get closed() {
          return closed;
        },
      };
      try {
        const result = await fn(tx);
        if (!closed) {
          closed = true;
          await this.#query('COMMIT');
        }
        return result;
      } catch (err) {
        if (!closed) {
          closed = true;
          await this.#query('ROLLBACK').catch(() => {});
        }
        throw err;
      }
    } finally {
      this.#transactions--;
      release();
    }
  }

  /** Closes the database after the queries already posted, and ends the worker. */
  async close(): Promise<void> {
    if (!this.#gone) {
      this.#worker.ref();
      this.#worker.postMessage({ op: 'close' } satisfies PgliteRequest);
    }
    await this.#exited;
  }

  #query(sql: string, params?: unknown[], options?: QueryOptions): Promise<unknown> {
    // drizzle's parsers keep some types as PostgreSQL's text (functions cannot be posted: the worker does the same).
    const keepText = options?.parsers ? Object.keys(options.parsers).map(Number) : undefined;
    return this.#post({ op: 'query', id: 0, sql, ...(params?.length ? { params } : {}), ...(options?.rowMode ? { rowMode: options.rowMode } : {}), ...(keepText ? { keepText } : {}) });
  }

  #post(req: Exclude<PgliteRequest, { op: 'close' }>): Promise<unknown> {
    if (this.#gone) return Promise.reject(this.#gone);
    const id = this.#nextId++;
    // The worker keeps the process alive only while a query waits for it (an idle gateway or test ends as before).
    if (this.#pending.size === 0) this.#worker.ref();
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...req, id });
    });
  }

  #answer(msg: PgliteResponse): void {
    const waiting = this.#pending.get(msg.id);
    if (!waiting) return;
    this.#pending.delete(msg.id);
    if (this.#pending.size === 0 && msg.id !== 0) this.#worker.unref();
    if (msg.ok) waiting.resolve(msg.result);
    else waiting.reject(fromWire(msg.error));
  }

  #end(reason: Error): void {
    this.#gone ??= reason;
    for (const waiting of this.#pending.values()) waiting.reject(this.#gone);
    this.#pending.clear();
  }
}

/** What drizzle's pglite driver calls on a transaction. */
export interface RemoteTransaction {
  query(sql: string, params?: unknown[], options?: QueryOptions): Promise<unknown>;
  exec(sql: string): Promise<unknown>;
  rollback(): Promise<void>;
  readonly closed: boolean;
}

function fromWire(w: WireError): Error {
  // PostgreSQL's own errors carry a severity and a SQLSTATE (PGlite's class name is minified away).
  const err = typeof w.fields.code === 'string' && typeof w.fields.severity === 'string' ? new DatabaseError(w.message) : new StorageError(w.message);
  Object.assign(err, w.fields);
  if (w.name) err.name = w.name;
  return err;
}

/**
 * A thread of embedded storage running `script` (beside this file: .ts under tsx, .js once
 * built), named `name`: Node 24 and later give the thread that name, so `top -H`, `ps -L` and perf
 * tell it from the event loop's (bench owners' CPU by thread). Under tsx (tests, `npm run dev`)
 * a worker does not inherit tsx's loader: it registers it, then loads the .ts file.
 */
export function startStorageThread(script: 'pglite-worker' | 'pglite-init', name: string, workerData: PgliteWorkerData): Worker {
  const here = fileURLToPath(import.meta.url);
  // An in-memory database's image to start from is handed over, not copied.
  const transferList = workerData.image ? [workerData.image] : [];
  const file = path.join(path.dirname(here), `${script}${path.extname(here)}`);
  return file.endsWith('.ts')
    ? new Worker(`import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(pathToFileURL(file).href)}); })`, { eval: true, name, workerData, transferList })
    : new Worker(file, { name, workerData, transferList });
}

let assets: Promise<Pick<PgliteWorkerData, 'wasmModule' | 'fsBundle'>> | undefined;

/**
 * PGlite's WebAssembly compiled and its file bundle read once per process and given to every
 * database the process opens, on a worker or on its own thread, which would otherwise do both
 * itself at each start (tests open many databases). The one compiled module also stays alive for
 * the whole process: V8 does not free and remake PGlite's machine code at every database closed
 * and opened, the churn under which Node 22-24's V8 can abort on a check of its JIT-page registry
 * ("Check failed: jit_page...", nodejs/node#64500; docs/development.md).
 */
export function pgliteAssets(): Promise<Pick<PgliteWorkerData, 'wasmModule' | 'fsBundle'>> {
  assets ??= (async () => {
    try {
      const dist = new URL('.', import.meta.resolve('@electric-sql/pglite'));
      const [wasm, bundle] = await Promise.all([readFile(new URL('pglite.wasm', dist)), readFile(new URL('pglite.data', dist))]);
      return { wasmModule: await WebAssembly.compile(wasm), fsBundle: new Blob([bundle]) };
    } catch {
      return {}; // another layout of PGlite's files: each worker finds its own
    }
  })();
  return assets;
}
