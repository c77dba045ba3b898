// C50: what the contract allowlist reads on its own (src/keys/allowlist-checks.ts and the method
// catalogue's contract rules): the `to` of a signed transaction, and the docs table of how each
// method is judged. The allowlist on the RPC path, against anvil: test/keys/contract-allowlist.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { serializeTransaction } from 'viem';
import { loadConfig } from '../../src/config/load.ts';
import { rawTransactionTarget } from '../../src/keys/allowlist-checks.ts';
import { catalogue, type ContractRule, methodFacts } from '../../src/methods/catalogue.ts';

/** Method -> its contract rule, from the method catalogue (C50). */
const CONTRACT_RULES: ReadonlyMap<string, ContractRule> = new Map([...catalogue()].map((f) => [f.name, f.contract]));

describe('reading the to of a signed transaction', () => {
  const to = '0x00000000000000000000000000000000000000aa';
  const base = { chainId: 1, nonce: 7, gas: 21_000n, to, value: 1n } as const;
  const sig = { r: `0x${'11'.repeat(32)}`, s: `0x${'22'.repeat(32)}`, yParity: 1 } as const;

  test('legacy, EIP-2930 and EIP-1559 transactions give their to; deployments, set-code transactions and garbage give null', () => {
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, gasPrice: 1n }, { ...sig, v: 37n })), to);
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, gasPrice: 1n, type: 'eip2930', accessList: [] }, sig)), to);
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n }, sig)), to);
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, to: undefined, data: '0x6000', maxFeePerGas: 2n, maxPriorityFeePerGas: 1n }, sig)), null);
    const authorizationList = [{ address: to, chainId: 1, nonce: 0, ...sig }] as const;
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n, authorizationList, type: 'eip7702' }, sig)), null);
    const good = serializeTransaction({ ...base, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n }, sig);
    for (const bad of [good.slice(0, -2), `${good}00`, '0x', '0x05c0', 'f86b', 42, null]) assert.equal(rawTransactionTarget(bad), null, String(bad));
  });

  test('a blob transaction sent with its blobs gives its to; RLP broken anywhere, after the to too, gives null', () => {
    const blob = {
      maxFeePerGas: 2n,
      maxPriorityFeePerGas: 1n,
      maxFeePerBlobGas: 3n,
      blobVersionedHashes: [`0x01${'ab'.repeat(31)}`],
      type: 'eip4844',
    } as const;
    // eth_sendRawTransaction takes a type 3 as [fields, blobs, commitments, proofs] (EIP-4844's network form).
    const sidecars = [{ blob: `0x${'00'.repeat(131_072)}`, commitment: `0x${'c0'.repeat(48)}`, proof: `0x${'c0'.repeat(48)}` }] as const;
    const wrapped = serializeTransaction({ ...base, ...blob, sidecars }, sig);
    assert.equal(rawTransactionTarget(wrapped), to);
    assert.equal(rawTransactionTarget(serializeTransaction({ ...base, ...blob }, sig)), to, 'without its blobs, as blocks carry it');
    const good = serializeTransaction({ ...base, maxFeePerGas: 2n, maxPriorityFeePerGas: 1n }, sig);
    // The s of the signature (its last 32 bytes) made to claim 33: the list no longer adds up.
    const longS = `${good.slice(0, -66)}a1${good.slice(-64)}`;
    assert.equal(rawTransactionTarget(longS), null);
  });
});

describe('the docs table of how the contract list judges each method agrees with the code', () => {
  const doc = readFileSync(new URL('../../docs/rest-api.md', import.meta.url), 'utf8');
  const section = doc.split('### How the contract list judges each method')[1]?.split(/\n#{2,4} /)[0] ?? '';
  /** Each row's methods, in the table's order. */
  const rows = section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => [...(line.split('|')[1] ?? '').matchAll(/`([a-zA-Z0-9_]+)`/g)].map((m) => m[1] as string));

  test('the same methods, grouped the same way (one row per rule)', () => {
    assert.ok(rows.length > 0, 'the section of docs/rest-api.md holds the table');
    const inTable = rows.flat();
    assert.equal(new Set(inTable).size, inTable.length, 'a method is in one row');
    assert.deepEqual([...inTable].sort(), [...CONTRACT_RULES.keys()].sort());
    const byRule = new Map<ContractRule, string[]>();
    for (const [m, rule] of CONTRACT_RULES) byRule.set(rule, [...(byRule.get(rule) ?? []), m]);
    assert.deepEqual(rows.map((r) => [...r].sort()).sort(), [...byRule.values()].map((r) => [...r].sort()).sort());
  });

  test('every method the shipped config serves is judged, none refused', () => {
    const { methods } = loadConfig({ env: {} });
    for (const m of [...methods.standard, ...Object.keys(methods.native), 'eth_subscribe', 'eth_unsubscribe']) {
      const rule = methodFacts(m)?.contract;
      assert.ok(rule !== undefined && rule !== 'refused', `${m}: ${rule}`);
    }
  });
});
