// Opens storage: PostgreSQL when DATABASE_URL is set, else embedded PGlite, one Db type over both.
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import type { Pool as PgPool } from 'pg';
import { StorageError } from '../errors/storage.ts';
import { pgliteAssets, RemotePglite, startStorageThread } from './pglite-remote.ts';
import type { PgliteWorkerData } from './pglite-wire.ts';

/**
 * One type over both drivers: features write their queries once, each against its own
 * `schema.ts`. Storage knows no feature's tables (the relational `db.query` API is not used).
 */
export type Db = PgDatabase<PgQueryResultHKT>;
/** A transaction of `Db` (a `Db` itself: every query method works the same inside one). */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface Storage {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** Embedded storage opened here: its client, which the workers of a primary reach over IPC (WORKERS, pglite-shared.ts). */
  embedded?: PGlite | RemotePglite;
  /** Cheap liveness check for /health/ready. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface StorageOptions {
  /** PostgreSQL URL; null/undefined means embedded PGlite. */
  databaseUrl?: string | null;
  /** PostgreSQL only: milliseconds before a query the server does not answer fails (C48); 10,000 by default. */
  queryTimeoutMs?: number;
  /** PGlite files go to `<dataDir>/pglite`; `memory` keeps them in memory (tests). */
  dataDir?: string;
  /**
   * In memory only: start from this image of a migrated database (`migratedPgliteImage()`)
   * instead of an empty one, which skips PGlite's initdb. Migrations still run over it.
   */
  pgliteImage?: Blob;
  /**
   * PGlite only: PostgreSQL's shared_buffers in MiB (default 32). PGlite's own default (128 MiB)
   * is allocated in its WebAssembly memory for the whole run, which never shrinks: the largest
   * part of an embedded gateway's memory, for databases that are a few MiB (docs/decisions.md,
   * "Choices beyond the contract", Configuration).
   */
  sharedBuffersMb?: number;
  /**
   * PGlite only: where the database runs. `worker` (the default): in a worker thread, so that no
   * storage work holds the event loop that answers RPC calls (pglite-remote.ts, docs/scaling.md).
   * `main`: on the calling thread, as before (a choice for short-lived tools).
   */
  embeddedThread?: 'worker' | 'main';
  /**
   * PGlite only: told every `slowOpenMs` (30 s by default) while the database has not opened yet,
   * with the step it is on, so that a start that takes long says where it waits (main.ts logs it).
   */
  onSlowOpen?: (step: EmbeddedOpenStep, ms: number) => void;
  slowOpenMs?: number;
}

/** The steps of opening embedded storage, as `onSlowOpen` names them. */
export type EmbeddedOpenStep = 'creating the database (first start)' | 'starting the database' | 'applying migrations';

const MIGRATIONS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any fixed number: serialises migrations when several instances start at once on PostgreSQL.
const MIGRATION_LOCK = 7_245_001;
/** PGlite's shared_buffers when not given (config `storage.embeddedSharedBuffersMb`). */
const DEFAULT_SHARED_BUFFERS_MB = 32;

/** Opens storage and brings its schema up to date (idempotent: applied migrations are skipped). */
export async function openStorage(opts: StorageOptions): Promise<Storage> {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl, opts.queryTimeoutMs ?? 10_000);
  const progress: OpenProgress = { step: 'starting the database' };
  const started = Date.now();
  const timer = opts.onSlowOpen ? setInterval(() => opts.onSlowOpen?.(progress.step, Date.now() - started), opts.slowOpenMs ?? 30_000) : undefined;
  timer?.unref();
  try {
    return await openPglite(opts.dataDir ?? './data', opts.pgliteImage, opts.sharedBuffersMb ?? DEFAULT_SHARED_BUFFERS_MB, opts.embeddedThread ?? 'worker', progress);
  } finally {
    clearInterval(timer);
  }
}

interface OpenProgress {
  step: EmbeddedOpenStep;
}

/**
 * PGlite's start parameters with shared_buffers set. Given on the command line, not through
 * PGlite's `postgresqlconf` option: that one rewrites the data folder's postgresql.conf whole,
 * dropping what initdb wrote there (time zone, locale settings).
 */
const startParams = (sharedBuffersMb: number): string[] => [...PGlite.defaultStartParams, '-c', `shared_buffers=${sharedBuffersMb}MB`];

/**
 * The data image of a new in-memory PGlite database with every migration applied. Opening a
 * database from it takes a fraction of an empty one's initdb: tests open many (one per app).
 */
export async function migratedPgliteImage(): Promise<Blob> {
  const client = new PGlite(await mainThreadAssets());
  try {
    await client.waitReady;
    await migratePglite(drizzlePglite(client), { migrationsFolder: MIGRATIONS });
    return await client.dumpDataDir('none');
  } finally {
    await client.close();
  }
}

/** The process's compiled PGlite and its file bundle (pgliteAssets), as PGlite's own options. */
async function mainThreadAssets(): Promise<{ pgliteWasmModule?: WebAssembly.Module; fsBundle?: Blob }> {
  const { wasmModule, fsBundle } = await pgliteAssets();
  return { ...(wasmModule ? { pgliteWasmModule: wasmModule } : {}), ...(fsBundle ? { fsBundle } : {}) };
}

async function openPglite(dataDir: string, image: Blob | undefined, sharedBuffersMb: number, thread: 'worker' | 'main', progress: OpenProgress): Promise<Storage> {
  const params = startParams(sharedBuffersMb);
  let dir: string | undefined;
  if (dataDir !== 'memory') {
    dir = path.resolve(dataDir, 'pglite');
    // DATA_DIR, when created here, and its pglite directory are the owner's only (0700).
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    if (!existsSync(path.join(dir, 'PG_VERSION'))) {
      progress.step = 'creating the database (first start)';
      await initInWorker(dir, params);
      progress.step = 'starting the database';
    }
  }
  let client: PGlite | RemotePglite;
  if (thread === 'worker') {
    const copy = image && dir === undefined ? await image.arrayBuffer() : undefined;
    client = await RemotePglite.open({ ...(dir ? { dir } : {}), ...(copy ? { image: copy } : {}), startParams: params });
  } else {
    const shared = await mainThreadAssets();
    client = dir ? new PGlite(dir, { startParams: params, ...shared }) : new PGlite({ ...(image ? { loadDataDir: image } : {}), startParams: params, ...shared });
    await client.waitReady;
  }
  if (dir) ownerOnly(dir);
  // The stand-in has the part of PGlite's interface that drizzle's pglite driver calls.
  const db = drizzlePglite({ client: client as PGlite });
  progress.step = 'applying migrations';
  await migratePglite(db, { migrationsFolder: MIGRATIONS });
  return {
    db: db as unknown as Db,
    kind: 'pglite',
    embedded: client,
    ping: async () => {
      await client.query('select 1');
    },
    close: () => client.close(),
  };
}

/**
 * Creates the database of the data folder `dir` (initdb) in a worker thread: the memory initdb
 * takes (~500 MB of WebAssembly memory, more than the database needs to run) is returned when the
 * worker ends, instead of staying with the gateway until a garbage collection that an idle gateway
 * may not run for hours. Under tsx (tests, `npm run dev`) the worker runs the .ts file.
 * It is given the process's one compiled PGlite module (`pgliteAssets`), as every other PGlite of
 * the process is: a module compiled in the worker would be freed when it ends, the churn of
 * PGlite's machine code under which Node 22-24's V8 can abort (nodejs/node#64500).
 */
async function initInWorker(dir: string, params: string[]): Promise<void> {
  const workerData: PgliteWorkerData = { dir, startParams: params, ...(await pgliteAssets()) };
  const worker = startStorageThread('pglite-init', 'storage-init', workerData);
  const code = await new Promise<number>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('exit', resolve);
  });
  if (code !== 0) throw new StorageError(`creating the embedded database in ${dir} failed (exit code ${code})`);
}

/**
 * PGlite unpacks a new database with every file world-writable (0666), whatever the umask, so a
 * umask cannot help: once it is ready, the tree is made the owner's only (directories 0700, files
 * 0600; also an older tree on upgrade). Files PostgreSQL creates later are 0600 by its own rule,
 * and reused WAL segments keep the mode set here.
 */
function ownerOnly(dir: string): void {
  chmodSync(dir, 0o700);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) ownerOnly(full);
    else if (entry.isFile()) chmodSync(full, 0o600);
  }
}

async function openPostgres(url: string, queryTimeoutMs: number): Promise<Storage> {
  // Loaded only when configured: an embedded start does not pay for the driver.
  const [{ default: pg }, { drizzle: drizzlePg }, { migrate: migratePg }] = await Promise.all([
    import('pg'),
    import('drizzle-orm/node-postgres'),
    import('drizzle-orm/node-postgres/migrator'),
  ]);
  // Migrations on a connection of their own, without the pool's query timeout: one may take long.
  const conn = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  conn.on('error', () => {});
  try {
    await conn.connect();
    await conn.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await migratePg(drizzlePg(conn), { migrationsFolder: MIGRATIONS });
    } finally {
      await conn.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    await conn.end().catch(() => {});
  }
  // C48: a database that stops answering (hung, or gone without a reset) fails a query after
  // storage.queryTimeoutMs (10 s) instead of holding it (and the request, or the usage flush,
  // behind it) for ever; a connection is given as long, at most 5 s.
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    connectionTimeoutMillis: Math.min(5000, queryTimeoutMs),
    query_timeout: queryTimeoutMs,
    keepAlive: true,
  });
  // A pool error (server restart) must not crash the process; the next query reports it.
  pool.on('error', () => {});
  // C48: nor an error on a connection checked out of the pool (the pool listens only to idle
  // ones): one whose server goes away between two statements of a transaction, or after
  // `connect` and before its first query, emits 'error' with no query to fail; unheard, that is
  // an uncaught exception. Its next query fails ("not queryable") and the pool drops it.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const db = drizzlePg(pool);
  return {
    db: db as unknown as Db,
    kind: 'postgres',
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    close: () => endPool(pool, queryTimeoutMs),
  };
}

/**
 * `pool.end()`, bounded: it waits for every client to be given back, and a client whose query
 * timed out on a hung database (C48) may never be. Past the query timeout the remaining
 * connections are cut, so a stop (SIGTERM) never hangs on the database.
 */
async function endPool(pool: PgPool, queryTimeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = pool.end();
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), Math.min(queryTimeoutMs, 5000));
  });
  try {
    if ((await Promise.race([ended, late])) !== 'late') return;
    // node-postgres keeps its clients in `_clients`; each has its socket in `connection.stream`.
    const clients = (pool as unknown as { _clients?: { on(e: 'error', f: () => void): void; connection?: { stream?: { destroy(): void } } }[] })._clients ?? [];
    for (const c of clients) {
      // A client in use has no error listener of the pool's: the cut must not be an uncaught error.
      c.on('error', () => {});
      c.connection?.stream?.destroy();
    }
    await Promise.race([ended, new Promise((r) => setTimeout(r, 1000))]);
  } finally {
    clearTimeout(timer);
  }
}
