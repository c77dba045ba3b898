// SQL statements prepared once by name and run with their placeholders filled.
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from './db.ts';

/** What a prepared statement answers: the driver's rows, as `db.execute` gives them. */
export interface PreparedRows {
  rows: unknown[];
}

const dialect = new PgDialect();

/**
 * A statement written in SQL (not with the query builder), prepared once under `name`, its
 * variable parts `sql.placeholder(...)`s filled at each call (docs/scaling.md). On PostgreSQL the driver
 * parses it once per connection and the server keeps its plan: a cold analytics read planned
 * in 1.1-1.3 ms per call and ran in 0.3-0.6 ms; prepared, after five calls it is planned no more
 * (`explain (analyze, summary)`). PGlite runs it as any other statement. Names are one per statement text:
 * two different texts under one name fail on PostgreSQL.
 */
export function prepareSql(db: Db, name: string, statement: SQL): (values: Record<string, unknown>) => Promise<PreparedRows> {
  const prepared = db._.session.prepareQuery(dialect.sqlToQuery(statement), undefined, name, false);
  return (values) => prepared.execute(values) as Promise<PreparedRows>;
}
