// The migration workflow (docs/development.md, "Changing the schema"): the features' Drizzle schemas are the
// truth, `npm run db:generate` writes a migration for a change and nothing without one, and the
// migration files, as deployed databases have applied them, make exactly what the schema says.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { generateDrizzleJson, generateMigration } from 'drizzle-kit/api';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import * as analytics from '../../src/analytics/schema.ts';
import * as auth from '../../src/auth/schema.ts';
import * as events from '../../src/events/schema.ts';
import * as faucet from '../../src/faucet/schema.ts';
import * as intents from '../../src/intents/schema.ts';
import * as keys from '../../src/keys/schema.ts';
import * as usage from '../../src/usage/schema.ts';
import * as webhooks from '../../src/webhooks/schema.ts';
import * as whales from '../../src/whales/schema.ts';
import { createTestDatabase } from '../support/storage.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';
import { storageBackends } from '../support/services.ts';
import {
  describeSchema,
  emptyDatabase,
  filesUnder,
  journal,
  MIGRATIONS_DIR,
  ProjectCopy,
  ROOT,
  type SqlRunner,
  snapshot,
  statements,
} from './migration-support.ts';

const MIGRATIONS = path.join(ROOT, MIGRATIONS_DIR);
const EMPTY = generateDrizzleJson({});
// Every feature's tables, as drizzle.config.ts finds them (src/*/schema.ts; config/schema.ts holds no table).
const schema = { ...analytics, ...auth, ...events, ...faucet, ...intents, ...keys, ...usage, ...webhooks, ...whales };
const backends = await storageBackends();

/** A database of one backend, empty (no table, no migration journal). */
interface TestDb extends SqlRunner {
  /** Drizzle's migrator (what openStorage runs) over the given migrations folder. */
  migrate(folder: string): Promise<void>;
  /** Closes this connection and opens the database with openStorage, as the gateway does. */
  reopen(): Promise<Storage>;
  close(): Promise<void>;
}

async function emptyPglite(): Promise<TestDb> {
  // From the migrated test image emptied: much faster than PGlite's initdb.
  const client = new PGlite({ loadDataDir: await pgliteTemplate() });
  const db: TestDb = {
    exec: async (text) => void (await client.exec(text)),
    rows: async (text) => (await client.query<Record<string, unknown>>(text)).rows,
    migrate: (folder) => migratePglite(drizzlePglite(client), { migrationsFolder: folder }),
    reopen: async () => {
      const image = await client.dumpDataDir('none');
      await client.close();
      return openStorage({ dataDir: 'memory', pgliteImage: image });
    },
    close: async () => {
      if (!client.closed) await client.close();
    },
  };
  await emptyDatabase(db);
  return db;
}

async function emptyPostgres(): Promise<TestDb> {
  const database = await createTestDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  let open = true;
  const end = async () => {
    if (open) await client.end();
    open = false;
  };
  return {
    exec: async (text) => void (await client.query(text)),
    rows: async (text) => (await client.query<Record<string, unknown>>(text)).rows,
    migrate: (folder) => migratePg(drizzlePg(client), { migrationsFolder: folder }),
    reopen: async () => {
      await end();
      return openStorage({ databaseUrl: database.url });
    },
    close: async () => {
      await end();
      await database.drop();
    },
  };
}

/** A copy of the migrations folder whose journal stops after the first `count` migrations. */
function migrationsUpTo(count: number): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-migrations-part-'));
  cpSync(MIGRATIONS, dir, { recursive: true });
  const entries = journal(dir).slice(0, count);
  writeFileSync(path.join(dir, 'meta/_journal.json'), JSON.stringify({ version: '7', dialect: 'postgresql', entries }, null, 2));
  return dir;
}

const rowsOf = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;

describe('the migration workflow (npm run db:generate)', () => {
  const copies: ProjectCopy[] = [];
  const folders: string[] = [];
  after(() => {
    for (const c of copies) c.remove();
    for (const f of folders) rmSync(f, { recursive: true, force: true });
  });

  // One copy of the project with a column added to a feature's schema and `npm run db:generate`
  // run in it: the generate test looks at what it wrote, the backend tests run it.
  let added: Promise<{ copy: ProjectCopy; before: Map<string, string>; output: string }> | undefined;
  const withAddedColumn = () =>
    (added ??= (async () => {
      const copy = new ProjectCopy();
      copies.push(copy);
      const before = filesUnder(copy.migrations);
      copy.edit('src/events/schema.ts', "  holder: text('holder').notNull(),\n", "  holder: text('holder').notNull(),\n  note: text('note').default('none'),\n");
      return { copy, before, output: await copy.generate() };
    })());

  test('every migration in the journal has its snapshot, each one pointing at the one before', () => {
    let prevId = '00000000-0000-0000-0000-000000000000'; // the first snapshot's prevId
    for (const entry of journal(MIGRATIONS)) {
      const snap = snapshot(MIGRATIONS, entry.tag);
      assert.equal(snap.prevId, prevId, `${entry.tag}'s snapshot follows the one before`);
      prevId = snap.id;
    }
  });

  test('on the unchanged schema it writes nothing: no migration, no snapshot, the journal as it was', async () => {
    const copy = new ProjectCopy();
    copies.push(copy);
    const before = filesUnder(copy.migrations);
    const output = await copy.generate();
    assert.match(output, /No schema changes, nothing to migrate/);
    assert.deepEqual(filesUnder(copy.migrations), before);
  });

  test('a column added to a feature schema gives exactly one new migration, which adds that column', async () => {
    const { copy, before } = await withAddedColumn();
    const now = filesUnder(copy.migrations);
    const added = [...now.keys()].filter((name) => !before.has(name)).sort();
    assert.equal(added.length, 2, `one migration and its snapshot: ${added.join(', ')}`);
    const [sqlFile, snapFile] = [added.find((n) => n.endsWith('.sql')), added.find((n) => n.endsWith('_snapshot.json'))];
    // The next number after the stored migrations'.
    const next = String([...before.keys()].filter((n) => /^\d{4}_\w+\.sql$/.test(n)).length).padStart(4, '0');
    assert.match(String(sqlFile), new RegExp(`^${next}_\\w+\\.sql$`));
    assert.equal(snapFile, path.join('meta', `${next}_snapshot.json`));
    assert.equal(now.get(String(sqlFile))?.trim(), `ALTER TABLE "follower_leases" ADD COLUMN "note" text DEFAULT 'none';`);
    // The files that were there are untouched but for the journal, which gains one entry.
    for (const [name, text] of before) if (name !== path.join('meta', '_journal.json')) assert.equal(now.get(name), text, name);
    const entries = journal(copy.migrations);
    assert.deepEqual(entries.slice(0, -1), journal(MIGRATIONS));
    assert.equal(entries.at(-1)?.tag, String(sqlFile).replace(/\.sql$/, ''));
    assert.equal(snapshot(copy.migrations, next).prevId, snapshot(MIGRATIONS, journal(MIGRATIONS).at(-1)?.tag ?? '').id);

    // Run again, it finds the schema and the new snapshot the same: nothing more.
    const again = await copy.generate();
    assert.match(again, /No schema changes, nothing to migrate/);
    assert.deepEqual(filesUnder(copy.migrations), now);
  });

  describe('on each storage backend', () => {
    for (const backend of backends) {
      const open = backend.name === 'pglite' ? emptyPglite : emptyPostgres;

      describe(backend.name, { skip: backend.skip }, () => {
        test('each snapshot describes the database its migrations make, from the first migration to the last', async () => {
          const [byMigrations, bySnapshots] = [await open(), await open()];
          try {
            // One database takes the migration files, the other what drizzle-kit makes of the
            // difference between one snapshot and the next: after each step they are the same.
            let previous = EMPTY;
            for (const entry of journal(MIGRATIONS)) {
              const current = snapshot(MIGRATIONS, entry.tag);
              for (const s of statements(MIGRATIONS, entry.tag)) await byMigrations.exec(s);
              for (const s of await generateMigration(previous, current)) await bySnapshots.exec(s);
              assert.deepEqual(await describeSchema(bySnapshots), await describeSchema(byMigrations), `after ${entry.tag}`);
              previous = current;
            }
            // And the features' schema, created from nothing, is that same database: every table
            // the migrations make is in a schema.ts, with its types, defaults, keys and indexes.
            await emptyDatabase(bySnapshots);
            for (const s of await generateMigration(EMPTY, generateDrizzleJson(schema))) await bySnapshots.exec(s);
            const tables = await describeSchema(bySnapshots);
            assert.deepEqual(tables, await describeSchema(byMigrations));
            for (const t of ['analytics_hours', 'analytics_days', 'analytics_series', 'intents', 'webhook_deliveries']) assert.ok(tables.includes(`relation ${t}: r`), t);
          } finally {
            await byMigrations.close();
            await bySnapshots.close();
          }
        });

        test('a database with data, stopped at an older migration, is brought up to date when opened and keeps its rows', async () => {
          const db = await open();
          let storage: Storage | undefined;
          try {
            const part = migrationsUpTo(5); // 0000 to 0004 (whale alerts)
            folders.push(part);
            await db.migrate(part);
            await db.exec(`
              insert into users (id, email, name, password_hash) values ('u1', 'a@example.com', 'A', 'x');
              insert into api_keys (id, user_id, name, prefix, key_hash, key_ciphertext, networks) values ('k1', 'u1', 'main', 'jk_1', 'h1', 'c1', '["ethereum"]');
              insert into usage_daily (user_id, key_id, network, method, day, requests) values ('u1', 'k1', 'ethereum', 'eth_call', '2026-01-02', 7);
              insert into follower_cursors (network, next_block) values ('ethereum', 42);`);
            storage = await db.reopen();
            const keys = rowsOf(await storage.db.execute(sql`select id, access from api_keys`));
            assert.deepEqual(keys, [{ id: 'k1', access: null }]);
            const usage = rowsOf(await storage.db.execute(sql`select requests::int as n from usage_daily`));
            assert.deepEqual(usage, [{ n: 7 }]);
            // 0015 sums the stored usage per account into usage_account_daily, and its trigger adds later writes.
            await storage.db.execute(sql`update usage_daily set requests = requests + 5`);
            const account = rowsOf(await storage.db.execute(sql`select user_id, day::text as day, network, method, requests::int as n from usage_account_daily`));
            assert.deepEqual(account, [{ user_id: 'u1', day: '2026-01-02', network: 'ethereum', method: 'eth_call', n: 12 }]);
            const cursor = rowsOf(await storage.db.execute(sql`select next_block::int as n from follower_cursors`));
            assert.deepEqual(cursor, [{ n: 42 }]);
            const applied = rowsOf(await storage.db.execute(sql`select count(*)::int as n from drizzle.__drizzle_migrations`));
            assert.deepEqual(applied, [{ n: journal(MIGRATIONS).length }]);
            // The tables of the later migrations are there and take rows.
            await storage.db.execute(sql`insert into analytics_series (user_id, key_id, network, method) values ('u1', 'k1', 'ethereum', 'eth_call')`);
            await storage.db.execute(sql`insert into analytics_days (series, day, latency) select id, '2026-01-02', '' from analytics_series`);
            await storage.db.execute(sql`update api_keys set access = '{}'::jsonb`);
          } finally {
            await storage?.close();
            await db.close();
          }
        });

        test('the migration generated for a new column runs after the stored ones, on an empty database and on one with data', async () => {
          const { copy } = await withAddedColumn();
          const [empty, withData] = [await open(), await open()];
          try {
            await withData.migrate(MIGRATIONS);
            await withData.exec(`insert into follower_leases (network, holder, expires_at) values ('ethereum', 'i1', now())`);
            for (const db of [empty, withData]) await db.migrate(copy.migrations);
            assert.deepEqual(await empty.rows(`select count(*)::int as n from drizzle.__drizzle_migrations`), [{ n: journal(copy.migrations).length }]);
            assert.deepEqual(await withData.rows(`select holder, note from follower_leases`), [{ holder: 'i1', note: 'none' }]);
            const column = (await describeSchema(empty)).filter((l) => l.startsWith('column follower_leases.note'));
            assert.deepEqual(column, [`column follower_leases.note: text default 'none'::text`]);
            assert.deepEqual(await describeSchema(withData), await describeSchema(empty));
          } finally {
            await empty.close();
            await withData.close();
          }
        });
      });
    }
  });

  test('the stored migration folder has no file the journal does not name', () => {
    const tags = new Set(journal(MIGRATIONS).map((e) => e.tag));
    for (const name of readdirSync(MIGRATIONS)) {
      if (name === 'meta') continue;
      assert.ok(tags.has(name.replace(/\.sql$/, '')), `${name} is in meta/_journal.json`);
    }
    for (const tag of tags) assert.ok(existsSync(path.join(MIGRATIONS, 'meta', `${tag.slice(0, 4)}_snapshot.json`)), `${tag} has its snapshot`);
  });
});
