// The member-name scanner of src/json/lossless.ts, which the method policy (C22, C24) and the
// nesting bound (C23) read calls with, and the call-members check built on it
// (src/rpc/jsonrpc.ts). On the RPC path: test/rpc/policy-exact.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { memberNames, nestsDeeperThan } from '../../src/json/lossless.ts';
import { callMembersError, parseItem } from '../../src/rpc/jsonrpc.ts';

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

  test('a call read from its text keeps its id exactly as written, from the same walk (C23)', () => {
    const read = (text: string | Buffer) => parseItem(JSON.parse(String(text)), text);
    const idOf = (text: string | Buffer) => {
      const item = read(text);
      assert.ok(item.call, `${String(text)} is a call`);
      return item.idText;
    };
    assert.equal(idOf('{"jsonrpc":"2.0","id":12345678901234567890123,"method":"eth_chainId"}'), '12345678901234567890123');
    assert.equal(idOf('{"jsonrpc":"2.0","method":"eth_chainId","params":[], "id" :  1.50e1 }'), '1.50e1');
    assert.equal(idOf(String.raw`{"id":"a\"}\u00e4","jsonrpc":"2.0","method":"eth_chainId"}`), String.raw`"a\"}\u00e4"`);
    assert.equal(idOf('{"jsonrpc":"2.0","method":"eth_chainId","params":[{"id":7}]}'), 'null', 'a notification: only a top-level id counts');
    assert.equal(idOf('{"jsonrpc":"2.0","id":null,"method":"eth_chainId"}'), 'null');
    // From bytes: a non-ASCII id decoded as the UTF-8 it is.
    assert.equal(idOf(Buffer.from('{"jsonrpc":"2.0","id":"ä€","method":"eth_chainId"}')), '"ä€"');
    // A stray spelling of "id" is refused, and the id is then uncertain.
    const stray = read('{"jsonrpc":"2.0","id":1,"ID":2,"method":"eth_chainId"}');
    assert.equal(stray.error?.code, -32600);
    assert.equal(stray.call, undefined);
    assert.equal(stray.call === undefined ? stray.id : 'call', null);
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
