// The worker thread of db.ts's `initInWorker` (see there why): creates a new PGlite data folder
// (PostgreSQL's initdb) and ends, on the WebAssembly module the gateway's thread compiled.
import { workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { type PgliteWorkerData, sharedPgliteOptions } from './pglite-wire.ts';

const data = workerData as PgliteWorkerData;
const client = new PGlite(data.dir, { startParams: data.startParams, ...sharedPgliteOptions(data) });
await client.waitReady;
await client.close();
