// A config mistake names what the user wrote (the environment variable, or the setting with a
// network's slug), the value (never a secret's), and what is allowed.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { ConfigError } from '../../src/errors/config.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'junction-cfg-msg-'));
const file = (name: string, content: unknown) => {
  const f = path.join(dir, name);
  writeFileSync(f, JSON.stringify(content));
  return f;
};

function messageOf(opts: Parameters<typeof loadConfig>[0]): string {
  try {
    loadConfig(opts);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `a ConfigError, got ${String(err)}`);
    return err.message;
  }
  assert.fail(`no error for ${JSON.stringify(opts)}`);
}

describe('config error messages', () => {
  test('an environment variable is named with its value and what is allowed', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL: logLevel = "loud": must be one of fatal, error, warn, info, debug, trace, silent'],
      [{ PORT: 'eighty' }, 'PORT: server.port = "eighty": must be a whole number from 0 to 65535'],
      [{ PORT: '70000' }, 'PORT: server.port = 70000: must be a whole number from 0 to 65535'],
      [{ PUBLIC_URL: 'gw.example' }, 'PUBLIC_URL: server.publicUrl = "gw.example": must be an http:// or https:// URL'],
      [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL: redis.url = "localhost:6379": must be a redis:// or rediss:// URL'],
      [{ UPSTREAM_WS_ETHEREUM: 'https://x' }, 'UPSTREAM_WS_ETHEREUM: networks.ethereum.upstreams[0].ws = "https://x": must be a ws:// or wss:// URL'],
      [{ DEVNET: 'yes' }, 'DEVNET = "yes": must be 1, true, 0 or false'],
    ];
    for (const [env, expected] of cases) assert.equal(messageOf({ env }), expected);
  });

  test('a network is named by its slug, never by its place in the list', () => {
    const msg = messageOf({ env: { UPSTREAM_POLYGON_AMOY: 'http://ok:8545,ftp://bad' } });
    assert.equal(msg, 'UPSTREAM_POLYGON_AMOY: networks.polygon-amoy.upstreams[1].http = "ftp://bad": must be an http:// or https:// URL');
    const f = file('net.json', { networks: [{ slug: 'base', upstreams: [{ http: 'https://ok', name: 'has space' }] }] });
    assert.equal(
      messageOf({ configFile: f, env: {} }),
      `networks.base.upstreams[0].name (in ${f}) = "has space": must be up to 64 letters, digits, ".", "_" or "-"`,
    );
    assert.doesNotMatch(messageOf({ configFile: f, env: {} }), /networks\.\d|networks\[\d/);
  });

  test('a setting from the config file names the file; a mistyped key is unknown, with a suggestion', () => {
    const f = file('typo.json', { server: { prot: 9000 } });
    assert.equal(
      messageOf({ configFile: f, env: {} }),
      `server.prot (in ${f}): unknown setting (did you mean port?); known here: port, host, publicUrl, bodyLimitBytes, trustedProxies, shutdownGraceMs, workers, workerHangMs, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, writeTimeoutMs, maxPendingBytesPerConnection, maxPendingBytes`,
    );
    const g = file('level.json', { logLevel: 'verbose' });
    assert.equal(messageOf({ configFile: g, env: {} }), `logLevel (in ${g}) = "verbose": must be one of fatal, error, warn, info, debug, trace, silent`);
  });

  test('a new network missing a field is named by its slug and says what is missing', () => {
    const f = file('new.json', { networks: [{ slug: 'my-chain', name: 'Mine', type: 'mainnet' }] });
    assert.match(messageOf({ configFile: f, env: {} }), /^networks\.my-chain\.chainId \(in .*new\.json\): missing; must be a whole number of at least 1$/);
  });

  test('a price source is checked against the kind it names', () => {
    const f = file('price.json', { networks: [{ slug: 'ethereum', price: { type: 'http', url: 'prices.example', path: 'usd' } }] });
    assert.equal(messageOf({ configFile: f, env: {} }), `networks.ethereum.price.url (in ${f}) = "prices.example": must be an http:// or https:// URL`);
  });

  test('no union jargon: every message says what is allowed in words', () => {
    const f = file('limit.json', { plans: { free: { requestsPerMinute: 0 } } });
    const msg = messageOf({ configFile: f, env: {} });
    assert.equal(msg, `plans.free.requestsPerMinute (in ${f}) = 0: must be a whole number of at least 1 or null`);
    assert.doesNotMatch(msg, /union|Expected/i);
  });

  test('a secret is never shown: JWT_SECRET, KEY_ENCRYPTION_SECRET, ADMIN_TOKEN, FAUCET_PRIVATE_KEY*, passwords in DATABASE_URL and REDIS_URL', () => {
    const secrets: Array<[Record<string, string>, string, RegExp]> = [
      [{ JWT_SECRET: 'tooShortSecretValue' }, 'tooShortSecretValue', /^JWT_SECRET: auth\.jwtSecret = \(hidden, 19 characters\): must be text of at least 32 characters$/],
      [{ KEY_ENCRYPTION_SECRET: 'kShortSecret' }, 'kShortSecret', /^KEY_ENCRYPTION_SECRET: keys\.encryptionSecret = \(hidden/],
      [{ ADMIN_TOKEN: 'adminShort' }, 'adminShort', /^ADMIN_TOKEN: admin\.token = \(hidden, 10 characters\): must be text of at least 16 characters$/],
      [{ FAUCET_PRIVATE_KEY: '0xdeadbeefcafe' }, 'deadbeefcafe', /^FAUCET_PRIVATE_KEY: faucet\.privateKey = \(hidden/],
      [{ FAUCET_PRIVATE_KEY_BASE_SEPOLIA: '0xfeedfacecafe' }, 'feedfacecafe', /^FAUCET_PRIVATE_KEY_BASE_SEPOLIA: faucet\.networks\.base-sepolia\.privateKey = \(hidden/],
      [{ DATABASE_URL: 'mysql://app:hunter2pw@db:3306/x' }, 'hunter2pw', /^DATABASE_URL: storage\.databaseUrl = "mysql:\/\/app:\*\*\*@db:3306\/x": must be a postgres:\/\/ or postgresql:\/\/ URL$/],
      [{ REDIS_URL: 'http://:s3cretpass@cache:6379' }, 's3cretpass', /^REDIS_URL: redis\.url = "http:\/\/:\*\*\*@cache:6379"/],
    ];
    for (const [env, secret, pattern] of secrets) {
      const msg = messageOf({ env });
      assert.match(msg, pattern);
      assert.ok(!msg.includes(secret), `${Object.keys(env)[0]}: the secret is not in "${msg}"`);
    }
    const f = file('secret.json', { admin: { token: 'shortAdminTok' } });
    const msg = messageOf({ configFile: f, env: {} });
    assert.match(msg, /^admin\.token \(in .*\) = \(hidden, 13 characters\)/);
    assert.ok(!msg.includes('shortAdminTok'));
  });
});
