// Modules are cut by concern, not by length: each file of src/ and web/src/ opens with a comment
// that says what it is for, so a reader knows its one job before reading its code.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.join(import.meta.dirname, '../..');
const modules = ['src', 'web/src'].flatMap((dir) =>
  readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.tsx?$/.test(f) && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f)),
);

test('every module of src/ and web/src/ opens with a comment saying its concern', () => {
  assert.ok(modules.length > 100, `found ${modules.length} modules`);
  const silent = modules.filter((f) => {
    const text = readFileSync(path.join(ROOT, f), 'utf8');
    // A comment of at least a few words before the first import or statement.
    const m = /^\s*(?:\/\/([^\n]*)|\/\*\*?([\s\S]*?)\*\/)/.exec(text);
    const words = (m?.[1] ?? m?.[2] ?? '').replace(/[*\s]+/g, ' ').trim().split(' ').filter(Boolean);
    return words.length < 4;
  });
  assert.deepEqual(silent, [], 'modules whose first lines do not say what they are for');
});
