// A devnet start on a terminal is short: a few lines and a banner naming the dashboard, /docs, a
// call to try and the admin command for the paid features (C52); the dev accounts with their
// private keys and every address are in a file of the data folder, not on the console.
// slow: the real gateway process with its devnet
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { launchGateway, ROOT } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

/**
 * `npm run admin -- ...` as its own process, in an empty folder and with none of the settings that
 * name a gateway or a token but `env`'s; resolves with its exit code and output.
 */
function admin(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const { ADMIN_TOKEN: _t, GATEWAY_URL: _g, PUBLIC_URL: _u, PORT: _p, DATA_DIR: _d, ...rest } = process.env;
    const cwd = mkdtempSync(path.join(tmpdir(), 'junction-admin-cwd-'));
    execFile(path.join(ROOT, 'node_modules/.bin/tsx'), [path.join(ROOT, 'scripts/admin.ts'), ...args], { cwd, env: { ...rest, ...env } }, (err, stdout, stderr) => {
      rmSync(cwd, { recursive: true, force: true });
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

describe('a devnet start on a terminal', () => {
  test('prints at most 25 lines at info, ending with the banner; the accounts are in DATA_DIR/devnet/accounts.json; the printed admin command reaches this gateway, and the admin command finds its token and address there', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-quiet-'));
    // LOG_FORMAT=pretty: the lines a terminal gets.
    const gw = await launchGateway({ args: ['--devnet'], env: { DATA_DIR: dir, LOG_FORMAT: 'pretty', LOG_LEVEL: 'info' }, seeded: true });
    try {
      await waitFor(() => (gw.output().includes('Junction is ready: dashboard') ? true : undefined), { what: 'the banner', timeoutMs: 240_000 });
      // The banner is one log entry of a few lines: let it be written out.
      await waitFor(() => (/admin {6}ADMIN_TOKEN=.* --url \S+\n/.test(gw.output()) ? true : undefined), { what: 'the whole banner' });
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

      // C52: paid features in one step. The banner's command names this gateway (its port is not
      // 8080): run as printed, from another folder, it reaches the gateway that printed it.
      const printed = /admin {6}ADMIN_TOKEN=(\S+) npm run admin -- (.+)$/m.exec(out);
      assert.ok(printed?.[1] && printed[2], out);
      assert.equal(printed[1], readFileSync(path.join(dir, 'devnet', 'admin-token'), 'utf8').trim());
      assert.notEqual(new URL(base).port, '8080');
      const reg = await fetch(`${base}/api/v1/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'me@example.com', password: 'a long enough password 1', name: 'Me' }) });
      assert.equal(reg.status, 200, await reg.text());
      const set = await admin(printed[2].split(' '), { ADMIN_TOKEN: printed[1] });
      assert.equal(set.code, 0, set.out);
      assert.match(set.out, /plan max/);
      // With neither a token nor an address, the command takes both from the devnet's data folder.
      const found = await admin(['find', 'me@example.com'], { DATA_DIR: dir });
      assert.equal(found.code, 0, found.out);
      assert.match(found.out, /plan max/);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a devnet start without a terminal (a container, systemd, CI)', () => {
  test('writes one JSON event per line, none of them kilobytes long; the banner is one event whose lines are its fields; it listens on 127.0.0.1 (C59)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-json-start-'));
    // stdout is a pipe, no LOG_FORMAT: the format a collector gets. HOST empty: the devnet's own default.
    const { LOG_FORMAT: _f, ...env } = process.env;
    const gw = await launchGateway({ args: ['--devnet'], env: { ...env, LOG_FORMAT: '', HOST: '', DATA_DIR: dir, LOG_LEVEL: 'info' }, seeded: true });
    try {
      await waitFor(() => (gw.output().includes('"msg":"Junction is ready: dashboard') ? true : undefined), { what: 'the ready line', timeoutMs: 240_000 });
      const lines = gw.output().split('\n').filter((l) => l !== '');
      const events = lines.map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string });
      for (const l of lines) assert.ok(Buffer.byteLength(l) < 2048, `a line of ${Buffer.byteLength(l)} bytes: ${l.slice(0, 300)}...`);
      for (const e of events) assert.ok(!e.msg.includes('\n'), `one event, one line: ${JSON.stringify(e.msg)}`);
      const contracts = events.find((e) => e.msg.startsWith('devnet contracts deployed'));
      assert.equal(contracts?.networks, 16, 'the contracts line counts the chains; the addresses are in the file');
      const ready = events.find((e) => e.msg.startsWith('Junction is ready'));
      const base = String(ready?.dashboard).replace(/\/$/, '');
      assert.equal(ready?.docs, `${base}/docs`);
      assert.match(String(ready?.try), /^curl -s http:\/\/localhost:\d+\/public\/main /);
      assert.equal(ready?.accounts, path.join(dir, 'devnet', 'accounts.json'));
      assert.match(String(ready?.admin), new RegExp(`^ADMIN_TOKEN=\\S+ npm run admin -- set-tier me@example\\.com max --url ${base}$`));
      const listening = events.find((e) => e.msg === 'Junction is listening');
      assert.match(String(listening?.address), /^http:\/\/127\.0\.0\.1:\d+$/, 'C59: on this machine only');
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
