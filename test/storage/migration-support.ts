// Helpers of the migration workflow's tests (migrations.test.ts): a throwaway copy of the project
// for `npm run db:generate`, the migrations and snapshots as stored, and a description of a
// database's tables that two databases can be compared by.
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { DrizzleSnapshotJSON } from 'drizzle-kit/api';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Where drizzle.config.ts writes migrations (its `out`), relative to the project. */
export const MIGRATIONS_DIR = 'src/storage/migrations';

export interface JournalEntry {
  idx: number;
  when: number;
  tag: string;
}

export function journal(migrations: string): JournalEntry[] {
  return (JSON.parse(readFileSync(path.join(migrations, 'meta/_journal.json'), 'utf8')) as { entries: JournalEntry[] }).entries;
}

/** The statements of one migration file, split as Drizzle's migrator splits them. */
export function statements(migrations: string, tag: string): string[] {
  return readFileSync(path.join(migrations, `${tag}.sql`), 'utf8')
    .split('--> statement-breakpoint')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function snapshot(migrations: string, tag: string): DrizzleSnapshotJSON {
  return JSON.parse(readFileSync(path.join(migrations, 'meta', `${tag.slice(0, 4)}_snapshot.json`), 'utf8')) as DrizzleSnapshotJSON;
}

/** Every file under `dir` (relative names, sorted) with its content. */
export function filesUnder(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(dir, { recursive: true }).map(String).sort()) {
    const full = path.join(dir, name);
    try {
      out.set(name, readFileSync(full, 'utf8'));
    } catch {
      // a directory
    }
  }
  return out;
}

/**
 * A copy of the project's sources, drizzle.config.ts and package.json in a temporary directory
 * (node_modules linked), where `npm run db:generate` runs as in the project without touching it.
 */
export class ProjectCopy {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'junction-migrations-'));

  constructor() {
    cpSync(path.join(ROOT, 'src'), path.join(this.dir, 'src'), { recursive: true });
    for (const f of ['drizzle.config.ts', 'package.json', 'tsconfig.json']) cpSync(path.join(ROOT, f), path.join(this.dir, f));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(this.dir, 'node_modules'), 'dir');
  }

  get migrations(): string {
    return path.join(this.dir, MIGRATIONS_DIR);
  }

  /** Replaces `from` (which must occur once) by `to` in one of the copy's files. */
  edit(file: string, from: string, to: string): void {
    const full = path.join(this.dir, file);
    const text = readFileSync(full, 'utf8');
    if (text.split(from).length !== 2) throw new Error(`${file}: expected one ${JSON.stringify(from)}`);
    writeFileSync(full, text.replace(from, to));
  }

  /** `npm run db:generate` in the copy; its output (stdout and stderr). */
  async generate(): Promise<string> {
    const { stdout, stderr } = await promisify(execFile)('npm', ['run', '--silent', 'db:generate'], { cwd: this.dir, env: { ...process.env, CI: '1' }, timeout: 60_000 });
    return `${stdout}${stderr}`;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A database to run SQL on: PGlite or a PostgreSQL connection. */
export interface SqlRunner {
  exec(sql: string): Promise<void>;
  rows(sql: string): Promise<Array<Record<string, unknown>>>;
}

/** Empties a database: no table, type or migration journal left. */
export async function emptyDatabase(db: SqlRunner): Promise<void> {
  await db.exec('drop schema if exists drizzle cascade; drop schema public cascade; create schema public;');
}

/**
 * What the database's `public` schema holds, one sorted line per thing: each column (type, not
 * null, default), constraint (primary key, foreign key with its actions, unique, check), index
 * (its full definition: columns, order, partial condition), enum, sequence and view. Two databases
 * with the same lines have the same tables, whatever made them. Column order is left out on
 * purpose: drizzle-kit compares columns by name, and a column added later comes last in the
 * database wherever the schema file has it.
 */
export async function describeSchema(db: SqlRunner): Promise<string[]> {
  const rows = await db.rows(`
    select 'column ' || c.relname || '.' || a.attname || ': ' || format_type(a.atttypid, a.atttypmod)
           || case when a.attnotnull then ' not null' else '' end
           || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') as line
      from pg_attribute a
      join pg_class c on c.oid = a.attrelid
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm') and a.attnum > 0 and not a.attisdropped
    union all
    select 'constraint ' || conrelid::regclass::text || '.' || conname || ': ' || pg_get_constraintdef(oid)
      from pg_constraint where connamespace = 'public'::regnamespace
    union all
    select 'index ' || indexname || ': ' || indexdef from pg_indexes where schemaname = 'public'
    union all
    select 'relation ' || relname || ': ' || relkind::text from pg_class
     where relnamespace = 'public'::regnamespace and relkind not in ('i', 't')
    union all
    select 'enum ' || t.typname || ': ' || string_agg(e.enumlabel, ',' order by e.enumsortorder)
      from pg_type t join pg_enum e on e.enumtypid = t.oid
     where t.typnamespace = 'public'::regnamespace group by t.typname`);
  return rows.map((r) => String(r.line)).sort();
}
