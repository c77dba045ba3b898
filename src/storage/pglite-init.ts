// The worker thread of db.ts's `initInWorker` (see there why): creates a new PGlite data folder
// (PostgreSQL's initdb) and ends.
import { workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

const { dir, startParams } = workerData as { dir: string; startParams: string[] };
const client = new PGlite(dir, { startParams });
await client.waitReady;
await client.close();
