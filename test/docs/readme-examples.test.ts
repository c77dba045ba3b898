// The examples of the README and of docs/ run as a newcomer types them, from where they are
// written: the README's "Try it" curl lines (which set TOKEN and KEY with jq), its WebSocket example
// in the same shell, its paid-features lines (the admin command, C52), then each docs file's
// examples in the order shown, each file in a new shell. Only the address changes (the docs
// assume localhost:8080). And no example uses a shell variable its file has not set before it.
// slow: the README examples run in a shell against the real process
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ended, ROOT } from '../support/process.ts';

const ADMIN_TOKEN = 'admin-token-for-readme-examples';
const read = (rel: string) => readFileSync(path.join(ROOT, rel), 'utf8');
const readme = read('README.md');
const docFiles = readdirSync(path.join(ROOT, 'docs'))
  .filter((n) => n.endsWith('.md'))
  .map((n) => `docs/${n}`);

/** The ```sh blocks of a Markdown text, in order. */
function shBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => m[1] as string);
}

/** The first ```sh block after `marker` in the README. */
function shBlockAfter(marker: string): string {
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, `the README has "${marker}"`);
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m?.[1], `a sh block after "${marker}"`);
  return m[1];
}

/** A line without its shell comment (a `#` at the start or after a blank). */
const code = (line: string) => line.replace(/(^|\s)#.*$/, '');

/** Shell variables used before the file set them, as `NAME in block N`. */
function unsetVariables(markdown: string): string[] {
  const set = new Set<string>();
  const problems: string[] = [];
  shBlocks(markdown).forEach((block, i) => {
    for (const line of block.split('\n').map(code)) {
      for (const m of line.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\b(?!\.)/g)) {
        const name = m[1] as string;
        if (!set.has(name)) problems.push(`$${name} in sh block ${i + 1}`);
      }
      for (const m of line.matchAll(/(?:^|\s)(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=/g)) set.add(m[1] as string);
    }
  });
  return problems;
}

const VARIABLES = /\$\{?(BASE|TOKEN|KEY|KEY_ID)\b|^\s*(BASE|TOKEN|KEY|KEY_ID)=/m;
/** The blocks of a docs file that use or set the README's variables and can run as written (no `…` placeholder, nothing to download). */
function runnableBlocks(markdown: string): string[] {
  return shBlocks(markdown).filter((b) => {
    const commands = b.split('\n').map(code).join('\n');
    return VARIABLES.test(commands) && !commands.includes('…') && !/\bnpx\b/.test(commands);
  });
}

function bash(script: string, timeoutMs: number, env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    // Without the caller's variables: the script must set them itself.
    const full: Record<string, string | undefined> = { ...process.env, ...env };
    for (const name of ['BASE', 'KEY', 'TOKEN', 'KEY_ID']) delete full[name];
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env: full, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    void ended(child).then(({ code }) => resolve({ code, out, err }));
  });
}

describe('README and docs/: every shell variable an example uses is set before it, in its own file', () => {
  for (const file of ['README.md', ...docFiles]) {
    test(file, () => {
      assert.deepEqual(unsetVariables(read(file)), []);
    });
  }
});

describe('README and docs/: the examples, as written', () => {
  let t: TestApp;
  let host: string;
  before(async () => {
    // As `npm start -- --devnet`, which the README's examples assume: webhooks may target any host
    // (the webhook example's example.com is not looked up, so the test needs no DNS).
    t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], listen: true, env: { ADMIN_TOKEN }, overrides: { webhooks: { allowPrivateTargets: true } } });
    host = new URL(t.url).host;
  });
  after(async () => {
    await t?.close();
  });

  test('the curl lines set TOKEN and KEY with jq and get a block number, the masternodes and the usage; the WebSocket example then gets new heads; the admin command (C52) then opens whale alerts and analytics to the same token', async () => {
    const curl = shBlockAfter('## Try it');
    const ws = shBlockAfter('A WebSocket subscription with nothing to download');
    const paid = shBlockAfter('**Paid features**');
    assert.match(curl, /^TOKEN=\$\(curl [^)]*\| jq -r/m);
    assert.match(curl, /^KEY=\$\(curl [^)]*\| jq -r/m);
    assert.match(paid, /^npm run admin -- set-tier me@example\.com max/m);
    // One shell, in the README's order. The WebSocket example prints every message: the first ones are enough.
    const script = `set -e\n${curl}\necho ---ws---\n${ws.trim()} | head -n 3\necho ---paid---\n${paid}`.replaceAll('localhost:8080', host);
    // The admin command finds the gateway through GATEWAY_URL and its token in ADMIN_TOKEN, as the README says.
    const r = await bash(script, 120_000, { ADMIN_TOKEN, GATEWAY_URL: t.url });
    assert.equal(r.code, 0, `${r.out}\n${r.err}`);
    const [before, rest] = r.out.split('---ws---\n');
    const [after, paidOut] = (rest ?? '').split('---paid---\n');
    // eth_blockNumber's answer (curl prints no newline after it), the masternodes (jq), the usage count.
    const first = /^\{"jsonrpc":"2\.0","id":1,"result":"0x[0-9a-f]+"\}/.exec(before ?? '');
    assert.ok(first, `the block number first: ${before}`);
    const lines = (before ?? '').slice(first[0].length).trim().split('\n');
    const masternodes = JSON.parse(lines.slice(0, -1).join('\n')) as string[];
    assert.ok(Array.isArray(masternodes) && masternodes.length > 0, `masternodes: ${lines.slice(0, -1).join('\n')}`);
    for (const a of masternodes) assert.match(a, /^(0x|xdc)[0-9a-fA-F]{40}$/);
    assert.match(lines.at(-1) ?? '', /^\d+$/, 'the usage count');
    const messages = (after ?? '').trim().split('\n').map((l) => JSON.parse(l) as { id?: number; result?: string; method?: string; params?: { result?: { number?: string } } });
    assert.equal(messages.length, 3, after);
    assert.equal(messages[0]?.id, 1);
    assert.match(messages[0]?.result ?? '', /^0x[0-9a-f]+$/, 'a subscription id');
    for (const m of messages.slice(1)) {
      assert.equal(m.method, 'eth_subscription');
      assert.match(m.params?.result?.number ?? '', /^0x[0-9a-f]+$/, 'a new head');
    }
    // The admin command's own lines (npm's header, its report), then the two jq answers.
    const paidLines = (paidOut ?? '').trim().split('\n');
    assert.match(paidLines.at(-2) ?? '', /^\d+$/, `the whale alerts listed: ${r.out}\n${r.err}`);
    assert.equal(paidLines.at(-1), '"day"', `the analytics answer: ${r.out}\n${r.err}`);
  });

  // After the README, in a new shell each; docs/rest-api.md last, as its example puts allowlists on the key.
  const ORDER = ['docs/rpc.md', 'docs/websocket.md', 'docs/faucet.md', 'docs/whales-and-webhooks.md', 'docs/balance-and-intents.md', 'docs/rest-api.md'];
  test('every docs file with runnable examples is in the order the test knows', () => {
    const withExamples = docFiles.filter((f) => runnableBlocks(read(f)).length > 0).sort();
    assert.deepEqual(withExamples, [...ORDER].sort());
  });
  for (const file of ORDER) {
    test(`${file}: its examples run in the order shown, after signing in again`, async () => {
      const blocks = runnableBlocks(read(file));
      assert.ok(blocks.length > 0, `${file} has runnable examples`);
      const script = `set -e\n${blocks.join('\n')}\necho\n[ -n "$TOKEN" ] && [ "$TOKEN" != null ] && [ "\${KEY:-x}" != null ]\n`.replaceAll('localhost:8080', host);
      const r = await bash(script, 60_000);
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.doesNotMatch(r.out, /"success":false|"error":/, r.out);
      for (const line of r.out.split('\n').filter((l) => l.startsWith('{'))) assert.match(line, /"success":true|"result":/, line);
    });
  }
});
