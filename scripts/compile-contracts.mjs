#!/usr/bin/env node
// `npm run compile:contracts`: compiles every contracts/*.sol with the npm `solc` package into
// contracts/build/<ContractName>.json ({contractName, sourceName, abi, bytecode, deployedBytecode,
// solcVersion, settings, sourceHash}). The artifacts are checked in and the gateway loads them at
// run time; test/contracts/build.test.ts recompiles and fails when one differs (C42).
//
// The output depends on the sources and the solc version only: fixed optimizer settings, no
// metadata hash in the bytecode (`bytecodeHash: 'none'`, so paths and comments do not change it),
// sorted keys and a trailing newline.
//
//   node scripts/compile-contracts.mjs [--contracts DIR] [--out DIR]
//
// --contracts: where the .sol files are (default contracts/); --out: where artifacts go (default
// contracts/build/; the test writes to a temporary directory and compares). Artifacts in --out
// that no source produces any more are removed.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import solc from 'solc';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The compiler settings of every artifact. `evmVersion` cancun: anvil runs it (its default
 * hardfork is newer) and so does every mainnet in the default config.
 */
export const SETTINGS = Object.freeze({
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  metadata: { bytecodeHash: 'none' },
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
});

/** Every .sol file directly in `dir`, sorted, as { name, text }. */
function readSources(dir) {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sol'))
    .sort()
    .map((name) => ({ name, text: readFileSync(path.join(dir, name), 'utf8') }));
}

/** JSON with object keys sorted at every level, two-space indented, newline at the end. */
function stableJson(value) {
  const sort = (v) => {
    if (Array.isArray(v)) return v.map(sort);
    if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])]));
    return v;
  };
  return `${JSON.stringify(sort(value), null, 2)}\n`;
}

/**
 * Compiles every source of `dir` in one solc run (so that they may import one another) and
 * returns the artifacts as { [fileName]: jsonText }. Throws with solc's messages on an error.
 */
export function compileAll(dir) {
  const sources = readSources(dir);
  if (sources.length === 0) return {};
  const input = {
    language: 'Solidity',
    sources: Object.fromEntries(sources.map((s) => [s.name, { content: s.text }])),
    settings: SETTINGS,
  };
  const findImports = (p) => {
    try {
      return { contents: readFileSync(path.join(dir, p), 'utf8') };
    } catch {
      return { error: `not found: ${p}` };
    }
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(`solc:\n${errors.map((e) => e.formattedMessage ?? e.message).join('\n')}`);
  const solcVersion = solc.version();
  const { outputSelection: _ignored, ...settings } = SETTINGS;
  const out = {};
  for (const s of sources) {
    const sourceHash = `sha256:${createHash('sha256').update(s.text).digest('hex')}`;
    for (const [contractName, c] of Object.entries(output.contracts?.[s.name] ?? {})) {
      const bytecode = c.evm?.bytecode?.object ?? '';
      if (bytecode === '') continue; // interfaces and abstract contracts have nothing to deploy
      const file = `${contractName}.json`;
      if (out[file]) throw new Error(`two contracts are named ${contractName}: artifact names must be unique`);
      out[file] = stableJson({
        contractName,
        sourceName: s.name,
        abi: c.abi,
        bytecode: `0x${bytecode}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
        solcVersion,
        settings,
        sourceHash,
      });
    }
  }
  return out;
}

/** Writes the artifacts of `contractsDir` into `outDir` and removes stale ones; returns the file names. */
export function writeArtifacts(contractsDir, outDir) {
  const artifacts = compileAll(contractsDir);
  mkdirSync(outDir, { recursive: true });
  for (const [file, text] of Object.entries(artifacts)) writeFileSync(path.join(outDir, file), text);
  for (const f of readdirSync(outDir)) {
    if (f.endsWith('.json') && !(f in artifacts)) rmSync(path.join(outDir, f));
  }
  return Object.keys(artifacts).sort();
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { contracts: { type: 'string' }, out: { type: 'string' } } });
  const contractsDir = path.resolve(values.contracts ?? path.join(ROOT, 'contracts'));
  const outDir = path.resolve(values.out ?? path.join(contractsDir, 'build'));
  try {
    const started = Date.now();
    const files = writeArtifacts(contractsDir, outDir);
    console.log(`compiled ${files.length} contract(s) with solc ${solc.version()} in ${Date.now() - started} ms: ${files.join(', ')}`);
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  }
}
