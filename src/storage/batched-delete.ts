// Retention sweeps that delete in bounded batches, on PostgreSQL and PGlite alike.
import { type SQL, sql } from 'drizzle-orm';
import type { Db } from './db.ts';

/** Rows one statement of a sweep deletes: short transactions and locks, however much is past retention. */
export const SWEEP_BATCH_ROWS = 10_000;

/** The rows a statement affected, on node-postgres and PGlite alike. */
export const affectedRows = (r: unknown): number =>
  Number((r as { rowCount?: number }).rowCount ?? (r as { affectedRows?: number }).affectedRows ?? 0);

/**
 * Deletes the rows of `table` matching `where` in statements of at most `batch` rows each (for scale, docs/scaling.md:
 * a first sweep over years of history must neither hold one huge transaction nor lock the table
 * against the flushes). Returns the rows deleted. `where` should be served by an index of the table.
 */
export async function deleteInBatches(db: Db, table: string, where: SQL, batch = SWEEP_BATCH_ROWS): Promise<number> {
  let total = 0;
  for (;;) {
    const r: unknown = await db.execute(
      sql`delete from ${sql.raw(table)} where ctid = any(array(select ctid from ${sql.raw(table)} where ${where} limit ${batch}))`,
    );
    const n = affectedRows(r);
    total += n;
    if (n < batch) return total;
  }
}
