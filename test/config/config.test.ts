import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigError } from '../../src/errors/config.ts';
import { resolveSecrets } from '../../src/config/secrets.ts';

describe('config (C32)', () => {
  test('the shipped default lists all 16 networks with public upstreams, and is frozen', () => {
    const c = loadConfig({ env: {} });
    assert.equal(c.networks.length, 16);
    for (const n of c.networks) {
      assert.ok(n.upstreams.length >= 1, n.slug);
      for (const u of n.upstreams) assert.match(u.http, /^https:\/\//);
      assert.ok(n.explorerUrl?.startsWith('https://'));
    }
    assert.equal(c.server.port, 8080);
    assert.equal(c.server.host, '0.0.0.0');
    assert.equal(c.storage.databaseUrl, null);
    assert.ok(Object.isFrozen(c) && Object.isFrozen(c.networks[0]));
  });

  test('env overrides: PORT, HOST, PUBLIC_URL, DATABASE_URL, DATA_DIR, REDIS_URL, secrets, ADMIN_TOKEN, UPSTREAM_<SLUG>', () => {
    const c = loadConfig({
      env: {
        PORT: '9000',
        HOST: '127.0.0.1',
        PUBLIC_URL: 'https://gw.example',
        DATABASE_URL: 'postgres://u@db/x',
        DATA_DIR: '/var/lib/junction',
        REDIS_URL: 'redis://cache:6379',
        JWT_SECRET: 'j'.repeat(32),
        KEY_ENCRYPTION_SECRET: 'k'.repeat(32),
        ADMIN_TOKEN: 'a'.repeat(20),
        UPSTREAM_NATIVE_TESTNET: 'http://a:8545, http://b:8545',
      },
    });
    assert.equal(c.server.port, 9000);
    assert.equal(c.server.host, '127.0.0.1');
    assert.equal(c.server.publicUrl, 'https://gw.example');
    assert.equal(c.storage.databaseUrl, 'postgres://u@db/x');
    assert.equal(c.storage.dataDir, '/var/lib/junction');
    assert.equal(c.redis.url, 'redis://cache:6379');
    assert.equal(c.admin.token, 'a'.repeat(20));
    assert.deepEqual(
      c.networks.find((n) => n.slug === 'native-testnet')?.upstreams,
      [{ http: 'http://a:8545' }, { http: 'http://b:8545' }],
    );
  });

  test('C59: the devnet listens on 127.0.0.1 unless HOST or the config file says otherwise; outside the devnet on every interface', () => {
    assert.equal(loadConfig({ env: {}, devnet: true }).server.host, '127.0.0.1', '--devnet');
    assert.equal(loadConfig({ env: { DEVNET: '1' } }).server.host, '127.0.0.1', 'DEVNET=1');
    assert.equal(loadConfig({ env: { HOST: '0.0.0.0' }, devnet: true }).server.host, '0.0.0.0', 'HOST has the last word');
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-host-'));
    const file = path.join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ server: { host: '::' } }));
    assert.equal(loadConfig({ env: {}, devnet: true, configFile: file }).server.host, '::', 'so has the config file');
    assert.equal(loadConfig({ env: {} }).server.host, '0.0.0.0', 'no devnet: the shipped default');
  });

  test('a config file merges over the defaults (GATEWAY_CONFIG or --config)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-cfg-'));
    const file = path.join(dir, 'gw.json');
    writeFileSync(file, JSON.stringify({ server: { port: 7001 }, plans: { free: { requestsPerMinute: 50 } } }));
    const c = loadConfig({ env: { GATEWAY_CONFIG: file } });
    assert.equal(c.server.port, 7001);
    assert.equal(c.plans.free.requestsPerMinute, 50);
    assert.equal(c.plans.free.dailyLimit, 10_000, 'untouched defaults remain');
    assert.equal(loadConfig({ configFile: file, env: {} }).server.port, 7001);
  });

  test('a bad setting stops the start with a message naming it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-cfg-'));
    const cases: Array<[Parameters<typeof loadConfig>[0], RegExp]> = [
      [{ env: { PORT: 'eighty' } }, /PORT/],
      [{ env: { PORT: '70000' } }, /server\.port/],
      [{ env: { DATABASE_URL: 'mysql://x' } }, /storage\.databaseUrl/],
      [{ env: { UPSTREAM_ATLANTIS: 'http://x' } }, /UPSTREAM_ATLANTIS/],
      [{ env: { UPSTREAM_ETHEREUM: 'ftp://x' } }, /^UPSTREAM_ETHEREUM: networks\.ethereum\.upstreams\[0\]\.http = "ftp:\/\/x": must be an http:\/\/ or https:\/\/ URL$/],
      [{ env: { JWT_SECRET: 'short' } }, /auth\.jwtSecret/],
      [{ env: { LOG_LEVEL: 'loud' } }, /logLevel/],
      [{ env: {}, overrides: { plans: { free: { requestsPerMinute: 0 } } } }, /plans\.free\.requestsPerMinute/],
      [{ env: {}, overrides: { server: { speed: 'fast' } } }, /server/],
      [{ env: {}, overrides: { auth: { passwordHashCost: 9 } } }, /auth\.passwordHashCost/],
      [{ env: {}, overrides: { auth: { passwordHashCost: 16 } } }, /auth\.passwordHashCost/],
      [{ env: { GATEWAY_CONFIG: path.join(dir, 'missing.json') } }, /missing\.json/],
    ];
    for (const [opts, pattern] of cases) {
      assert.throws(() => loadConfig(opts), (err: Error) => err instanceof ConfigError && pattern.test(err.message), JSON.stringify(opts));
    }
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, '{ not json');
    assert.throws(() => loadConfig({ configFile: bad, env: {} }), /not valid JSON/);
  });

  test('secrets: generated once into DATA_DIR (0600) in embedded mode; required with DATABASE_URL', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-sec-'));
    const c = loadConfig({ env: { DATA_DIR: dir } });
    const a = resolveSecrets(c);
    const b = resolveSecrets(c);
    assert.deepEqual(a, b, 'the same secrets on the next start');
    assert.ok(a.jwtSecret.length >= 32);
    const file = path.join(dir, 'secrets.json');
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).jwtSecret, a.jwtSecret);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const given = resolveSecrets(loadConfig({ env: { DATA_DIR: dir, JWT_SECRET: 'g'.repeat(40) } }));
    assert.equal(given.jwtSecret, 'g'.repeat(40));
    assert.throws(
      () => resolveSecrets(loadConfig({ env: { DATABASE_URL: 'postgres://x@y/z' } })),
      /JWT_SECRET.*DATABASE_URL/,
    );
  });
});

// C24: the method lists are exact names (the RPC path refusing the others: test/rpc/policy-exact.test.ts).
describe('config: method names are exact', () => {
  test('a wildcard in methods.planExtras stops the start naming the setting', () => {
    assert.throws(() => loadConfig({ env: {}, overrides: { methods: { planExtras: { pro: ['debug_*'] } } } }), /methods\.planExtras\.pro/);
  });

  test('methods that need a node-held account or control a node cannot be listed', () => {
    for (const standard of [['eth_sendTransaction'], ['eth_sendUnsignedTransaction'], ['eth_accounts'], ['anvil_mine']]) {
      assert.throws(() => loadConfig({ env: {}, overrides: { methods: { standard } } }), /methods\.standard/, standard[0]);
    }
    assert.throws(() => loadConfig({ env: {}, overrides: { methods: { planExtras: { max: ['admin_addPeer'] } } } }), /methods\.planExtras\.max/);
  });
});

// C32: a setting naming a network names one that is configured, else the start stops naming it.
describe('config: settings that name a network', () => {
  test('an unknown slug stops the start naming the setting and the slug', () => {
    const feed = { type: 'chainlink', network: 'etherium', address: `0x${'11'.repeat(20)}` };
    const cases: Array<[overrides: Record<string, unknown>, setting: RegExp]> = [
      [{ whaleAlerts: { networks: ['native-mainnet', 'native-mainet'] } }, /whaleAlerts\.networks\.1 = "native-mainet": no such network/],
      [{ faucet: { networks: { 'native-testnt': { enabled: true } } } }, /faucet\.networks\.native-testnt = "native-testnt"/],
      [{ intents: { routes: [{ from: 'ethereum', to: 'polygon-amoi' }] } }, /intents\.routes\.0\.to = "polygon-amoi"/],
      [{ intents: { solverPrivateKeys: { bnb: `0x${'22'.repeat(32)}` } } }, /intents\.solverPrivateKeys\.bnb = "bnb"/],
      [{ intents: { settlers: { eth: { origin: `0x${'33'.repeat(20)}`, destination: `0x${'44'.repeat(20)}` } } } }, /intents\.settlers\.eth = "eth"/],
    ];
    for (const [overrides, setting] of cases) assert.throws(() => loadConfig({ env: {}, overrides }), setting);
    const base = loadConfig({ env: {} });
    const networks = base.networks.map((n) => (n.slug === 'ethereum' ? { ...n, price: feed, tokens: [{ symbol: 'USDX', address: `0x${'55'.repeat(20)}`, decimals: 6, price: feed }] } : n));
    assert.throws(() => loadConfig({ env: {}, overrides: { networks } }), /networks\.ethereum\.price\.network = "etherium"/);
    const tokenOnly = base.networks.map((n) => (n.slug === 'ethereum' ? { ...n, tokens: [{ symbol: 'USDX', address: `0x${'55'.repeat(20)}`, decimals: 6, price: feed }] } : n));
    assert.throws(() => loadConfig({ env: {}, overrides: { networks: tokenOnly } }), /networks\.ethereum\.tokens\.0\.price\.network = "etherium"/);
  });

  test('a config that leaves a native network out keeps the shipped whale-alert list to the networks it has; a list written names only known ones (C35)', () => {
    const networks = loadConfig({ env: {} }).networks.filter((n) => n.slug !== 'native-testnet');
    assert.deepEqual(loadConfig({ env: {}, overrides: { networks } }).whaleAlerts.networks, ['native-mainnet']);
    assert.throws(() => loadConfig({ env: {}, overrides: { networks, whaleAlerts: { networks: ['native-mainnet', 'native-testnet'] } } }), /whaleAlerts\.networks\.1 = "native-testnet": no such network/);
  });

  test('the shipped config and the devnet name only their own networks', () => {
    assert.doesNotThrow(() => loadConfig({ env: {} }));
    assert.doesNotThrow(() => loadConfig({ env: { DEVNET: 'true' } }));
  });
});
