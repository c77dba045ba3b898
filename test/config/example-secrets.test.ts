// C59: outside --devnet the gateway refuses to start with a secret the repository shows (its
// examples, its docs, anvil's public keys): every such value found in the repository's files
// (git ls-files) is refused, naming its setting. Secrets of low entropy:
// test/config/weak-secrets.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { startWith } from './secret-start.ts';

const ROOT = path.join(import.meta.dirname, '../..');

interface Found {
  file: string;
  line: number;
  /** The environment variable that sets this secret. */
  env: string;
  value: string;
  /** For a URL: the password in it (the secret), the URL being the value set. */
  secret?: string;
}

const SECRET_ENV = /\b(JWT_SECRET|KEY_ENCRYPTION_SECRET|ADMIN_TOKEN|METRICS_TOKEN|FAUCET_PRIVATE_KEY|SOLVER_PRIVATE_KEY)(?:_[A-Z0-9_]+)?["']?\s*[=:]\s*(["']?)([^\s"'`,;)}]*)\2/g;
const SECRET_KEYS: Record<string, string> = { jwtSecret: 'JWT_SECRET', encryptionSecret: 'KEY_ENCRYPTION_SECRET', privateKey: 'FAUCET_PRIVATE_KEY', solverPrivateKey: 'SOLVER_PRIVATE_KEY' };
const SECRET_JSON = /["']?(jwtSecret|encryptionSecret|privateKey|solverPrivateKey)["']?\s*:\s*["']([^"']+)["']/g;
const TOKEN_JSON = /["']?(admin|metrics)["']?\s*:\s*\{\s*["']?token["']?\s*:\s*["']([^"']+)["']/g;
const HEX_KEY = /0x[0-9a-fA-F]{64}(?![0-9a-fA-F])/g;
/** A database or Redis URL set in env style, and the password in one of its URLs. */
const SECRET_URL = /\b(DATABASE_URL|REDIS_URL|REDIS_CLUSTER_NODES)["']?\s*[=:]\s*["']?([^\s"'`]+)/g;
const URL_PASSWORD = /(?:postgres(?:ql)?|rediss?):\/\/[^:@/\s]*:([^@/\s]+)@/g;
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
      for (const m of l.matchAll(SECRET_URL)) {
        for (const p of (m[2] as string).matchAll(URL_PASSWORD)) {
          if (!notAValue(p[1] as string)) out.push({ file, line: i + 1, env: m[1] as string, value: m[2] as string, secret: p[1] });
        }
      }
    });
  }
  // One finding per value and setting.
  return [...new Map(out.map((f) => [`${f.env}=${f.value}`, f])).values()];
}

describe('secrets shipped in the repository (C59)', () => {
  test('every example secret found in the repository\'s files is refused at the start, naming its setting', () => {
    const found = examplesInRepository();
    // The scan finds what is known to be there: it would otherwise prove nothing.
    const values = new Set(found.map((f) => f.value));
    assert.ok(values.has('CHANGE-ME-32-characters-or-more-000000'), 'the Kubernetes example secret');
    assert.ok(values.has('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'), 'anvil\'s first key in docs/devnet.md');
    assert.ok(found.some((f) => f.env === 'DATABASE_URL' && f.secret === 'CHANGE-ME'), 'the Kubernetes example database URL');
    const accepted: string[] = [];
    for (const f of found) {
      const message = startWith({ [f.env]: f.value });
      if (message === null) accepted.push(`${f.file}:${f.line}: ${f.env}=${f.value}`);
      else {
        assert.match(message, new RegExp(`^${f.env}`), message);
        assert.ok(!message.includes(f.secret ?? f.value), `the message shows the secret: ${message}`);
      }
    }
    assert.deepEqual(accepted, [], 'example secrets a gateway would start with (list them in src/config/weak-secrets.ts, or generate them)');
  });
});
