// The member-name scanner of src/json/lossless.ts, which the method policy (C22, C24) and the
// nesting bound (C23) read calls with, and the call-members check built on it
// (src/rpc/jsonrpc.ts). On the RPC path: test/rpc/policy-exact.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { memberNames, nestsDeeperThan } from '../../src/json/lossless.ts';
import { callMembersError } from '../../src/rpc/jsonrpc.ts';

describe('the member-name scanner', () => {
  test('lists top-level names as written, repeats and escapes kept, nested names and string contents left out', () => {
    const text = String.raw` { "a" : {"Method":"x"} ,"m\u0065thod":"say \"}, \"id\": 1 {[","a":[{"id":2}, "]"] , "\\":null,"n":-1.5e3,"t":true}`;
    assert.deepEqual(memberNames(text), ['a', String.raw`m\u0065thod`, 'a', String.raw`\\`, 'n', 't']);
    assert.deepEqual(memberNames('{}'), []);
    assert.equal(memberNames('[{"id":1}]'), null);
    assert.equal(memberNames('"id"'), null);
  });

  test('callMembersError reads bytes and text alike and names a non-ASCII member exactly', () => {
    const body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","paramſ":[]}';
    assert.equal(callMembersError(body)?.member, 'paramſ');
    assert.equal(callMembersError(Buffer.from(body))?.member, 'paramſ');
    assert.equal(callMembersError('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["\\"Method\\":1"]}'), null);
    assert.equal(callMembersError(Buffer.from('{"id":"ä","method":"eth_chainId","jsonrpc":"2.0"}')), null);
  });

  test('nestsDeeperThan counts arrays and objects, not brackets inside strings (C23)', () => {
    const nest = (n: number) => '[{"a":'.repeat(n) + '1' + '}]'.repeat(n);
    assert.equal(nestsDeeperThan(nest(4), 8), false);
    assert.equal(nestsDeeperThan(nest(4), 7), true);
    assert.equal(nestsDeeperThan(nest(64), 128), false);
    assert.equal(nestsDeeperThan(nest(65), 128), true);
    // Brackets and escaped quotes inside strings are text, however many.
    const padded = `{"p":["${'[{'.repeat(300)}${String.raw`\\\"`}${'['.repeat(300)}"]}`;
    assert.equal(nestsDeeperThan(padded, 2), false);
    assert.equal(nestsDeeperThan(padded, 1), true);
    // Siblings do not add up: 500 arrays side by side are 2 levels.
    assert.equal(nestsDeeperThan(`[${Array(500).fill('[]').join(',')}]`, 2), false);
  });
});
