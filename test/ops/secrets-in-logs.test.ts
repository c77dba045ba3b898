// No secret in any log line of the real `npm start`, at debug level, through a start, some use and a
// stop: not the JWT or key-encryption secret (given or generated into secrets.json), the admin or
// metrics token, a faucet or solver key, an API key (in the path, a header or a query), a provider
// key in an upstream URL, a password or a session token. Under `--devnet` the public anvil dev keys
// are shown on purpose; every other key stays out.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { startFakeNode } from '../support/fake-node.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';

const ADMIN_TOKEN = 'adminTokenSecret-7c1e0f9a2b4d';
const METRICS_TOKEN = 'metricsTokenSecret-5d8a3c6e1f07';
const PASSWORD = 'passwordSecret-93kq7x';
// Valid secp256k1 keys that are not among anvil's public dev keys, and random as C59 asks.
const FAUCET_KEY = `0x${randomBytes(32).toString('hex')}`;
const SOLVER_KEY = `0x${randomBytes(32).toString('hex')}`;
const JWT_SECRET = 'jwtSecretGiven-0123456789abcdefghijklmnop';
const KEY_ENCRYPTION_SECRET = 'keyEncSecretGiven-0123456789abcdefghijklm';
const PROVIDER_KEY = 'providerKeySecret0123456789abcdef';
const UPSTREAM_PASSWORD = 'upstreamPassSecret42';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await res.arrayBuffer().catch(() => undefined);
  return res;
}

/** Each secret that shows in the output, by name. */
function found(output: string, secrets: Record<string, string>): string[] {
  return Object.entries(secrets)
    .filter(([, v]) => output.includes(v) || output.toLowerCase().includes(v.toLowerCase().replace(/^0x/, '')))
    .map(([k]) => k);
}

describe('no secret in the logs of npm start', { concurrency: true }, () => {
  const running: GatewayProcess[] = [];
  const dirs: string[] = [];
  after(() => {
    for (const gw of running) if (gw.child.exitCode === null && gw.child.signalCode === null) gw.child.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('npm start at debug level: generated secrets, tokens, API keys, provider keys and passwords never reach a line', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-secrets-'));
    dirs.push(dir);
    const node = await startFakeNode({ head: 10 });
    const down = await startFakeNode();
    await down.setMode('status500');
    try {
      const upstream = new URL(node.url);
      const withKey = `${node.url}/v3/${PROVIDER_KEY}`;
      const withPassword = `http://user:${UPSTREAM_PASSWORD}@${new URL(down.url).host}/`;
      const gw = await spawnGateway({
        via: 'npm',
        seeded: true,
        env: {
          DATA_DIR: dir,
          LOG_LEVEL: 'debug',
          LOG_FORMAT: 'json',
          ADMIN_TOKEN,
          METRICS_TOKEN,
          FAUCET_PRIVATE_KEY: FAUCET_KEY,
          UPSTREAM_NATIVE_MAINNET: withKey,
          UPSTREAM_NATIVE_TESTNET: withPassword,
        },
      });
      running.push(gw);
      assert.equal(upstream.hostname, '127.0.0.1');

      const reg = await fetch(`${gw.url}/api/v1/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'secrets@example.com', password: PASSWORD, name: 'S' }),
      });
      assert.equal(reg.status, 200);
      const tokens = ((await reg.json()) as { data: { tokens: { accessToken: string; refreshToken: string } } }).data.tokens;
      const auth = { authorization: `Bearer ${tokens.accessToken}` };
      const login = await post(`${gw.url}/api/v1/auth/login`, { email: 'secrets@example.com', password: PASSWORD });
      assert.equal(login.status, 200);
      await post(`${gw.url}/api/v1/auth/login`, { email: 'secrets@example.com', password: `${PASSWORD}-wrong` });
      const created = await fetch(`${gw.url}/api/v1/api-keys`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify({ name: 'k' }) });
      assert.equal(created.status, 200);
      const key = ((await created.json()) as { data: { key: string } }).data.key;
      const call = { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] };
      // The key in the path, in X-API-Key, in a query string; a call that fails upstream; a refusal.
      assert.equal((await post(`${gw.url}/v1/native-mainnet/${key}`, call)).status, 200);
      assert.equal((await post(`${gw.url}/rpc/main/evm/50`, call, { 'x-api-key': key })).status, 200);
      await post(`${gw.url}/v1/native-mainnet?apiKey=${key}`, call);
      assert.equal((await post(`${gw.url}/v1/native-testnet/${key}`, call)).status, 502);
      await post(`${gw.url}/v1/native-mainnet/${key.slice(0, -4)}zzzz`, call);
      // Tokens: right and wrong.
      assert.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status, 200);
      assert.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } })).status, 401);
      const admin = await fetch(`${gw.url}/api/v1/admin/users?limit=5`, { headers: { 'x-admin-token': ADMIN_TOKEN } });
      assert.ok(![401, 403].includes(admin.status), `the admin token is taken (${admin.status})`);
      await fetch(`${gw.url}/api/v1/admin/users`, { headers: { 'x-admin-token': `${ADMIN_TOKEN}x` } });
      await post(`${gw.url}/api/v1/auth/refresh`, { refreshToken: tokens.refreshToken });

      gw.child.kill('SIGTERM');
      assert.equal((await gw.exited).code, 0);
      const output = gw.output();
      assert.match(output, /"msg":"upstream call failed/, 'the failing upstream was logged (so its URL had a chance to show)');
      assert.match(output, /"level":20/, 'debug lines were written');

      const stored = JSON.parse(readFileSync(path.join(dir, 'secrets.json'), 'utf8')) as { jwtSecret: string; keyEncryptionSecret: string };
      const secrets = {
        'generated JWT secret': stored.jwtSecret,
        'generated key-encryption secret': stored.keyEncryptionSecret,
        ADMIN_TOKEN,
        METRICS_TOKEN,
        FAUCET_PRIVATE_KEY: FAUCET_KEY,
        'API key (its secret part)': key.slice(-20),
        'provider key in an upstream URL': PROVIDER_KEY,
        'password in an upstream URL': UPSTREAM_PASSWORD,
        'account password': PASSWORD,
        'access token (its signature)': tokens.accessToken.split('.')[2] as string,
        'refresh token': tokens.refreshToken.slice(-20),
      };
      assert.deepEqual(found(output, secrets), [], 'secrets in the log');
    } finally {
      await Promise.all([node.close(), down.close()]);
    }
  });

  test('npm start -- --devnet: the public anvil dev keys are shown, the given secrets and faucet and solver keys are not', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-secrets-'));
    dirs.push(dir);
    // Two chains instead of sixteen: the other networks are left out of this run.
    const keep = new Set(['native-testnet', 'ethereum-sepolia']);
    const slugs = ['native-mainnet', 'native-testnet', 'ethereum', 'ethereum-sepolia', 'polygon', 'polygon-amoy', 'bsc', 'bsc-testnet', 'arbitrum', 'arbitrum-sepolia', 'optimism', 'optimism-sepolia', 'base', 'base-sepolia', 'avalanche', 'avalanche-fuji'];
    const config = path.join(dir, 'two-chains.json');
    writeFileSync(config, JSON.stringify({ networks: slugs.filter((s) => !keep.has(s)).map((slug) => ({ slug, enabled: false })), whaleAlerts: { networks: ['native-testnet'] } }));
    const gw = await spawnGateway({
      via: 'npm',
      seeded: true,
      args: ['--devnet', '--config', config],
      env: { DATA_DIR: dir, LOG_LEVEL: 'debug', LOG_FORMAT: 'json', JWT_SECRET, KEY_ENCRYPTION_SECRET, ADMIN_TOKEN, METRICS_TOKEN, FAUCET_PRIVATE_KEY: FAUCET_KEY, SOLVER_PRIVATE_KEY: SOLVER_KEY },
      timeoutMs: 120_000,
    });
    running.push(gw);
    const reg = await post(`${gw.url}/api/v1/auth/register`, { email: 'dev@example.com', password: PASSWORD, name: 'D' });
    assert.equal(reg.status, 200);
    gw.child.kill('SIGTERM');
    assert.equal((await gw.exited).code, 0);
    const output = gw.output();
    // The dev accounts' keys are there on purpose (anvil's public mnemonic).
    assert.ok(output.includes('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'), 'dev account 0 with its public key');
    assert.deepEqual(
      found(output, { JWT_SECRET, KEY_ENCRYPTION_SECRET, ADMIN_TOKEN, METRICS_TOKEN, FAUCET_PRIVATE_KEY: FAUCET_KEY, SOLVER_PRIVATE_KEY: SOLVER_KEY, 'account password': PASSWORD }),
      [],
      'secrets in the log',
    );
  });
});
