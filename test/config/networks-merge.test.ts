// A config file changes one network by its slug without copying the others; UPSTREAM_WS_<SLUG>
// gives WebSocket upstreams by position.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { Writable } from 'node:stream';
import pino from 'pino';
import { DEFAULT_CONFIG_FILE, loadConfig, validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { ConfigError } from '../../src/errors/config.ts';
import { Upstreams } from '../../src/upstreams/upstreams.ts';

const shipped = JSON.parse(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as { networks: Array<{ slug: string; upstreams: unknown[]; name: string }> };
const dir = mkdtempSync(path.join(tmpdir(), 'junction-cfg-net-'));
const file = (name: string, content: unknown) => {
  const f = path.join(dir, name);
  writeFileSync(f, JSON.stringify(content));
  return f;
};

describe('networks in a config file merge by slug', () => {
  test('an entry with a known slug changes that network only; the 15 others stay as shipped', () => {
    const f = file('one.json', { networks: [{ slug: 'ethereum', upstreams: [{ http: 'https://my-node.example', name: 'mine' }] }] });
    const c = loadConfig({ configFile: f, env: {} });
    assert.equal(c.networks.length, 16);
    const eth = c.networks.find((n) => n.slug === 'ethereum');
    assert.deepEqual(eth?.upstreams, [{ http: 'https://my-node.example', name: 'mine' }], 'its upstream list replaced');
    assert.equal(eth?.name, 'Ethereum Mainnet', 'its other fields kept');
    assert.equal(eth?.chainId, 1);
    for (const n of c.networks.filter((x) => x.slug !== 'ethereum')) {
      const orig = shipped.networks.find((s) => s.slug === n.slug);
      assert.deepEqual(n.upstreams, orig?.upstreams, n.slug);
    }
    assert.deepEqual(
      c.networks.map((n) => n.slug),
      shipped.networks.map((n) => n.slug),
      'the order is kept',
    );
  });

  test('a new slug adds a network at the end; "enabled": false leaves one out', () => {
    const mine = {
      slug: 'my-chain',
      name: 'My Chain',
      chainId: 777777,
      type: 'testnet',
      currency: { name: 'My', symbol: 'MY', decimals: 18 },
      explorerUrl: 'https://explorer.example',
      upstreams: [{ http: 'http://127.0.0.1:9545' }],
    };
    const f = file('add.json', { networks: [mine, { slug: 'bsc', enabled: false }, { slug: 'bsc-testnet', enabled: false }] });
    const c = loadConfig({ configFile: f, env: {} });
    assert.equal(c.networks.length, 15);
    assert.equal(c.networks.at(-1)?.slug, 'my-chain');
    assert.ok(!c.networks.some((n) => n.slug === 'bsc' || n.slug === 'bsc-testnet'));
    // An env override can then address the new network like any other.
    const d = loadConfig({ configFile: f, env: { UPSTREAM_MY_CHAIN: 'http://10.0.0.1:8545' } });
    assert.deepEqual(d.networks.at(-1)?.upstreams, [{ http: 'http://10.0.0.1:8545' }]);
    assert.throws(() => loadConfig({ configFile: f, env: { UPSTREAM_BSC: 'http://x' } }), /^ConfigError: UPSTREAM_BSC: no network with slug "bsc"/);
  });

  test('an entry without a slug is refused, naming its place', () => {
    const f = file('noslug.json', { networks: [{ name: 'Nameless' }] });
    assert.throws(() => loadConfig({ configFile: f, env: {} }), (e: Error) => e instanceof ConfigError && /^networks\[0\] \(in .*\): each network needs its "slug"/.test(e.message));
  });

  test('a chain id already taken is named with both networks', () => {
    const f = file('dup.json', { networks: [{ slug: 'base', chainId: 1 }] });
    assert.throws(() => loadConfig({ configFile: f, env: {} }), /networks\.(base|ethereum)\.chainId = 1: already the chain id of (ethereum|base)/);
  });
});

describe('UPSTREAM_WS_<SLUG>', () => {
  test('pairs with UPSTREAM_<SLUG> by position; an empty place leaves that upstream without WebSocket', () => {
    const c = loadConfig({
      env: {
        UPSTREAM_NATIVE_TESTNET: 'http://a:8545,http://b:8545,http://c:8545',
        UPSTREAM_WS_NATIVE_TESTNET: 'ws://a:8546,,ws://c:8546',
      },
    });
    assert.deepEqual(c.networks.find((n) => n.slug === 'native-testnet')?.upstreams, [
      { http: 'http://a:8545', ws: 'ws://a:8546' },
      { http: 'http://b:8545' },
      { http: 'http://c:8545', ws: 'ws://c:8546' },
    ]);
  });

  test('without UPSTREAM_<SLUG> it sets the WebSocket address of the configured upstreams', () => {
    const c = loadConfig({ env: { UPSTREAM_WS_ETHEREUM: 'wss://mine.example' } });
    const ups = c.networks.find((n) => n.slug === 'ethereum')?.upstreams;
    const shippedEth = shipped.networks.find((n) => n.slug === 'ethereum')?.upstreams as Array<Record<string, string>>;
    assert.deepEqual(ups, [{ ...shippedEth[0], ws: 'wss://mine.example' }, shippedEth[1]]);
  });

  test('more WebSocket addresses than upstreams, or an unknown slug, is refused', () => {
    assert.throws(
      () => loadConfig({ env: { UPSTREAM_BASE: 'http://a', UPSTREAM_WS_BASE: 'ws://a,ws://b' } }),
      /^ConfigError: UPSTREAM_WS_BASE: 2 WebSocket addresses for the 1 upstream\(s\) of base; they pair by position with UPSTREAM_BASE/,
    );
    assert.throws(() => loadConfig({ env: { UPSTREAM_WS_ATLANTIS: 'ws://a' } }), /UPSTREAM_WS_ATLANTIS: no network with slug "atlantis"/);
  });

  test('UPSTREAM_<SLUG> alone leaves its network without a WebSocket upstream: the server\'s start says so in one warn line naming it (C32)', async () => {
    const loaded = loadConfig({ env: { UPSTREAM_NATIVE_MAINNET: 'http://127.0.0.1:9' } });
    assert.deepEqual(loaded.networks.find((n) => n.slug === 'native-mainnet')?.upstreams, [{ http: 'http://127.0.0.1:9' }], 'the shipped WebSocket upstream went with the list');
    // The other networks keep a WebSocket upstream, as shipped (here on this machine: no probe leaves it).
    const draft = structuredClone<Config>(loaded);
    for (const n of draft.networks) if (n.slug !== 'native-mainnet') n.upstreams = [{ http: 'http://127.0.0.1:9', ws: 'ws://127.0.0.1:9' }];
    const logs: Array<{ level: number; msg: string; networks?: string[] }> = [];
    const logger = pino({ level: 'warn' }, new Writable({ write: (chunk, _e, cb) => (logs.push(JSON.parse(String(chunk))), cb()) }));
    const upstreams = new Upstreams(validateConfig(draft), logger);
    try {
      upstreams.startAll();
      const said = logs.filter((l) => l.msg.startsWith('no WebSocket upstream'));
      assert.equal(said.length, 1, JSON.stringify(logs));
      assert.deepEqual([said[0]?.level, said[0]?.networks], [40, ['native-mainnet']]);
      assert.match(said[0]?.msg ?? '', /^no WebSocket upstream for native-mainnet: eth_subscribe there answers -32000 .*UPSTREAM_WS_<SLUG>/);
    } finally {
      await upstreams.close();
    }
  });
});
