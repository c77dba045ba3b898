// C59: outside --devnet the gateway refuses to start with a secret of obviously low entropy
// (src/config/weak-secrets.ts); generated ones pass, and under --devnet nothing is judged. The
// secrets the repository shows: test/config/example-secrets.test.ts; a real start with generated
// ones: test/main/process.test.ts.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { weakSecretReason } from '../../src/config/weak-secrets.ts';
import { startWith } from './secret-start.ts';

describe('secrets of low entropy (C59)', () => {
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
    assert.equal(startWith({ DATABASE_URL: 'postgres://junction:CHANGE-ME@db:5432/junction' }, true), null);
  });

  test("a database or Redis URL whose password is a placeholder is refused, naming the setting, never the password", () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ DATABASE_URL: 'postgres://junction:Change_Me@db:5432/junction' }, /^DATABASE_URL \(storage\.databaseUrl\)'s password: refused, it is a placeholder/],
      [{ DATABASE_URL: 'postgres://junction:replace%2Dme@db:5432/junction' }, /^DATABASE_URL .*placeholder/],
      [{ REDIS_URL: 'rediss://:CHANGE-ME@redis:6379' }, /^REDIS_URL \(redis\.url\)'s password: refused/],
      [{ REDIS_CLUSTER_NODES: 'rediss://:a8f3e61c09d2b7@r0:6379,rediss://:changeme@r1:6379' }, /^REDIS_CLUSTER_NODES \(redis\.clusterNodes\.1\)'s password: refused/],
    ];
    for (const [env, pattern] of cases) {
      const message = startWith(env);
      assert.match(message ?? 'started', pattern);
      assert.doesNotMatch(message ?? '', /Change_Me|CHANGE-ME|changeme|replace/);
    }
    // The operator's own password is not judged on its entropy: the database set it.
    assert.equal(startWith({ DATABASE_URL: 'postgres://junction:junction@db:5432/junction' }), null);
    assert.equal(startWith({ DATABASE_URL: 'postgres://root@127.0.0.1:5432/junction', REDIS_URL: 'redis://127.0.0.1:6379' }), null);
  });
});
