// C54: an answer the gateway decides on must read the same to every parser.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { answerMembersPlain } from '../../src/json/lossless.ts';
import { successResult } from '../../src/rpc/dispatch/cache.ts';
import { parseResponse } from '../../src/upstreams/http/answers.ts';

const SLY = [
  '{"jsonrpc":"2.0","id":1,"result":"0x21e","result":"0xdead"}',
  '{"jsonrpc":"2.0","id":1,"r\\u0065sult":"0xdead","result":"0x21e"}',
  '{"jsonrpc":"2.0","id":1,"result":"0x21e","Result":"0xdead"}',
  '{"jsonrpc":"2.0","id":1,"ERROR":{"code":1,"message":"x"},"result":"0x21e"}',
  '{"jsonrpc":"2.0","id":1,"id":2,"result":"0x21e"}',
];

describe('answers with repeated or disguised members (C54)', () => {
  test('are not plain; ordinary answers are, whatever their spacing or extra members', () => {
    for (const a of SLY) assert.equal(answerMembersPlain(a), false, a);
    for (const a of ['{"jsonrpc":"2.0","id":1,"result":"0x21e"}', '{ "id": 1, "jsonrpc": "2.0", "error": {"code": -32000, "message": "x", "data": {"result": 1, "result": 2}} }', '{"jsonrpc":"2.0","id":"a\\"b","result":{"result":"x"}}']) {
      assert.equal(answerMembersPlain(a), true, a);
    }
  });

  test('are never stored by the cache nor read as a head or an internal answer', () => {
    for (const a of SLY) {
      assert.equal(successResult(a), null, a);
      assert.equal(parseResponse(Buffer.from(a)), undefined, a);
    }
    assert.equal(successResult('{"jsonrpc":"2.0","id":1,"result":"0x21e"}'), '"0x21e"');
    assert.deepEqual(parseResponse(Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x21e"}'))?.result, '0x21e');
  });
});
