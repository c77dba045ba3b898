// Real storage for the tests, without the app: a throwaway PostgreSQL database, or storage on
// either backend migrated as the gateway opens it (PGlite from the migrated template image).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { pgliteTemplate } from './pglite-template.ts';
import { PG_ADMIN_URL, type StorageBackend } from './services.ts';

/** A throwaway PostgreSQL database, dropped by `drop()`. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `junction_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * Storage on one backend of `storageBackends()`, migrated as the gateway opens it: PGlite in
 * memory (from the template image), or a throwaway PostgreSQL database. `close()` closes it and
 * drops that database.
 */
export async function openTestStorage(backend: StorageBackend['name']): Promise<{ storage: Storage; close: () => Promise<void> }> {
  if (backend === 'pglite') {
    const storage = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    return { storage, close: () => storage.close() };
  }
  const database = await createTestDatabase();
  try {
    const storage = await openStorage({ databaseUrl: database.url });
    return {
      storage,
      close: async () => {
        await storage.close();
        await database.drop();
      },
    };
  } catch (err) {
    await database.drop();
    throw err;
  }
}
