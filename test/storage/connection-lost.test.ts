// C48: a PostgreSQL connection that dies while it is checked out of the pool (between two
// statements of a transaction, as the usage flush runs them). node-postgres's pool listens for
// errors on idle connections only, and a connection with no query under way reports its end as
// an 'error' event: unheard, an uncaught exception that stops the gateway. The transaction must
// fail instead, and the next query run on a new connection.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { openTestStorage } from '../support/storage.ts';
import { PG_ADMIN_URL, serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const rowsOf = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;

describe('a PostgreSQL connection lost while checked out (C48)', { skip: await serviceSkip('PostgreSQL') }, () => {
  let opened: Awaited<ReturnType<typeof openTestStorage>>;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  before(async () => {
    opened = await openTestStorage('postgres');
    await admin.connect();
    // The test runner reports an uncaught exception as a failure of whatever runs then; counted
    // here instead, so this test says what happened.
    process.prependListener('uncaughtException', onUncaught);
  });
  after(async () => {
    process.removeListener('uncaughtException', onUncaught);
    await admin.end();
    await opened.close();
  });

  test('a transaction whose server connection is terminated between statements fails; no uncaught error; the next query runs', async () => {
    const { db } = opened.storage;
    let pid = 0;
    const tx = db.transaction(async (t) => {
      pid = Number(rowsOf(await t.execute(sql`select pg_backend_pid() as pid`))[0]?.pid);
      // Between two statements the connection has no query under way: its server goes away now.
      await admin.query('select pg_terminate_backend($1)', [pid]);
      await waitFor(async () => rowsOf(await admin.query('select 1 from pg_stat_activity where pid = $1', [pid])).length === 0 || undefined, {
        what: 'the backend to be gone',
      });
      // Give the client the moment it takes to see its socket closed (the 'error' event).
      await new Promise((resolve) => setTimeout(resolve, 200));
      await t.execute(sql`select 1`);
    });
    await assert.rejects(tx, (err: Error) => /terminat|not queryable|Connection/i.test(`${err.message} ${String((err as { cause?: Error }).cause?.message)}`));
    assert.ok(pid > 0);
    assert.deepEqual(uncaught, [], 'no uncaught exception');
    // The pool dropped that connection: the next query is answered.
    assert.equal(rowsOf(await db.execute(sql`select 1 as one`))[0]?.one, 1);
  });
});
