// docs/config-reference.md is generated from the schema and the shipped defaults, so it cannot
// drift: this fails when the file differs from what `npm run docs:config` writes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { DEFAULT_CONFIG_FILE, ENV_SETTINGS } from '../../src/config/load.ts';
import { configReference } from '../../src/config/reference.ts';
import { ROOT } from '../support/process.ts';

const doc = readFileSync(`${ROOT}/docs/config-reference.md`, 'utf8');
const rows = doc
  .split('\n')
  .filter((l) => l.startsWith('| `'))
  .map((l) => l.split(/(?<!\\)\|/).map((c) => c.trim()));

/** Every path to a value in default.json: objects opened, lists and records of `networks`-like data not. */
function paths(v: unknown, prefix = ''): string[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.keys(v).length === 0) return [prefix];
  return Object.entries(v).flatMap(([k, x]) => paths(x, prefix ? `${prefix}.${k}` : k));
}

describe('the configuration reference', () => {
  test('docs/config-reference.md is what the generator writes (run npm run docs:config after changing the schema or defaults)', () => {
    assert.equal(doc, configReference(), 'docs/config-reference.md is out of date: run npm run docs:config');
  });

  test('every setting of config/default.json has a row with its default', () => {
    const defaults = JSON.parse(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as Record<string, unknown>;
    const byPath = new Map(rows.map((r) => [(r[1] as string).replace(/`/g, '').replace('&nbsp;(optional)', ''), r]));
    // Records keyed by names (methods.native, computeUnits, fixedUsdPrices...) have one row for the whole.
    const records = [...byPath.keys()];
    for (const p of paths(defaults)) {
      const row = byPath.get(p) ?? byPath.get(records.find((r) => p.startsWith(`${r}.`)) ?? '');
      assert.ok(row, `a row for ${p}`);
      if (byPath.has(p) && !/entries in config|networks below/.test(row[2] as string)) {
        const value = p.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], defaults);
        assert.equal(row[2], `\`${JSON.stringify(value)}\``, `the default of ${p}`);
      }
    }
  });

  test('every row says what the setting means and what is allowed, in words', () => {
    for (const r of rows) {
      assert.ok((r[4] as string).length > 0, `allowed values of ${r[1]}`);
      assert.doesNotMatch(r[4] as string, /union|\^|\$/, `no schema jargon for ${r[1]}`);
      assert.ok((r[5] as string).length > 0, `a meaning for ${r[1]}`);
    }
  });

  test('every environment variable is listed beside its setting, and the README and docs/configuration.md link the reference', () => {
    for (const e of ENV_SETTINGS) {
      const row = rows.find((r) => (r[1] as string).replace(/`/g, '').replace('&nbsp;(optional)', '') === e.path);
      assert.ok(row && (row[3] as string).includes(`\`${e.name}\``), `${e.name} beside ${e.path}`);
    }
    for (const name of ['UPSTREAM_<SLUG>', 'UPSTREAM_WS_<SLUG>', 'FAUCET_PRIVATE_KEY_<SLUG>']) assert.ok(doc.includes(`\`${name}\``), name);
    assert.match(readFileSync(`${ROOT}/README.md`, 'utf8'), /\(docs\/config-reference\.md\)/);
    assert.match(readFileSync(`${ROOT}/docs/configuration.md`, 'utf8'), /\(config-reference\.md\)/);
  });
});
