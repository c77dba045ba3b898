// C59: outside --devnet the gateway refuses to start with a secret the repository shows (its
// examples, its docs, anvil's public keys) or one of obviously low entropy; generated ones start.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/load.ts';
import { refuseWeakSecrets, weakSecretReason } from '../../src/config/weak-secrets.ts';
import { type GatewayProcess, ROOT, spawnGateway } from '../support/process.ts';

interface Found {
  file: string;
  line: number;
  /** The environment variable that sets this secret. */
  env: string;
  value: string;
}

const SECRET_ENV = /\b(JWT_SECRET|KEY_ENCRYPTION_SECRET|ADMIN_TOKEN|METRICS_TOKEN|FAUCET_PRIVATE_KEY|SOLVER_PRIVATE_KEY)(?:_[A-Z0-9_]+)?["']?\s*[=:]\s*(["']?)([^\s"'`,;)}]*)\2/g;
const SECRET_KEYS: Record<string, string> = { jwtSecret: 'JWT_SECRET', encryptionSecret: 'KEY_ENCRYPTION_SECRET', privateKey: 'FAUCET_PRIVATE_KEY', solverPrivateKey: 'SOLVER_PRIVATE_KEY' };
const SECRET_JSON = /["']?(jwtSecret|encryptionSecret|privateKey|solverPrivateKey)["']?\s*:\s*["']([^"']+)["']/g;
const TOKEN_JSON = /["']?(admin|metrics)["']?\s*:\s*\{\s*["']?token["']?\s*:\s*["']([^"']+)["']/g;
const HEX_KEY = /0x[0-9a-fA-F]{64}(?![0-9a-fA-F])/g;
const CODE = /\.(ts|mts|js|mjs|cjs|tsx)$/;

/** Text that stands for a value rather than being one: `${JWT_SECRET:?...}`, `$(openssl ...)`, `<secret>`, `...`, `0x…`. */
const notAValue = (v: string) => v === '' || /^[$<]|\.\.\.|…/.test(v);

/**
 * Every secret value written in the repository's files outside test/: settings given in env style
 * (`JWT_SECRET=...`, `JWT_SECRET: ...`), in config style (`"jwtSecret": "..."`, `admin: { token }`),
 * and private keys (0x + 64 hex digits) on a line that says "private key" or also lists an address.
 * In code, only quoted literals count (an identifier is not an example).
 */
function examplesInRepository(): Found[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && !f.startsWith('test/') && !f.endsWith('package-lock.json'));
  const out: Found[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(path.join(ROOT, file), 'utf8');
    } catch {
      continue; // listed but absent (a submodule, a removed file)
    }
    if (text.includes('\0')) continue; // binary
    const code = CODE.test(file);
    text.split('\n').forEach((l, i) => {
      const add = (env: string, value: string) => {
        if (!notAValue(value)) out.push({ file, line: i + 1, env, value });
      };
      for (const m of l.matchAll(SECRET_ENV)) if (!code || m[2]) add(m[1] as string, m[3] as string);
      for (const m of l.matchAll(SECRET_JSON)) add(SECRET_KEYS[m[1] as string] as string, m[2] as string);
      for (const m of l.matchAll(TOKEN_JSON)) add(m[1] === 'admin' ? 'ADMIN_TOKEN' : 'METRICS_TOKEN', m[2] as string);
      if (/private ?key|PRIVATE_KEY/i.test(l) || /0x[0-9a-fA-F]{40}(?![0-9a-fA-F])/.test(l)) for (const m of l.matchAll(HEX_KEY)) add('FAUCET_PRIVATE_KEY', m[0]);
    });
  }
  // One finding per value and setting.
  return [...new Map(out.map((f) => [`${f.env}=${f.value}`, f])).values()];
}

/** How a start with this one secret ends: the ConfigError's message, or null when it would go on. */
function startWith(env: Record<string, string>, devnet = false): string | null {
  try {
    refuseWeakSecrets(loadConfig({ env: { DATA_DIR: 'memory', ...env }, devnet }));
    return null;
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
}

describe('secrets shipped in the repository or of low entropy (C59)', () => {
  const running: GatewayProcess[] = [];
  after(async () => {
    for (const g of running) g.child.kill('SIGTERM');
    await Promise.all(running.map((g) => g.exited));
  });

  test('every example secret found in the repository\'s files is refused at the start, naming its setting', () => {
    const found = examplesInRepository();
    // The scan finds what is known to be there: it would otherwise prove nothing.
    const values = new Set(found.map((f) => f.value));
    assert.ok(values.has('CHANGE-ME-32-characters-or-more-000000'), 'the Kubernetes example secret');
    assert.ok(values.has('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'), 'anvil\'s first key in docs/devnet.md');
    const accepted: string[] = [];
    for (const f of found) {
      const message = startWith({ [f.env]: f.value });
      if (message === null) accepted.push(`${f.file}:${f.line}: ${f.env}=${f.value}`);
      else {
        assert.match(message, new RegExp(`^${f.env}`), message);
        assert.ok(!message.includes(f.value), `the message shows the secret: ${message}`);
      }
    }
    assert.deepEqual(accepted, [], 'example secrets a gateway would start with (list them in src/config/weak-secrets.ts, or generate them)');
  });

  test('obviously weak secrets are refused, saying which setting and how to make a good one', () => {
    const weak: Array<[string, string]> = [
      ['JWT_SECRET', 'j'.repeat(40)],
      ['JWT_SECRET', 'ab'.repeat(20)],
      ['KEY_ENCRYPTION_SECRET', '0123'.repeat(10)],
      ['KEY_ENCRYPTION_SECRET', 'abcdefghijklmnopqrstuvwxyz0123456789'],
      ['KEY_ENCRYPTION_SECRET', 'my-own-secret-xyz-Q7w0000000000kz9'],
      ['ADMIN_TOKEN', 'please-change-me-admin-token'],
      ['METRICS_TOKEN', 'metrics-placeholder-token'],
      ['FAUCET_PRIVATE_KEY', `0x${'5a'.repeat(32)}`],
      ['SOLVER_PRIVATE_KEY', `0x${'0'.repeat(63)}1`],
    ];
    for (const [env, value] of weak) {
      const message = startWith({ [env]: value });
      assert.ok(message, `${env}=${value} is accepted`);
      assert.match(message, new RegExp(`^${env} \\(`), message);
      assert.match(message, /openssl rand -hex 32/);
      assert.ok(!message.includes(value), message);
    }
  });

  test('generated secrets always pass: 20,000 of each shape openssl and Node make', () => {
    const shapes: Array<[string, () => string]> = [
      ['openssl rand -hex 8', () => randomBytes(8).toString('hex')],
      ['openssl rand -hex 16', () => randomBytes(16).toString('hex')],
      ['openssl rand -hex 32', () => randomBytes(32).toString('hex')],
      ['openssl rand -base64 18', () => randomBytes(18).toString('base64')],
      ['openssl rand -base64 33', () => randomBytes(33).toString('base64')],
      ['randomBytes(32) base64url', () => randomBytes(32).toString('base64url')],
      ['a private key', () => `0x${randomBytes(32).toString('hex')}`],
    ];
    for (const [name, make] of shapes) {
      for (let i = 0; i < 20_000; i++) {
        const v = make();
        assert.equal(weakSecretReason(v), null, `${name}: ${v}`);
      }
    }
  });

  test('under --devnet the given secrets are not judged (the devnet is local, its keys public on purpose)', () => {
    assert.equal(startWith({ JWT_SECRET: 'CHANGE-ME-32-characters-or-more-000000', FAUCET_PRIVATE_KEY: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' }, true), null);
  });

  test('a gateway outside the devnet starts with generated secrets', async () => {
    const gw = await spawnGateway({
      env: {
        DATA_DIR: 'memory',
        JWT_SECRET: randomBytes(32).toString('hex'),
        KEY_ENCRYPTION_SECRET: randomBytes(32).toString('base64'),
        ADMIN_TOKEN: randomBytes(16).toString('hex'),
        METRICS_TOKEN: randomBytes(16).toString('hex'),
        FAUCET_PRIVATE_KEY: `0x${randomBytes(32).toString('hex')}`,
        LOG_FORMAT: 'json',
      },
    });
    running.push(gw);
    assert.equal((await fetch(`${gw.url}/health/live`)).status, 200);
  });
});
