// Run as a worker thread by db.ts: creates a new PGlite data folder (PostgreSQL's initdb) and
// ends. PGlite's initdb takes several hundred MB of WebAssembly memory that the main thread would
// keep until some later garbage collection; a worker's memory goes back when it ends.
import { workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

const { dir, startParams } = workerData as { dir: string; startParams: string[] };
const client = new PGlite(dir, { startParams });
await client.waitReady;
await client.close();
