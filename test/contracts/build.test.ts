// C42: every contract's checked-in artifact (contracts/build/*.json) is exactly what the solc
// package makes of its source today: each contracts/*.sol is recompiled by
// scripts/compile-contracts.mjs into a temporary directory and compared file by file.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadArtifact } from '../../src/onchain/artifacts.ts';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CONTRACTS = path.join(root, 'contracts');
const BUILD = path.join(CONTRACTS, 'build');
const SCRIPT = path.join(root, 'scripts/compile-contracts.mjs');
const FIX = 'run `npm run compile:contracts` and commit contracts/build/';

const jsonFiles = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
const solFiles = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.sol')).sort();

async function compile(contracts: string, out: string): Promise<void> {
  await run(process.execPath, [SCRIPT, '--contracts', contracts, '--out', out], { cwd: root });
}

describe('contract artifacts', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'junction-contracts-'));
  const fresh = path.join(work, 'fresh');

  before(async () => {
    await compile(CONTRACTS, fresh);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('every checked-in artifact equals a fresh compile of its source, and none is missing or left over', () => {
    const compiled = jsonFiles(fresh);
    const checkedIn = jsonFiles(BUILD);
    assert.ok(compiled.length > 0, 'at least one contract compiled');
    assert.deepEqual(checkedIn, compiled, `artifacts missing or left over: ${FIX}`);
    for (const file of compiled) {
      const want = readFileSync(path.join(fresh, file), 'utf8');
      const have = readFileSync(path.join(BUILD, file), 'utf8');
      assert.ok(have === want, `contracts/build/${file} differs from its source: ${FIX}`);
    }
  });

  test('every source produced at least one artifact or is only interfaces and libraries', () => {
    const sourcesWithArtifacts = new Set(jsonFiles(fresh).map((f) => (JSON.parse(readFileSync(path.join(fresh, f), 'utf8')) as { sourceName: string }).sourceName));
    for (const sol of solFiles(CONTRACTS)) {
      if (sourcesWithArtifacts.has(sol)) continue;
      const text = readFileSync(path.join(CONTRACTS, sol), 'utf8');
      assert.ok(!/^\s*contract\s+\w+/m.test(text), `${sol} declares a contract but has no artifact: ${FIX}`);
    }
  });

  test('each artifact names its solc version, settings and the hash of its source', () => {
    for (const file of jsonFiles(BUILD)) {
      const a = JSON.parse(readFileSync(path.join(BUILD, file), 'utf8'));
      assert.equal(`${a.contractName}.json`, file);
      assert.match(a.solcVersion, /^0\.8\.\d+\+commit\./);
      assert.equal(a.settings.metadata.bytecodeHash, 'none', 'no metadata hash: comments and paths never change the bytecode');
      assert.ok(a.settings.evmVersion);
      assert.match(a.bytecode, /^0x[0-9a-f]+$/);
      assert.match(a.deployedBytecode, /^0x[0-9a-f]+$/);
      assert.match(a.sourceHash, /^sha256:[0-9a-f]{64}$/);
    }
  });

  test('the gateway loads an artifact as checked in', () => {
    const a = loadArtifact('DevPriceFeed');
    const file = JSON.parse(readFileSync(path.join(BUILD, 'DevPriceFeed.json'), 'utf8'));
    assert.equal(a.bytecode, file.bytecode);
    assert.deepEqual(a.abi, file.abi);
    assert.throws(() => loadArtifact('NoSuchContract'), /compile:contracts/);
  });

  test('a changed source no longer matches its artifact (the check can fail)', async () => {
    const changed = path.join(work, 'changed');
    const out = path.join(work, 'changed-build');
    rmSync(changed, { recursive: true, force: true });
    mkdirSync(changed, { recursive: true });
    for (const sol of solFiles(CONTRACTS)) copyFileSync(path.join(CONTRACTS, sol), path.join(changed, sol));
    const feed = path.join(changed, 'DevPriceFeed.sol');
    writeFileSync(feed, readFileSync(feed, 'utf8').replace('uint256 public constant version = 4;', 'uint256 public constant version = 5;'));
    await compile(changed, out);
    const want = readFileSync(path.join(out, 'DevPriceFeed.json'), 'utf8');
    assert.notEqual(readFileSync(path.join(BUILD, 'DevPriceFeed.json'), 'utf8'), want);
  });
});
