import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { resolveSecrets } from '../../src/config/secrets.ts';
import { openStorage } from '../../src/storage/db.ts';

/** Every path under `root` (itself included) whose mode lets anyone but the owner in. */
function notOwnerOnly(root: string): string[] {
  const loose: string[] = [];
  const walk = (p: string) => {
    const st = statSync(p);
    const mode = st.mode & 0o777;
    const wanted = st.isDirectory() ? 0o700 : 0o600;
    if (mode !== wanted) loose.push(`${path.relative(root, p) || '.'} ${mode.toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(path.join(p, name));
  };
  walk(root);
  return loose;
}

describe('embedded storage and generated secrets are the owner’s only', () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'junction-data-'));
  after(() => rmSync(parent, { recursive: true, force: true }));

  test('a new DATA_DIR is 0700 and every directory in it 0700, every file 0600: PGlite files and secrets.json', async () => {
    const dataDir = path.join(parent, 'fresh', 'data');
    const config = loadConfig({ env: { DATA_DIR: dataDir } });
    resolveSecrets(config, dataDir);
    const storage = await openStorage({ dataDir });
    // Writes after opening (new tables' files, WAL) must not loosen anything either.
    await storage.ping();
    await storage.close();
    assert.ok(statSync(path.join(dataDir, 'secrets.json')).isFile(), 'secrets were generated');
    assert.ok(readdirSync(path.join(dataDir, 'pglite')).length > 5, 'PGlite wrote its files');
    assert.deepEqual(notOwnerOnly(dataDir), []);
  });

  test('an existing tree made with loose modes is tightened when opened again', async () => {
    const dataDir = path.join(parent, 'older');
    const config = loadConfig({ env: { DATA_DIR: dataDir } });
    resolveSecrets(config, dataDir);
    await (await openStorage({ dataDir })).close();
    // As an earlier version left it: everything readable and writable by anyone.
    const loosen = (p: string) => {
      const st = statSync(p);
      chmodSync(p, st.isDirectory() ? 0o777 : 0o666);
      if (st.isDirectory()) for (const name of readdirSync(p)) loosen(path.join(p, name));
    };
    loosen(path.join(dataDir, 'pglite'));
    chmodSync(path.join(dataDir, 'secrets.json'), 0o644);

    resolveSecrets(config, dataDir);
    await (await openStorage({ dataDir })).close();
    assert.deepEqual(notOwnerOnly(dataDir), []);
  });
});
