// `npm run docs:config`: writes docs/config-reference.md from the config schema and defaults.
// `--check` only says whether the file is up to date (exit 1 when not).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configReference } from '../src/config/reference.ts';

const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/config-reference.md');
const text = configReference();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {}
  if (current !== text) {
    process.stderr.write('docs/config-reference.md is out of date: run npm run docs:config\n');
    process.exit(1);
  }
} else {
  writeFileSync(file, text);
  process.stdout.write(`wrote ${path.relative(process.cwd(), file)}\n`);
}
