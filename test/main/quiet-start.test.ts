// A devnet start on a terminal is short: a few lines and a banner naming the dashboard, /docs, a
// call to try and the admin command for the paid features (C52); the dev accounts with their
// private keys and every address are in a file of the data folder, not on the console.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { launchGateway, ROOT } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

/** `npm run admin -- ...` as its own process; resolves with its exit code and output. */
function admin(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const { ADMIN_TOKEN: _ignored, ...rest } = process.env;
    execFile(path.join(ROOT, 'node_modules/.bin/tsx'), ['scripts/admin.ts', ...args], { cwd: ROOT, env: { ...rest, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

describe('a devnet start on a terminal', () => {
  test('prints at most 25 lines at info, ending with the banner; the accounts are in DATA_DIR/devnet/accounts.json; the admin command finds its token there', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-quiet-'));
    // LOG_FORMAT=pretty: the lines a terminal gets.
    const gw = await launchGateway({ args: ['--devnet'], env: { DATA_DIR: dir, LOG_FORMAT: 'pretty', LOG_LEVEL: 'info' }, seeded: true });
    try {
      await waitFor(() => (gw.output().includes('Junction is ready: dashboard') ? true : undefined), { what: 'the banner', timeoutMs: 240_000 });
      // The banner is one log entry of a few lines: let it be written out.
      await waitFor(() => (/admin {6}ADMIN_TOKEN=/.test(gw.output()) ? true : undefined), { what: 'the whole banner' });
      const out = gw.output();
      const lines = out.split('\n').filter((l) => l.trim() !== '');
      assert.ok(lines.length <= 25, `${lines.length} lines:\n${out}`);
      const base = /dashboard (http:\/\/localhost:\d+)\//.exec(out)?.[1];
      assert.ok(base, out);
      assert.match(out, new RegExp(`API docs +${base}/docs`));
      assert.match(out, /try +curl -s http:\/\/localhost:\d+\/public\/main /);
      assert.match(out, /\d+ networks: \d+ answering/, 'one summary line for the networks');
      assert.doesNotMatch(out, /upstreams answer/, 'no line per network');
      // Secrets never at info: not the dev accounts' private keys, not the JWT secret.
      assert.doesNotMatch(out, /privateKey|0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80/);
      const secrets = JSON.parse(readFileSync(path.join(dir, 'secrets.json'), 'utf8')) as { jwtSecret: string };
      assert.ok(!out.includes(secrets.jwtSecret));

      const file = path.join(dir, 'devnet', 'accounts.json');
      assert.ok(out.includes(file), 'the banner names the accounts file');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const details = JSON.parse(readFileSync(file, 'utf8')) as { accounts: Array<{ address: string; privateKey: string }>; chains: Record<string, unknown> };
      assert.equal(details.accounts.length, 10);
      assert.equal(details.accounts[0]?.privateKey, '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
      assert.equal(Object.keys(details.chains).length, 16);

      // C52: paid features in one step. The banner's token is the one in the devnet's folder, which
      // `npm run admin` reads by itself (no ADMIN_TOKEN in its environment).
      const token = /ADMIN_TOKEN=(\S+) npm run admin -- set-tier me@example\.com max/.exec(out)?.[1];
      assert.equal(token, readFileSync(path.join(dir, 'devnet', 'admin-token'), 'utf8').trim());
      const reg = await fetch(`${base}/api/v1/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'me@example.com', password: 'a long enough password 1', name: 'Me' }) });
      assert.equal(reg.status, 200, await reg.text());
      const set = await admin(['set-tier', 'me@example.com', 'max', '--url', base], { DATA_DIR: dir });
      assert.equal(set.code, 0, set.out);
      assert.match(set.out, /plan max/);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
