// The write-behind buffers' shared rules (usage, usage/service.ts, and analytics,
// analytics/recorder.ts): rows held in memory by id until a flush stores them. A batch whose flush
// failed is merged back with the rows recorded meanwhile, and a worker's handed-over rows are
// absorbed, both under C48's cap ("usage and analytics are held in memory (up to a bounded amount,
// with a metric) and written when the database returns").

/** A held row as the recorders' index reaches it: by key and network (then by method as called). */
export interface HeldRow {
  keyId: string;
  network: string;
}

/** The rows being counted into, by key, network and method as called: no string built per call. */
export type RowIndex<R> = Map<string, Map<string, Map<string, R>>>;

/**
 * Puts a batch that could not be stored back, added to `held` (what was recorded meanwhile), and
 * answers the map to hold from now on. Rows merge, so memory grows with distinct rows, not calls;
 * past `maxRows` the oldest rows are dropped, each told to `dropped` (C48: memory stays bounded
 * while storage is away). The batch's rows are older than the rows recorded meanwhile, so they go
 * first, each keeping its place when it was counted into meanwhile too (the meanwhile row, the one
 * the index points to, takes the batch's counts through `add`). Always, not only past `maxRows`:
 * the map's order is what the next failure's cap goes by, and a meanwhile row left ahead of older
 * ones would be dropped before them, and an old one kept (and counted into) instead.
 */
export function mergeBack<R extends HeldRow>(
  held: Map<string, R>,
  batch: Map<string, R>,
  index: RowIndex<R>,
  maxRows: number,
  add: (into: R, from: R) => void,
  dropped: (row: R) => void,
): Map<string, R> {
  // Rebuilt with the failed batch's rows first: the map's order is then oldest first.
  const ordered = new Map<string, R>();
  for (const [id, r] of batch) {
    const now = held.get(id);
    if (now) add(now, r);
    ordered.set(id, now ?? r);
  }
  for (const [id, r] of held) if (!ordered.has(id)) ordered.set(id, r);
  // Drops rows from the front of the map (the oldest) until at most `maxRows` are left.
  for (const [id, r] of ordered) {
    if (ordered.size <= maxRows) break;
    ordered.delete(id);
    // A row still counted into through the index would be lost unseen: it leaves the index too.
    const byMethod = index.get(r.keyId)?.get(r.network);
    if (byMethod) for (const [m, row] of byMethod) if (row === r) byMethod.delete(m);
    dropped(r);
  }
  return ordered;
}

/**
 * Adds the rows a worker handed over (the primary's side, usage/handoff.ts) to `held`: counts of a
 * row held go into it through `add`; a new row goes last while fewer than `maxRows` are held, else
 * it is dropped and told to `dropped` (C48: new rows are dropped, not held ones).
 */
export function absorb<R>(held: Map<string, R>, rows: Iterable<readonly [string, R]>, maxRows: number, add: (into: R, from: R) => void, dropped: (row: R) => void): void {
  for (const [id, r] of rows) {
    const now = held.get(id);
    if (now) add(now, r);
    else if (held.size < maxRows) held.set(id, r);
    else dropped(r);
  }
}
