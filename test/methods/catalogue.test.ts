// C53: one method catalogue. It covers every method of the execution-apis specification, refuses
// the node-wallet methods with a reason, and no other module keeps a method list of its own.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';
import { loadConfig } from '../../src/config/load.ts';
import { catalogue, defaultComputeUnits, methodFacts, refusedWhy, STANDARD_METHODS } from '../../src/methods/catalogue.ts';
import { MethodPolicy } from '../../src/rpc/policy.ts';

/**
 * The method names of the specification's `src/eth/*.yaml` (ethereum/execution-apis at commit
 * 033ca6e69da000445840d2060ff47e5e56172a86, 2026-08-07). When the specification adds a method,
 * add it here and to the catalogue.
 */
const SPEC_METHODS = [
  'eth_accounts', 'eth_baseFee', 'eth_blobBaseFee', 'eth_blockNumber', 'eth_call', 'eth_capabilities', 'eth_chainId', 'eth_coinbase', 'eth_config',
  'eth_createAccessList', 'eth_estimateGas', 'eth_feeHistory', 'eth_fillTransaction', 'eth_gasPrice', 'eth_getBalance', 'eth_getBlockAccessList',
  'eth_getBlockByHash', 'eth_getBlockByNumber', 'eth_getBlockReceipts', 'eth_getBlockTransactionCountByHash', 'eth_getBlockTransactionCountByNumber',
  'eth_getCode', 'eth_getFilterChanges', 'eth_getFilterLogs', 'eth_getLogs', 'eth_getProof', 'eth_getStorageAt', 'eth_getStorageValues',
  'eth_getTransactionByBlockHashAndIndex', 'eth_getTransactionByBlockNumberAndIndex', 'eth_getTransactionByHash', 'eth_getTransactionCount',
  'eth_getTransactionReceipt', 'eth_maxPriorityFeePerGas', 'eth_newBlockFilter', 'eth_newFilter', 'eth_newPendingTransactionFilter',
  'eth_sendRawTransaction', 'eth_sendTransaction', 'eth_sign', 'eth_signTransaction', 'eth_simulateV1', 'eth_syncing', 'eth_uninstallFilter', 'net_version',
];
const NODE_WALLET = ['eth_accounts', 'eth_sign', 'eth_signTransaction', 'eth_sendTransaction', 'eth_coinbase'];

describe('the method catalogue covers the standard (C53)', () => {
  test('every method of the specification is in the catalogue, marked as such, and no other is', () => {
    for (const m of SPEC_METHODS) assert.equal(methodFacts(m)?.spec, true, m);
    const marked = [...catalogue()].filter((f) => f.spec).map((f) => f.name);
    assert.deepEqual(marked.sort(), [...SPEC_METHODS].sort());
  });

  test('every method of the specification is passed on every plan, except the node-wallet ones', () => {
    const policy = new MethodPolicy({ methods: loadConfig({ env: {} }).methods, wsHint: '/ws' });
    for (const m of SPEC_METHODS) {
      const err = policy.check(m, false, 'free');
      if (NODE_WALLET.includes(m)) {
        assert.equal(err?.code, -32601, m);
        assert.match(err?.message ?? '', /needs an account held by the node; sign in your app and use eth_sendRawTransaction/, m);
      } else assert.equal(err, null, `${m}: ${err?.message}`);
    }
  });

  test('methods.standard defaults to what the catalogue passes; a config file may still narrow it', () => {
    assert.deepEqual(loadConfig({ env: {} }).methods.standard, [...STANDARD_METHODS]);
    for (const m of ['eth_config', 'eth_getStorageValues', 'eth_capabilities', 'eth_baseFee', 'eth_getBlockAccessList', 'eth_fillTransaction']) assert.ok(STANDARD_METHODS.includes(m), m);
    assert.equal(refusedWhy('eth_getBalance'), null);
    assert.match(refusedWhy('anvil_mine') ?? '', /devnet control/);
  });

  test('each block parameter sits where the specification puts it, hash allowed where it allows one', () => {
    const where = (m: string) => methodFacts(m)?.blocks.map((b) => [b.at, b.hash]);
    assert.deepEqual(where('eth_getBalance'), [[1, true]]);
    assert.deepEqual(where('eth_getStorageAt'), [[2, true]]);
    assert.deepEqual(where('eth_getStorageValues'), [[1, true]]);
    assert.deepEqual(where('eth_getProof'), [[2, true]]);
    assert.deepEqual(where('eth_getBlockReceipts'), [[0, true]]);
    assert.deepEqual(where('eth_getBlockAccessList'), [[0, true]]);
    assert.deepEqual(where('eth_getBlockByNumber'), [[0, false]]);
    assert.deepEqual(where('eth_feeHistory'), [[1, false]]);
    assert.deepEqual(where('eth_simulateV1'), [[1, true]]);
  });
});

/** Every .ts file below `dir`. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sources(full));
    else if (name.endsWith('.ts')) out.push(full);
  }
  return out;
}

const METHOD_NAME = /^(eth|net|web3|debug|trace|txpool|nat|personal|admin|miner|engine)_[A-Za-z0-9_]+$/;

/** Array, object and call literals of a file that hold two or more method names (elements, keys or pair keys). */
function methodLists(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const nameOf = (n: ts.Node): string | null => {
    if (ts.isStringLiteralLike(n) && METHOD_NAME.test(n.text)) return n.text;
    if ((ts.isPropertyAssignment(n) || ts.isShorthandPropertyAssignment(n)) && n.name && (ts.isIdentifier(n.name) || ts.isStringLiteralLike(n.name)) && METHOD_NAME.test(n.name.text)) return n.name.text;
    // A [name, value] pair, as Map constructors take.
    if (ts.isArrayLiteralExpression(n) && n.elements[0] && ts.isStringLiteralLike(n.elements[0]) && METHOD_NAME.test(n.elements[0].text)) return n.elements[0].text;
    return null;
  };
  const visit = (n: ts.Node): void => {
    const items = ts.isArrayLiteralExpression(n) ? n.elements : ts.isObjectLiteralExpression(n) ? n.properties : null;
    if (items) {
      const names = items.map(nameOf).filter((x): x is string => x !== null);
      if (new Set(names).size >= 2) found.push(`${path.relative(process.cwd(), file)}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1} ${names.slice(0, 3).join(', ')}`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** Files that name several methods for what they do, not as facts about them; each with why. */
const NOT_FACTS: Readonly<Record<string, string>> = {
  'src/balance/read.ts': 'the calls one balance batch sends',
  'src/devnet/xdpos.ts': "the devnet's own node, which implements the native chain's methods",
  'src/rpc/dispatch/native.ts': 'the prose of what each nat_* method takes and answers, for the docs',
};

describe('one place per fact (C53)', () => {
  test('no module outside src/methods/ keeps a list of methods of its own', () => {
    const root = path.resolve(import.meta.dirname, '../../src');
    const lists = sources(root)
      .filter((f) => !f.startsWith(path.join(root, 'methods') + path.sep) && NOT_FACTS[path.relative(path.dirname(root), f)] === undefined)
      .flatMap(methodLists);
    assert.deepEqual(lists, []);
  });

  test('the check finds a method list where there is one', () => {
    const sample = path.resolve(import.meta.dirname, '../../src/methods/catalogue.ts');
    assert.ok(methodLists(sample).length > 0);
  });
});

describe('compute units (C10)', () => {
  test('a tracer weighs more than a simple read: every debug_* and trace_* method costs more than 1', () => {
    const tracers = [...catalogue()].filter((f) => /^(debug|trace)_/.test(f.name));
    assert.ok(tracers.length >= 10, `${tracers.length} tracers`);
    for (const f of tracers) assert.ok((f.cu ?? 1) > 1, `${f.name} costs ${f.cu ?? 1}`);
  });

  test("docs/plans.md's table lists every weight the catalogue sets, and no other", () => {
    const doc = readFileSync(path.resolve(import.meta.dirname, '../../docs/plans.md'), 'utf8');
    const listed: Record<string, number> = {};
    for (const [, cu, methods] of doc.matchAll(/^\| (\d+) \| (`.*`) \|$/gm)) for (const [, m] of (methods as string).matchAll(/`(\w+)`/g)) listed[m as string] = Number(cu);
    assert.deepEqual(listed, defaultComputeUnits());
  });
});
