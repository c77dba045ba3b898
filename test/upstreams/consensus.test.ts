// C49: what a consensus read compares (src/upstreams/http/consensus.ts), and the config it takes.
// Consensus reads through the gateway: test/upstreams/consensus-gateway.test.ts; with a hung node:
// test/upstreams/consensus-stall.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { keyOf } from '../../src/upstreams/http/consensus.ts';

const NET = 'avalanche-fuji';

describe('consensus config (C49)', () => {
  test('the config refuses nodes under 2', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-consensus-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, consensus: { methods: ['eth_getBalance'], nodes: 1 } }] }));
    assert.throws(() => loadConfig({ env: { GATEWAY_CONFIG: file } }), /consensus/);
  });
});

describe('what consensus compares (C49)', () => {
  test('result or error text, blanks outside strings removed, blanks inside strings kept', () => {
    const k = (s: string) => keyOf(s);
    assert.equal(k('{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}'), k('{ "id" : 7,\n "result" : { "a" : [ 1 , 2 ] } ,"jsonrpc":"2.0"}'));
    assert.notEqual(k('{"id":1,"result":"a b"}'), k('{"id":1,"result":"ab"}'));
    assert.notEqual(k('{"id":1,"result":"0x1"}'), k('{"id":1,"error":"0x1"}'));
    assert.equal(k('{"id":1,"error":{"code":3, "message":"execution reverted"}}'), k('{"id":2,"error":{"code":3,"message":"execution reverted"}}'));
  });
});
