import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';

/** Names of the tables in `public`, sorted. */
async function tables(s: Storage): Promise<string[]> {
  const res = await s.db.execute(sql`select tablename from pg_tables where schemaname = 'public' order by tablename`);
  return (res as { rows: Array<{ tablename: string }> }).rows.map((r) => r.tablename);
}

describe('in-memory PGlite opened from a migrated image (test template)', () => {
  let image: Blob;
  let reference: Storage;
  before(async () => {
    image = await pgliteTemplate(); // made by migratedPgliteImage(), in this process or an earlier one
    reference = await openStorage({ dataDir: 'memory', pgliteImage: image });
  });
  after(() => reference.close());

  test('has every table of the migrations', async () => {
    const names = await tables(reference);
    for (const t of ['users', 'refresh_tokens', 'api_keys', 'usage_daily', 'faucet_grants']) assert.ok(names.includes(t), `${t} in ${names.join(',')}`);
  });

  test('databases opened from one image are independent of each other', async () => {
    const other = await openStorage({ dataDir: 'memory', pgliteImage: image });
    try {
      await other.db.execute(sql`create table only_here (x int)`);
      assert.ok((await tables(other)).includes('only_here'));
      assert.ok(!(await tables(reference)).includes('only_here'));
    } finally {
      await other.close();
    }
  });

  test('an image older than the migrations is brought up to date when opened', async () => {
    // An image made before any migration: the migrated one with the schema and the journal emptied.
    const old = new PGlite({ loadDataDir: image });
    await old.exec('drop schema public cascade; create schema public; delete from drizzle.__drizzle_migrations;');
    const oldImage = await old.dumpDataDir('none');
    await old.close();

    const opened = await openStorage({ dataDir: 'memory', pgliteImage: oldImage });
    try {
      assert.deepEqual(await tables(opened), await tables(reference));
    } finally {
      await opened.close();
    }
  });
});
