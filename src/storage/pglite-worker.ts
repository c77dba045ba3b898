// The worker thread of embedded storage (pglite-remote.ts, see there why): holds the PGlite
// database and runs the queries the gateway's thread posts, in the order they come (PGlite runs
// one at a time). Imports PGlite only (the gateway's thread runs the migrations through it), so
// that a worker starts fast: tests open many.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type QueryOptions } from '@electric-sql/pglite';
import { PreparedStatements } from './pglite-statements.ts';
import { type PgliteRequest, type PgliteResponse, type PgliteWorkerData, sharedPgliteOptions, type WireError } from './pglite-wire.ts';

const data = workerData as PgliteWorkerData;
const port = parentPort;
if (!port) throw new Error('pglite-worker.ts runs as a worker thread');

/** Values of these types stay as PostgreSQL's text (drizzle's own parsers do just that; functions cannot be posted). */
const keepText = new Map<string, QueryOptions['parsers']>();
const parsersFor = (oids: number[] | undefined): QueryOptions['parsers'] => {
  if (!oids?.length) return undefined;
  const key = oids.join(',');
  let parsers = keepText.get(key);
  if (!parsers) {
    parsers = Object.fromEntries(oids.map((oid) => [oid, (value: string) => value]));
    keepText.set(key, parsers);
  }
  return parsers;
};

/** A PostgreSQL error with its fields (code, constraint, detail...): an Error's own fields do not survive postMessage. */
function wire(err: unknown): WireError {
  if (!(err instanceof Error)) return { message: String(err), className: 'Error', fields: {} };
  const fields: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(err)) if (typeof v === 'string' || typeof v === 'number') fields[k] = v;
  return { message: err.message, className: err.constructor?.name ?? 'Error', name: err.name, fields };
}

let client: PGlite;
try {
  // PGlite's WebAssembly compiled once by the gateway's thread, and its file bundle, when given.
  const shared = sharedPgliteOptions(data);
  client = data.image
    ? new PGlite({ loadDataDir: new Blob([data.image]), startParams: data.startParams, ...shared })
    : new PGlite(data.dir, { startParams: data.startParams, ...shared });
  await client.waitReady;
  port.postMessage({ id: 0, ok: true, result: null } satisfies PgliteResponse);
} catch (err) {
  port.postMessage({ id: 0, ok: false, error: wire(err) } satisfies PgliteResponse);
  port.close();
  throw err;
}

/** Statements run again kept prepared by name (pglite-statements.ts). */
const statements = new PreparedStatements(client);
/** Messages run one after another, in the order posted (PreparedStatements' precondition). */
let tail: Promise<unknown> = Promise.resolve();

port.on('message', (msg: PgliteRequest) => {
  if (msg.op === 'close') {
    // PGlite closes after the queries already posted, then this thread ends.
    void tail.then(() => client.close()).then(
      () => port.close(),
      () => port.close(),
    );
    return;
  }
  const run = (): Promise<unknown> =>
    msg.op === 'exec'
      ? client.exec(msg.sql)
      : statements.query(msg.sql, msg.params, { ...(msg.rowMode ? { rowMode: msg.rowMode } : {}), parsers: parsersFor(msg.keepText) });
  tail = tail.then(run).then(
    (result) => port.postMessage({ id: msg.id, ok: true, result } satisfies PgliteResponse),
    (err: unknown) => port.postMessage({ id: msg.id, ok: false, error: wire(err) } satisfies PgliteResponse),
  );
});
