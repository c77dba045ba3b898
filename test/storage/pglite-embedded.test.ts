// alone: it measures this process's resident memory while the database is created, which the
// tests of other files in the same process (large answers held in memory) would grow.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { loadConfig } from '../../src/config/load.ts';
import { type EmbeddedOpenStep, openStorage, type Storage } from '../../src/storage/db.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';
import { launchGateway, spawnGateway } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

async function setting(s: Storage, name: 'shared_buffers' | 'timezone'): Promise<string> {
  const res = await s.db.execute(sql.raw(`show ${name}`));
  return String((res as { rows: Array<Record<string, unknown>> }).rows[0]?.[name]);
}

// Choices beyond the contract, Configuration (docs/decisions.md): embedded storage runs with a
// 32 MiB page cache, not PGlite's 128 MiB, which it would hold in memory for the whole run.
describe("embedded storage's page cache (storage.embeddedSharedBuffersMb)", () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'junction-pglite-memory-'));
  after(() => rmSync(parent, { recursive: true, force: true }));

  test('without the option openStorage uses 32 MiB too; in memory (tests) as on disk', async () => {
    const storage = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    try {
      assert.equal(await setting(storage, 'shared_buffers'), '32MB');
    } finally {
      await storage.close();
    }
  });

  test("a data folder opens with the shipped config's 32 MiB, or another size; its postgresql.conf stays as initdb wrote it", async () => {
    const config = loadConfig({ env: {} });
    assert.equal(config.storage.embeddedSharedBuffersMb, 32);
    const dataDir = path.join(parent, 'data');
    // Read from this thread's isolate, not the process's RSS: the open database's own worker (its
    // WebAssembly memory, +209 MB of RSS with another test process busy beside it) is not counted,
    // so the bound does not follow the load. Measured: +0.05 MB here, +629 MB with initdb in this thread.
    const before = process.memoryUsage().external;
    const created = await openStorage({ dataDir, sharedBuffersMb: config.storage.embeddedSharedBuffersMb });
    try {
      // initdb ran in a worker thread, whose memory (WebAssembly) went back when it ended; in this
      // thread it would stay until some garbage collection.
      const grown = (process.memoryUsage().external - before) / 2 ** 20;
      assert.ok(grown < 100, `this thread's external memory grew by ${Math.round(grown)} MB creating the database`);
      assert.equal(await setting(created, 'shared_buffers'), '32MB');
    } finally {
      await created.close();
    }
    const conf = path.join(dataDir, 'pglite', 'postgresql.conf');
    const written = readFileSync(conf, 'utf8');
    const first = await openStorage({ dataDir, sharedBuffersMb: 16 });
    let zone: string;
    try {
      assert.equal(await setting(first, 'shared_buffers'), '16MB');
      zone = await setting(first, 'timezone');
    } finally {
      await first.close();
    }
    // Set on the command line: the file keeps initdb's settings (a rewritten one would lose its time zone).
    assert.equal(readFileSync(conf, 'utf8'), written);
    assert.match(written, /^timezone\s*=/m);
    const again = await openStorage({ dataDir, sharedBuffersMb: 48 });
    try {
      assert.equal(await setting(again, 'shared_buffers'), '48MB');
      assert.equal(await setting(again, 'timezone'), zone);
    } finally {
      await again.close();
    }
  });

  test('a size outside 1-4096 MiB stops the start with the setting named', () => {
    const file = path.join(parent, 'config.json');
    for (const bad of [0, 4097, 1.5, '32']) {
      writeFileSync(file, JSON.stringify({ storage: { embeddedSharedBuffersMb: bad } }));
      assert.throws(() => loadConfig({ env: {}, configFile: file }), /storage\.embeddedSharedBuffersMb/, `value ${JSON.stringify(bad)}`);
    }
    writeFileSync(file, JSON.stringify({ storage: { embeddedSharedBuffersMb: 256 } }));
    assert.equal(loadConfig({ env: {}, configFile: file }).storage.embeddedSharedBuffersMb, 256);
  });
});

describe('opening a new data folder', () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'junction-pglite-new-'));
  after(() => rmSync(parent, { recursive: true, force: true }));

  test("PGlite's WebAssembly is compiled once for creating and running the database, by the gateway's thread", () => {
    // A process of its own, with a module loaded before anything (also in its worker threads) that
    // writes down every WebAssembly compile and instantiation, and whether it was given bytes to compile.
    const counter = path.join(parent, 'count-wasm.mjs');
    const log = path.join(parent, 'wasm.log');
    writeFileSync(
      counter,
      `import { isMainThread } from 'node:worker_threads';
import { appendFileSync } from 'node:fs';
for (const name of ['compile', 'instantiate', 'compileStreaming', 'instantiateStreaming']) {
  const original = WebAssembly[name];
  WebAssembly[name] = function (source, ...rest) {
    const bytes = source instanceof WebAssembly.Module ? 0 : (source?.byteLength ?? -1);
    appendFileSync(${JSON.stringify(log)}, (isMainThread ? 'main' : 'worker') + ' ' + name + ' ' + bytes + '\\n');
    return original.call(this, source, ...rest);
  };
}
`,
    );
    const code = `import { openStorage } from ${JSON.stringify(path.resolve('src/storage/db.ts'))};
const s = await openStorage({ dataDir: ${JSON.stringify(path.join(parent, 'data'))} });
await s.close();`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--import', counter, '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(run.status, 0, run.stderr.slice(-2000));
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    // PGlite's module is the one of several MB (initdb brings a small one of its own).
    const big = lines.filter((l) => Number(l.split(' ')[2]) > 4 * 2 ** 20);
    assert.equal(big.length, 1, `compiled from bytes more than once:\n${lines.join('\n')}`);
    assert.match(big[0]!, /^main compile /);
    // Both workers (the one that creates the database, the one that runs it) start from that module.
    assert.ok(lines.filter((l) => /^worker instantiate 0$/.test(l)).length >= 2, lines.join('\n'));
  });

  test('a start that waits long on embedded storage is told, with the step it is on', async () => {
    const steps: EmbeddedOpenStep[] = [];
    const storage = await openStorage({ dataDir: path.join(parent, 'slow'), onSlowOpen: (step) => steps.push(step), slowOpenMs: 50 });
    await storage.close();
    // Every step of a first start takes more than 50 ms on any machine, and each is named in turn.
    assert.deepEqual([...new Set(steps)], ['creating the database (first start)', 'starting the database', 'applying migrations']);
    const told = steps.length;
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(steps.length, told, 'nothing is told once the database is open');
  });
});

describe("embedded storage's threads", () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'junction-pglite-threads-'));
  after(() => rmSync(parent, { recursive: true, force: true }));
  /** The names of this process's threads (/proc/self/task/<tid>/comm). */
  const threads = () => readdirSync('/proc/self/task').map((tid) => readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim());

  // Node 24 names a worker's thread after the worker (Node 20 and 22 leave every one "node").
  test('are named: storage-init while a first start creates the database, storage while it runs', { skip: Number(process.versions.node.split('.')[0]) < 24 && 'this Node names no worker threads' }, async () => {
    const whileCreating: string[][] = [];
    const storage = await openStorage({
      dataDir: path.join(parent, 'data'),
      onSlowOpen: (step) => {
        if (step === 'creating the database (first start)') whileCreating.push(threads());
      },
      slowOpenMs: 50,
    });
    try {
      assert.ok(whileCreating.length > 0, 'creating the database took over 50 ms');
      // A sample taken as the init thread starts or ends may miss it (the thread is created, or
      // gone, before the main thread hears of it): one sample with it suffices, and none may have
      // the running database's thread yet.
      assert.ok(whileCreating.some((names) => names.includes('storage-init')), JSON.stringify(whileCreating));
      assert.ok(!whileCreating.some((names) => names.includes('storage')), JSON.stringify(whileCreating));
      const running = threads();
      assert.ok(running.includes('storage'), running.join(', '));
      assert.ok(!running.includes('storage-init'), running.join(', '));
    } finally {
      await storage.close();
    }
    assert.ok(!threads().includes('storage'), 'the thread ends with the storage');
  });
});

describe('a stop while the first start creates the database', () => {
  const parent = mkdtempSync(path.join(tmpdir(), 'junction-pglite-first-'));
  after(() => rmSync(parent, { recursive: true, force: true }));

  test('a stop signal sent twice to the process group stops it cleanly; the next start makes the database and serves', async () => {
    const dataDir = path.join(parent, 'data');
    const { child, output, exited } = await launchGateway({ env: { DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '' }, detached: true });
    try {
      // The database is being made: files appear in the data folder (beside secrets.json).
      const making = () => readdirSync(dataDir, { withFileTypes: true }).some((e) => e.isDirectory() && readdirSync(path.join(dataDir, e.name)).length > 3);
      await waitFor(() => (existsSync(dataDir) && making() ? true : undefined), { timeoutMs: 60_000, intervalMs: 5, what: 'the database being made' });
      assert.doesNotMatch(output(), /storage ready/, 'stopped before the database was ready');
      process.kill(-(child.pid as number), 'SIGTERM');
      process.kill(-(child.pid as number), 'SIGTERM');
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    const { code } = await exited;
    assert.equal(code, 0, output().slice(-2000));
    assert.match(output(), /"msg":"stopped"/);

    const gw = await spawnGateway({ env: { DATA_DIR: dataDir } });
    try {
      const res = await fetch(`${gw.url}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'first@example.com', password: 'long enough pw', name: 'F' }),
      });
      assert.equal(res.status, 200, await res.text());
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  });
});
