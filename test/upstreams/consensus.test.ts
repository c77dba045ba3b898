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

  /** The config of one network with consensus on, and the environment that points it at `urls`. */
  const withConsensus = (consensus: object, urls?: string): Record<string, string> => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-consensus-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, consensus }] }));
    return { GATEWAY_CONFIG: file, ...(urls === undefined ? {} : { UPSTREAM_AVALANCHE_FUJI: urls }) };
  };

  test('fewer upstreams than consensus.nodes is refused at start, naming the setting: every consensus read would be refused', () => {
    // One upstream, nodes by default (2).
    assert.throws(
      () => loadConfig({ env: withConsensus({ methods: ['eth_getBalance'] }, 'http://127.0.0.1:1') }),
      /^ConfigError: networks\.avalanche-fuji\.consensus: consensus reads need 2 upstreams that agree, the network has 1 \(UPSTREAM_AVALANCHE_FUJI\)/,
    );
    // The shipped two upstreams, three nodes asked.
    assert.throws(() => loadConfig({ env: withConsensus({ methods: ['eth_getBalance'], nodes: 3 }) }), /networks\.avalanche-fuji\.consensus\.nodes = 3: consensus reads need 3 upstreams that agree, the network has 2;/);
    // Under the devnet every network has its one local chain.
    assert.throws(() => loadConfig({ env: { ...withConsensus({ methods: ['eth_getBalance'] }), DEVNET: '1' } }), /networks\.avalanche-fuji\.consensus: .*the devnet gives each network one node/);
    // Enough upstreams: accepted.
    assert.equal(loadConfig({ env: withConsensus({ methods: ['eth_getBalance'] }) }).networks.find((n) => n.slug === NET)?.consensus?.methods[0], 'eth_getBalance');
    assert.ok(loadConfig({ env: withConsensus({ methods: ['eth_getBalance'], nodes: 3 }, 'http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3') }));
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
