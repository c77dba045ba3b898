// For scale (docs/scaling.md): a flush passes its rows as one array parameter per column (src/storage/unnest.ts).
// Every value a row carries must reach the database exactly as it was, whatever the characters
// (array literals quote and escape them), NULL included, on both drivers.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Storage } from '../../src/storage/db.ts';
import { unnest } from '../../src/storage/unnest.ts';
import { openTestStorage } from '../support/storage.ts';
import { storageBackends } from '../support/services.ts';

const backends = await storageBackends();
/** Texts an array literal must quote or escape, and some that look like its keywords. */
const TEXTS = ['a"b', 'c\\d', '{e,f}', 'NULL', 'null', ' padded ', "it's", 'tab\there', 'new\nline', 'é€😀', '', ',', '"', '\\'];

for (const backend of backends) {
  describe(`rows as array parameters on ${backend.name}`, { skip: backend.skip }, () => {
    let storage: Storage;
    let close: (() => Promise<void>) | undefined;
    before(async () => {
      ({ storage, close } = await openTestStorage(backend.name));
    });
    after(async () => {
      await close?.();
    });

    test('texts, numbers past 2^32, dates, instants and NULLs arrive as given, in the rows’ order', async () => {
      const rows = TEXTS.map((text, i) => ({ text, n: i === 3 ? null : 2 ** 40 + i, day: `2026-01-${String(i + 1).padStart(2, '0')}`, at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() }));
      const res = await storage.db.execute(
        sql`select v.text, v.n::text as n, v.day::text as day, extract(epoch from v.at)::float8 as at from ${unnest(rows, [
          ['text', 'text', (r) => r.text],
          ['n', 'bigint', (r) => r.n],
          ['day', 'date', (r) => r.day],
          ['at', 'timestamptz', (r) => r.at],
        ])}`,
      );
      const got = (res as { rows: Array<{ text: string; n: string | null; day: string; at: number }> }).rows;
      assert.deepEqual(
        got.map((r) => [r.text, r.n, r.day, r.at * 1000]),
        rows.map((r) => [r.text, r.n === null ? null : String(r.n), r.day, Date.parse(r.at)]),
      );
    });

    test('no rows: a statement that selects nothing', async () => {
      const res = await storage.db.execute(sql`select count(*)::int as n from ${unnest([] as Array<{ a: string }>, [['a', 'text', (r) => r.a]])}`);
      assert.equal((res as { rows: Array<{ n: number }> }).rows[0]?.n, 0);
    });
  });
}
