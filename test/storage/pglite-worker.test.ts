import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { DatabaseError, StorageError } from '../../src/errors/storage.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';

const rows = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;

/** Timer callbacks that ran on this thread while `work` was running. */
async function ticksDuring(work: () => Promise<unknown>): Promise<number> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return ticks;
}

// For scale (docs/scaling.md): embedded storage (PGlite) runs in a worker thread, so no flush, sweep or REST query
// holds the event loop that answers RPC calls.
describe('embedded storage in a worker thread', () => {
  let storage: Storage;
  before(async () => {
    storage = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    await storage.db.execute(sql`create table worker_probe (id int primary key, note text)`);
  });
  after(() => storage.close());

  test("a slow query does not hold this thread's event loop; on the same thread it holds it whole", async () => {
    // Half a second in PostgreSQL: timers of 10 ms keep firing here meanwhile (dozens; a few are enough).
    const ticks = await ticksDuring(() => storage.db.execute(sql`select pg_sleep(0.5)`));
    assert.ok(ticks >= 5, `timers ran ${ticks} times during the query`);
    // The control: PGlite on the calling thread (as before) lets no timer run during the same query.
    const onThread = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate(), embeddedThread: 'main' });
    try {
      assert.equal(await ticksDuring(() => onThread.db.execute(sql`select pg_sleep(0.5)`)), 0);
    } finally {
      await onThread.close();
    }
  });

  test("PostgreSQL's errors keep their class, SQLSTATE and fields (a unique violation is 23505)", async () => {
    await storage.db.execute(sql`insert into worker_probe values (1, 'a')`);
    const err = await storage.db.execute(sql`insert into worker_probe values (1, 'b')`).then(
      () => assert.fail('the second insert passed'),
      (e: unknown) => e as Error & { cause?: Record<string, unknown> },
    );
    assert.equal(err.constructor.name, 'DrizzleQueryError');
    assert.ok(err.cause instanceof DatabaseError);
    assert.equal(err.cause.code, '23505');
    assert.equal(err.cause.constraint, 'worker_probe_pkey');
    assert.match(String(err.cause.message), /duplicate key/);
  });

  test('a transaction holds the database: queries made meanwhile wait for its end and see only what it committed', async () => {
    let outside: Promise<unknown> | undefined;
    await assert.rejects(
      storage.db.transaction(async (tx) => {
        await tx.execute(sql`insert into worker_probe values (2, 'rolled back')`);
        // Made outside the transaction while it is open (`then` runs drizzle's query now): posted once it has ended.
        outside = storage.db.execute(sql`select count(*)::int as n from worker_probe where id = 2`).then((res) => res);
        await new Promise((r) => setTimeout(r, 50));
        throw new Error('abandon');
      }),
      /abandon/,
    );
    assert.equal(rows(await outside)[0]?.n, 0, 'the query outside did not run inside the transaction');
    // Nested transactions are savepoints, as with PGlite on this thread.
    await storage.db.transaction(async (tx) => {
      await tx.execute(sql`insert into worker_probe values (3, 'kept')`);
      await tx.transaction(async (inner) => {
        await inner.execute(sql`insert into worker_probe values (4, 'undone')`);
        inner.rollback();
      }).catch(() => {});
    });
    const ids = rows(await storage.db.execute(sql`select id from worker_probe where id in (3, 4) order by id`)).map((r) => r.id);
    assert.deepEqual(ids, [3]);
  });

  test('once closed, a query fails with a storage error instead of waiting', async () => {
    const other = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    await other.ping();
    await other.close();
    await assert.rejects(other.ping(), StorageError);
  });
});
