// The README's first examples run as a newcomer types them: the curl lines (which set TOKEN and
// KEY with jq) and then the WebSocket example in the same shell, against a gateway in front of a
// devnet chain. Only the address changes (the README assumes localhost:8080).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { ended, ROOT } from '../support/process.ts';

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The first ```sh block after `marker`. */
function shBlockAfter(marker: string): string {
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, `the README has "${marker}"`);
  const m = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m?.[1], `a sh block after "${marker}"`);
  return m[1];
}

function bash(script: string, timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    // Without the caller's KEY or TOKEN: the script must set them itself.
    const env = { ...process.env };
    delete env.KEY;
    delete env.TOKEN;
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    void ended(child).then(({ code }) => resolve({ code, out, err }));
  });
}

describe('README: the first examples, as written', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ devnet: true, devnetNetworks: ['native-mainnet'], listen: true });
  });
  after(async () => {
    await t?.close();
  });

  test('the curl lines set TOKEN and KEY with jq and get a block number, the masternodes and the usage; the WebSocket example then gets new heads', async () => {
    const host = new URL(t.url).host;
    const curl = shBlockAfter('Try it (with `jq`');
    const ws = shBlockAfter('A WebSocket subscription with nothing to download');
    assert.match(curl, /^TOKEN=\$\(curl [^)]*\| jq -r/m);
    assert.match(curl, /^KEY=\$\(curl [^)]*\| jq -r/m);
    // The WebSocket example prints every message: the first ones are enough.
    const script = `set -e\n${curl}\necho ---ws---\n${ws.trim()} | head -n 3\n`.replaceAll('localhost:8080', host);
    const r = await bash(script, 60_000);
    assert.equal(r.code, 0, `${r.out}\n${r.err}`);
    const [before, after] = r.out.split('---ws---\n');
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
  });
});
