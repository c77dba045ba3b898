// C52: `npm run admin -- <command>` manages accounts through a running gateway's admin API.
// The script runs as its own process against a listening gateway, as an operator would run it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const SCRIPT = path.join(root, 'scripts/admin.ts');
const TOKEN = 'admin-cli-token-for-tests-0123456789';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

const TSX = path.join(root, 'node_modules/.bin/tsx');

/**
 * Runs the admin command with only `env` (and PATH), in `cwd`: by default an empty folder, so a
 * devnet's data/ in the project folder (its admin token, C52) has no say in what a test sees.
 */
async function admin(args: string[], env: Record<string, string> = {}, cwd?: string): Promise<Ran> {
  const dir = cwd ?? mkdtempSync(path.join(tmpdir(), 'junction-admin-cli-'));
  try {
    const { stdout, stderr } = await run(TSX, [SCRIPT, ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  } finally {
    if (cwd === undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** A working folder holding what `npm start -- --devnet` leaves in ./data/devnet: its admin token, and the address it listened on. */
function devnetFolder(token: string, url: string | undefined): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-admin-devnet-'));
  mkdirSync(path.join(dir, 'data', 'devnet'), { recursive: true });
  writeFileSync(path.join(dir, 'data', 'devnet', 'admin-token'), `${token}\n`);
  if (url !== undefined) writeFileSync(path.join(dir, 'data', 'devnet', 'admin-url'), `${url}\n`);
  return dir;
}

describe('npm run admin (C52)', () => {
  let t: TestApp;
  let env: Record<string, string>;
  before(async () => {
    t = await startTestApp({ listen: true, env: { ADMIN_TOKEN: TOKEN } });
    env = { ADMIN_TOKEN: TOKEN, GATEWAY_URL: t.url };
  });
  after(() => t.close());

  test('--help lists every command; no command is a usage error (exit 2)', async () => {
    const help = await admin(['--help']);
    assert.equal(help.code, 0);
    for (const c of ['users', 'find', 'set-tier', 'set-limits', 'keys', 'revoke-key']) assert.match(help.stdout, new RegExp(`^  ${c}\\b`, 'm'), c);
    assert.equal((await admin([])).code, 2);
  });

  test('find shows the plan and limits; set-tier changes the plan and the limits follow', async () => {
    const u = await registerUser(t.app);
    const found = await admin(['find', u.email], env);
    assert.equal(found.code, 0, found.stderr);
    assert.match(found.stdout, /plan free/);
    assert.match(found.stdout, /100 requests\/min, 10,000 a day/);
    const changed = await admin(['set-tier', u.email.toUpperCase(), 'max', '--json'], env);
    assert.equal(changed.code, 0, changed.stderr);
    const data = JSON.parse(changed.stdout) as { tier: string; effective: { requestsPerMinute: number } };
    assert.equal(data.tier, 'max');
    assert.equal(data.effective.requestsPerMinute, 5000);
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/me', headers: u.auth });
    assert.match(me.body, /"tier":"max"/, 'the account itself says max');
    // By id too.
    const byId = await admin(['find', u.id], env);
    assert.match(byId.stdout, /plan max/);
  });

  test('set-limits overrides and clears per-account limits', async () => {
    const u = await registerUser(t.app);
    const set = await admin(['set-limits', u.email, '--rpm', '42', '--daily', '999', '--json'], env);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout).overrides, { requestsPerMinute: 42, dailyLimit: 999, monthlyLimit: null });
    const cleared = await admin(['set-limits', u.email, '--rpm', 'none', '--json'], env);
    assert.equal(JSON.parse(cleared.stdout).overrides.requestsPerMinute, null);
    const bad = await admin(['set-limits', u.email, '--rpm', '-5'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--rpm/);
  });

  test('keys lists an account\'s keys without their values; revoke-key revokes one, and the key stops working', async () => {
    const u = await registerUser(t.app);
    const a = await createKey(t.app, {}, u);
    const b = await createKey(t.app, {}, u);
    const prefixOf = (key: string) => key.slice(0, 16);
    const listed = await admin(['keys', u.email], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(listed.stdout.includes(prefixOf(a.key)) && listed.stdout.includes(prefixOf(b.key)));
    assert.ok(!listed.stdout.includes(a.key) && !listed.stdout.includes(b.key), 'never a key value');
    const revoked = await admin(['revoke-key', u.email, a.id], env);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, /revoked/);
    const rpc = await fetch(`${t.url}/rpc/main/evm/50`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': a.key },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
    });
    assert.equal(((await rpc.json()) as { error?: { code: number } }).error?.code, -32002, 'the revoked key answers -32002 (C20)');
    const all = await admin(['revoke-key', u.email, '--all', '--json'], env);
    assert.deepEqual((JSON.parse(all.stdout) as Array<{ id: string }>).map((k) => k.id), [b.id]);
  });

  test('users lists accounts oldest first', async () => {
    const u = await registerUser(t.app);
    const listed = await admin(['users', '--limit', '500', '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    const emails = (JSON.parse(listed.stdout) as Array<{ email: string }>).map((x) => x.email);
    assert.ok(emails.includes(u.email));
  });

  test('clear errors: no token (2), a wrong token (1), an unknown account (1), no gateway at the URL (1)', async () => {
    const none = await admin(['users'], { GATEWAY_URL: t.url });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /ADMIN_TOKEN/);
    const wrong = await admin(['users'], { GATEWAY_URL: t.url, ADMIN_TOKEN: 'not-the-token' });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /refused the admin token/);
    assert.ok(!wrong.stderr.includes('not-the-token'), 'the token is not repeated');
    const unknown = await admin(['find', 'nobody-here@example.com'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no account with the e-mail nobody-here@example.com/);
    const down = await admin(['users', '--url', 'http://127.0.0.1:9'], env);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /no answer from http:\/\/127\.0\.0\.1:9/);
  });

  test('a devnet\'s data folder in the working folder: its token goes to the devnet\'s own gateway only; for another gateway no token is still a usage error (2)', async () => {
    // The devnet ran on 8080 (or recorded no address, as an older one did): this gateway is not it.
    for (const recorded of ['http://localhost:8080', undefined]) {
      const cwd = devnetFolder('the-devnet-token-0123456789abcdef', recorded);
      try {
        const none = await admin(['users'], { GATEWAY_URL: t.url }, cwd);
        assert.equal(none.code, 2, `${recorded}: ${none.stderr}`);
        assert.match(none.stderr, /no admin token: set ADMIN_TOKEN/);
        assert.ok(none.stderr.includes(path.join(cwd, 'data', 'devnet', 'admin-token')), 'names the devnet\'s token file');
        assert.ok(!none.stderr.includes('the-devnet-token'), 'never the token itself');
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
    }
    // The devnet's own gateway: found by its recorded address (localhost or 127.0.0.1), with its token.
    const cwd = devnetFolder(TOKEN, t.url.replace('127.0.0.1', 'localhost'));
    try {
      const own = await admin(['users', '--json'], {}, cwd);
      assert.equal(own.code, 0, own.stderr);
      assert.ok(Array.isArray(JSON.parse(own.stdout)));
      const named = await admin(['users', '--json', '--url', t.url], {}, cwd);
      assert.equal(named.code, 0, named.stderr);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  test('a gateway that redirects elsewhere: the admin token is not sent on, and the command says where it was sent (1)', async () => {
    const seen: IncomingHttpHeaders[] = []; // what the other origin received, headers and all
    const elsewhere = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"success":true,"data":[]}');
    });
    const redirecting = createServer((req, res) => {
      const to = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}${req.url ?? '/'}`;
      res.writeHead(307, { location: to }).end();
    });
    await Promise.all([elsewhere, redirecting].map((srv) => new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))));
    try {
      const from = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`;
      const r = await admin(['users'], { ADMIN_TOKEN: TOKEN, GATEWAY_URL: from });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /answered 307, a redirect to http:\/\/127\.0\.0\.1:\d+\/api\/v1\/admin\/users: the admin token is not sent on/);
      assert.equal(seen.length, 0, 'the other origin got no request');
    } finally {
      await Promise.all([elsewhere, redirecting].map((srv) => new Promise<void>((r) => srv.close(() => r()))));
    }
  });
});
