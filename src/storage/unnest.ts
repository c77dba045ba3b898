// Rows written as one array parameter per column (`unnest`), so a flush's statement text is fixed.
import { type SQL, sql } from 'drizzle-orm';

/** One column of `unnest`: its name in the statement, its PostgreSQL type, and its value in a row. */
export type Column<R> = readonly [name: string, type: 'text' | 'date' | 'bigint' | 'int' | 'timestamptz', of: (row: R) => string | number | null];

/**
 * Rows as one array parameter per column, for `insert ... select ... from ${unnest(...)}`:
 * `unnest($1::text[], $2::date[], ...) as v(a, b, ...)`. For scale (docs/scaling.md): the statement's text and its
 * number of parameters do not grow with its rows, so building it costs the event loop next to
 * nothing (a `values` list of 1,000 analytics rows, 100 parameters each, took 200 ms of the
 * loop to build), and the driver sends one array per column instead of a parameter per value.
 */
export function unnest<R>(rows: readonly R[], columns: ReadonlyArray<Column<R>>): SQL {
  const arrays = columns.map(() => new Array<string | number | null>(rows.length));
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as R;
    for (let c = 0; c < columns.length; c++) (arrays[c] as Array<string | number | null>)[i] = (columns[c] as Column<R>)[2](row);
  }
  const params = sql.join(
    columns.map(([, type], c) => sql`${sql.param(arrays[c])}::${sql.raw(type)}[]`),
    sql`, `,
  );
  return sql`unnest(${params}) as v(${sql.raw(columns.map(([name]) => name).join(', '))})`;
}
