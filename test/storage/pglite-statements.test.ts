import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { decodeLatency } from '../../src/analytics/histogram.ts';
import { AnalyticsRecorder } from '../../src/analytics/recorder.ts';
import { loadConfig } from '../../src/config/load.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { PreparedStatements } from '../../src/storage/pglite-statements.ts';
import { UsageService } from '../../src/usage/service.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';

const rowsOf = (res: unknown) => (res as { rows: Array<Record<string, unknown>> }).rows;

/** Prepared statements of the session, by their text. */
async function preparedTexts(client: PGlite): Promise<string[]> {
  return (await client.query<{ statement: string }>('select statement from pg_prepared_statements order by statement')).rows.map((r) => r.statement);
}

// For scale (docs/scaling.md): embedded storage keeps a statement run a second time prepared by name,
// so that PGlite plans it once (a usage flush's upserts were mostly planning).
describe('embedded storage: statements run again are prepared', () => {
  let storage: Storage;
  let client: PGlite;
  before(async () => {
    storage = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate(), embeddedThread: 'main' });
    client = storage.embedded as PGlite;
    await client.exec(`create table stmt_probe (id int primary key, note text, tags text[], at timestamptz, big int8, raw bytea)`);
  });
  after(() => storage.close());

  test('the same rows as PGlite alone, every value type both ways, from the second run on by name', async () => {
    const statements = new PreparedStatements(client);
    const insert = 'insert into stmt_probe (id, note, tags, at, big, raw) values ($1, $2, $3, $4, $5, decode($6, $7)) returning id, note, tags, at, big, raw';
    const at = new Date('2026-11-30T12:34:56.789Z');
    const rows = [];
    for (let i = 1; i <= 3; i++) {
      const note = i === 2 ? null : `n'${i}\\"é\u{1F600}`;
      rows.push((await statements.query(insert, [i, note, ['a', 'b,c', '"q"', null], at, 2n ** 62n + BigInt(i), 'c0ffee', 'hex'])).rows[0]);
    }
    assert.equal(statements.prepared, 1, 'prepared at its second run');
    assert.equal(statements.reused, 1, 'run by name at its third');
    assert.deepEqual(await preparedTexts(client), [insert]);
    const direct = (await client.query('select id, note, tags, at, big, raw from stmt_probe order by id')).rows;
    assert.deepEqual(rows, direct);
    assert.deepEqual(rows[2], { id: 3, note: `n'3\\"é\u{1F600}`, tags: ['a', 'b,c', '"q"', null], at, big: 2n ** 62n + 3n, raw: Uint8Array.from([0xc0, 0xff, 0xee]) });
    assert.equal((rows[1] as { note: unknown }).note, null);

    // Row mode and the caller's parsers (the worker keeps some types as text for drizzle) hold too.
    const read = 'select id, at from stmt_probe where id = $1';
    for (let i = 0; i < 3; i++) {
      const r = await statements.query(read, [1], { rowMode: 'array', parsers: { 1184: (v: string) => v } });
      assert.deepEqual(r.rows, [[1, '2026-11-30 12:34:56.789+00']], `run ${i + 1}`);
    }
    await client.exec('deallocate all');
  });

  test("PostgreSQL's error is thrown by name as without, the session goes on, and a rollback keeps the statement", async () => {
    const statements = new PreparedStatements(client);
    const insert = 'insert into stmt_probe (id, note) values ($1, $2)';
    await statements.query(insert, [10, 'a']);
    await statements.query(insert, [11, 'b']);
    assert.equal(statements.size, 1);
    const err = await statements.query(insert, [10, 'again']).then(
      () => assert.fail('a duplicate key passed'),
      (e: unknown) => e as Error & { code?: string; constraint?: string; query?: string },
    );
    assert.equal(err.code, '23505');
    assert.equal(err.constraint, 'stmt_probe_pkey');
    assert.equal(err.query, insert);
    await client.exec('begin');
    await assert.rejects(statements.query(insert, [11, 'dup']), { code: '23505' });
    await assert.rejects(statements.query(insert, [12, 'c']), { code: '25P02' }, 'the transaction is aborted, as it would be');
    await client.exec('rollback');
    await statements.query(insert, [12, 'c']);
    assert.equal(statements.reused, 4);
    assert.deepEqual((await client.query('select id, note from stmt_probe where id >= 10 order by id')).rows, [
      { id: 10, note: 'a' },
      { id: 11, note: 'b' },
      { id: 12, note: 'c' },
    ]);
    // A text PostgreSQL cannot parse fails each time and is never kept.
    for (let i = 0; i < 3; i++) await assert.rejects(statements.query('selec $1::int', [1]), { code: '42601' });
    assert.equal(statements.size, 1);
    await client.exec('deallocate all');
  });

  test('at most the given number kept: the least recently used is closed in the session too', async () => {
    const statements = new PreparedStatements(client, { maxNamed: 2 });
    const texts = ['select $1::int + 1 as n', 'select $1::int + 2 as n', 'select $1::int + 3 as n'];
    for (const text of texts) for (let i = 0; i < 2; i++) await statements.query(text, [i]);
    await statements.query(texts[1] as string, [5]); // used last but one: the first text is the least recent
    assert.equal(statements.size, 2);
    assert.deepEqual(await preparedTexts(client), [texts[1], texts[2]]);
    assert.deepEqual((await statements.query(texts[0] as string, [1])).rows, [{ n: 2 }], 'an evicted text runs again as a new one');
    await client.exec('deallocate all');
  });

  test("in the worker, a usage flush's upserts are prepared from the second flush on, and sum as before", async () => {
    const worker = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    try {
      await worker.db.execute(sql`insert into users (id, email, name, password_hash, tier) values ('u-stmt', 'u-stmt@example.com', 'U', 'x', 'pro')`);
      const config = loadConfig({ env: { LOG_LEVEL: 'silent' } });
      const prepared = async () => rowsOf(await worker.db.execute(sql`select statement from pg_prepared_statements`)).map((r) => String(r.statement));
      const upserts = (texts: string[]) => TABLES.filter((table) => texts.some((t) => t.includes(`insert into ${table} `)));
      for (let flush = 0; flush < 3; flush++) {
        const analytics = new AnalyticsRecorder(['eth_chainId']);
        const usage = new UsageService({ db: worker.db, settings: config.usage, logger: pino({ level: 'silent' }), analytics });
        const event = { userId: 'u-stmt', keyId: 'k-stmt', network: 'native-mainnet', method: 'eth_chainId', computeUnits: 1 };
        usage.record(event);
        analytics.call(event.userId, event.keyId, event.network, event.method, 1, 0, 1 + flush * 10);
        await usage.flush();
        await usage.close();
        // Run once, a text is not prepared; run a second time, it is.
        assert.deepEqual(upserts(await prepared()), flush === 0 ? [] : TABLES, `after flush ${flush + 1}`);
      }
      const rows = rowsOf(await worker.db.execute(sql`select requests, latency from analytics_account_hours where user_id = 'u-stmt'`));
      assert.equal(rows.length, 1);
      assert.equal(Number(rows[0]?.requests), 3);
      // Three latencies (1, 11 and 21 ms), three buckets of one call each.
      assert.deepEqual(decodeLatency(rows[0]?.latency as Uint8Array).filter((n) => n > 0), [1, 1, 1]);
    } finally {
      await worker.close();
    }
  });
});

const TABLES = ['analytics_hours', 'analytics_days', 'analytics_account_hours', 'analytics_account_days', 'analytics_account_day_parts', 'analytics_key_hours', 'usage_daily'];
