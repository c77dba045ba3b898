import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migratedPgliteImage } from '../../src/storage/db.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Changes with the PGlite version and with every migration file, so a stale image is never picked up. */
export function templateKey(): string {
  const h = createHash('sha256');
  h.update(readFileSync(path.join(root, 'node_modules/@electric-sql/pglite/package.json')));
  const dir = path.join(root, 'src/storage/migrations');
  for (const name of readdirSync(dir, { recursive: true }).map(String).sort()) {
    if (name.endsWith('.sql') || name.endsWith('.json')) h.update(name).update(readFileSync(path.join(dir, name)));
  }
  return h.digest('hex').slice(0, 16);
}

async function load(): Promise<Blob> {
  // Each test file runs in its own process: the image is kept on disk so that only the first
  // process pays for PGlite's initdb and the migrations. Written under a temporary name and
  // renamed, so a process never reads a half-written image.
  const file = path.join(tmpdir(), `junction-test-pglite-${templateKey()}.tar`);
  try {
    return new Blob([await readFile(file)]);
  } catch {
    // not made yet
  }
  const image = await migratedPgliteImage();
  const partial = `${file}.${process.pid}.partial`;
  try {
    await writeFile(partial, Buffer.from(await image.arrayBuffer()));
    await rename(partial, file);
  } catch {
    await rm(partial, { force: true }); // no cache this time; the image in hand still serves
  }
  return image;
}

let template: Promise<Blob> | undefined;

/**
 * The image of a new, migrated PGlite database that every in-memory test app starts from, made
 * once per process at most (PGlite's initdb takes seconds; copying the image a fraction of that).
 * Opening from it still runs the migrations, so an image older than them would be brought up
 * to date too.
 */
export function pgliteTemplate(): Promise<Blob> {
  template ??= load();
  return template;
}
