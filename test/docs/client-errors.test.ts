// The table of what viem and ethers show for each gateway error (docs/rpc.md) is what they really do:
// each error is provoked through the gateway and caught in both clients, and the table's row for
// that code names the same viem class and code and the same ethers error code.
// slow: every gateway error provoked through viem and ethers
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FetchRequest, JsonRpcProvider } from 'ethers';
import { createPublicClient, http } from 'viem';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { ROOT } from '../support/process.ts';

const ADMIN_TOKEN = 'admin-token-for-client-error-tests';
const doc = readFileSync(path.join(ROOT, 'docs/rpc.md'), 'utf8');

/** The row of the table whose first cell starts with the code. */
function row(code: number): { viem: string; ethers: string } {
  // The first cell is the code and what it means ("| -32005 rate limit, 429 | ..."), unlike the code table above it.
  const line = doc.split('\n').find((l) => new RegExp(`^\\| ${code} [^|]+\\|`).test(l) && l.split('|').length === 5);
  assert.ok(line, `a row for ${code} in the client table of docs/rpc.md`);
  const cells = line.split('|').map((c) => c.trim());
  return { viem: cells[2] as string, ethers: cells[3] as string };
}

async function viemError(url: string, method: string): Promise<{ name: string; code: unknown }> {
  const client = createPublicClient({ transport: http(url, { retryCount: 0 }) });
  try {
    await client.request({ method: method as 'eth_blockNumber', params: [] as never });
  } catch (err) {
    return { name: (err as Error).name, code: (err as { code?: unknown }).code };
  }
  assert.fail(`viem: ${method} at ${url} did not fail`);
}

async function ethersError(url: string, method: string): Promise<{ code: unknown; message: string }> {
  const req = new FetchRequest(url);
  // ethers retries 429s with back-off: two short attempts are enough to see what it ends with.
  req.setThrottleParams({ maxAttempts: 2, slotInterval: 10 });
  // ethers waits `Retry-After` as milliseconds before its retry: a quota refusal's (the seconds to
  // midnight UTC, up to 86,400) would hold this test up to 86 s. Not retried, a 429 ends the same
  // way as one whose retries are used up (docs/rpc.md: "as -32005").
  req.retryFunc = async (_req, res) => Number(res.headers['retry-after'] ?? 0) <= 60;
  const provider = new JsonRpcProvider(req, 50, { staticNetwork: true, batchMaxCount: 1 });
  try {
    await provider.send(method, []);
  } catch (err) {
    return { code: (err as { code?: unknown }).code, message: (err as Error).message };
  } finally {
    provider.destroy();
  }
  assert.fail(`ethers: ${method} at ${url} did not fail`);
}

describe("docs/rpc.md: what viem and ethers show for the gateway's errors", () => {
  let t: TestApp;
  let ok: FakeNode;
  let down: FakeNode;
  const cases: Array<{ code: number; url: () => Promise<string>; method?: string }> = [];

  before(async () => {
    [ok, down] = await Promise.all([startFakeNode({ head: 5 }), startFakeNode()]);
    await down.setMode('status500');
    t = await startTestApp({ listen: true, env: { ADMIN_TOKEN, UPSTREAM_NATIVE_TESTNET: ok.url, UPSTREAM_AVALANCHE_FUJI: down.url } });
    const call = (url: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }) });
    const v1 = (slug: string, key: string) => `${t.url}/v1/${slug}/${key}`;
    cases.push(
      { code: -32001, url: async () => v1('native-testnet', 'jk_live_00000000nosuchkeynosuchkeynosuchkeynosuchkey0000') },
      {
        code: -32002,
        url: async () => {
          const k = await createKey(t.app, { networks: ['native-testnet'] });
          const res = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/revoke`, headers: k.user.auth });
          assert.equal(res.statusCode, 200, res.body);
          return v1('native-testnet', k.key);
        },
      },
      { code: -32003, url: async () => v1('native-testnet', (await createKey(t.app, { networks: ['ethereum'] })).key) },
      { code: -32004, url: async () => v1('no-such-network', (await createKey(t.app, { networks: ['native-testnet'] })).key) },
      {
        code: -32005,
        url: async () => {
          const url = v1('native-testnet', (await createKey(t.app, { networks: ['native-testnet'], rateLimit: 1 })).key);
          assert.equal((await call(url)).status, 200);
          return url;
        },
      },
      {
        code: -32006,
        url: async () => {
          const k = await createKey(t.app, { networks: ['native-testnet'] });
          const res = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${k.user.id}`, headers: { 'x-admin-token': ADMIN_TOKEN }, payload: { limits: { dailyLimit: 1 } } });
          assert.equal(res.statusCode, 200, res.body);
          const url = v1('native-testnet', k.key);
          assert.equal((await call(url)).status, 200);
          return url;
        },
      },
      { code: -32601, method: 'eth_sign', url: async () => v1('native-testnet', (await createKey(t.app, { networks: ['native-testnet'] })).key) },
      { code: -32000, url: async () => v1('avalanche-fuji', (await createKey(t.app, { networks: ['avalanche-fuji'] })).key) },
    );
  });
  after(async () => {
    await t?.close();
    await Promise.all([ok?.close(), down?.close()]);
  });

  test('each row names the viem class and code, and the ethers code, that the clients really give', async () => {
    for (const c of cases) {
      const method = c.method ?? 'eth_blockNumber';
      const r = row(c.code);
      // viem: a fresh key for each client where the error spends something (rate, quota).
      const v = await viemError(await c.url(), method);
      assert.ok(r.viem.includes(`\`${v.name}\``), `${c.code}: viem throws ${v.name}; docs/rpc.md says ${r.viem}`);
      assert.equal(v.code, c.code, `${c.code}: viem's err.code`);
      assert.ok(r.viem.includes(`(${c.code}`), `${c.code}: docs/rpc.md gives viem's code`);
      const e = await ethersError(await c.url(), method);
      const said = r.ethers.startsWith('as ') ? row(Number(/as (-\d+)/.exec(r.ethers)?.[1])).ethers : r.ethers;
      assert.ok(said.includes(`\`${String(e.code)}\``), `${c.code}: ethers throws ${String(e.code)} (${e.message.slice(0, 120)}); docs/rpc.md says ${r.ethers}`);
    }
  });
});
