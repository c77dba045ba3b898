import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { createPgCluster, type PgCluster, pgBinDir, storedRequests } from '../support/pg-cluster.ts';
import { launchGateway } from '../support/process.ts';
import { freePort, waitFor } from '../support/wait.ts';

// C48, the database part: a PostgreSQL of the test's own is stopped under the gateway (every
// connection cut at once) and started again. A fake node answers the calls: the node is not what
// is tested here.

const skip = pgBinDir() ? false : 'no PostgreSQL binaries under /usr/lib/postgresql';

async function rpc(url: string, id: number): Promise<{ status: number; retryAfter: string | null; body: { result?: unknown; error?: { code: number; what: string; data?: { retryAfter?: number } } } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] }) });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as never };
}

/** `n` calls, `concurrency` at a time; answers their HTTP statuses. */
async function load(url: string, n: number, concurrency = 5): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const id = next++;
        statuses.push((await rpc(url, id)).status);
      }
    }),
  );
  return statuses;
}

describe('the database unreachable under a running gateway (C48)', { skip }, () => {
  let cluster: PgCluster;
  let node: FakeNode;
  let t: TestApp;
  let rpcUrl: string;
  let keyId: string;
  let auth: { authorization: string };
  const BEFORE = 30;
  const DURING = 60;

  before(async () => {
    [cluster, node] = await Promise.all([createPgCluster(), startFakeNode()]);
    cluster.start();
    t = await startTestApp({
      databaseUrl: cluster.url,
      listen: true,
      env: { UPSTREAM_ETHEREUM: node.url },
      // A key cache TTL far shorter than the outage: a known key whose entry expires meanwhile is still served (C48).
      overrides: { usage: { flushIntervalMs: 200, maxPendingRows: 1000 }, cache: { enabled: false }, rpc: { keyCacheTtlMs: 300 } },
    });
    const k = await createKey(t.app, { networks: ['ethereum'] });
    keyId = k.id;
    auth = k.user.auth;
    rpcUrl = `${t.url}/v1/ethereum/${k.key}`;
  });
  after(async () => {
    await t?.close().catch(() => {});
    await node?.close();
    cluster?.destroy();
  });

  test('calls with a known key keep being served, REST and unknown keys answer 503 with Retry-After, readiness names storage, usage is held then written whole', async () => {
    assert.deepEqual(new Set(await load(rpcUrl, BEFORE)), new Set([200]));
    await t.app.parts.usage.flush();

    cluster.stopImmediate();

    // RPC with the key already in memory: answered by the node, every one.
    const during = await load(rpcUrl, DURING);
    assert.deepEqual(new Set(during), new Set([200]), 'every call with a known key is answered 200 while the database is down');

    // A key only the database could tell about: -32603 with HTTP 503 and Retry-After, not a 500.
    const unknown = await rpc(`${t.url}/v1/ethereum/jx_${'0'.repeat(40)}`, 1);
    assert.equal(unknown.status, 503);
    assert.equal(unknown.body.error?.code, -32603);
    assert.ok(Number(unknown.retryAfter) > 0, 'Retry-After on the unknown key');
    assert.equal(unknown.body.error?.data?.retryAfter, Number(unknown.retryAfter));

    // REST: 503 in the C7/C22 envelope with Retry-After.
    const rest = await fetch(`${t.url}/api/v1/api-keys`, { headers: auth });
    assert.equal(rest.status, 503, await rest.clone().text());
    assert.ok(Number(rest.headers.get('retry-after')) > 0, 'Retry-After on REST');
    const body = (await rest.json()) as { success: boolean; error: { code: string; what: string; details?: { retryAfter?: number } } };
    assert.equal(body.success, false);
    assert.equal(body.error.code, 'SERVICE_UNAVAILABLE');
    assert.doesNotMatch(JSON.stringify(body), /ECONNREFUSED|select|insert|127\.0\.0\.1/i, 'no internals');

    // Readiness names storage as down.
    const ready = await fetch(`${t.url}/health/ready`);
    assert.equal(ready.status, 503);
    const checks = ((await ready.json()) as { checks: Record<string, { ok: boolean; error?: string }> }).checks;
    assert.equal(checks.storage?.ok, false);
    // C3: it says why (the refused connection), not which statement probed it.
    assert.match(checks.storage?.error ?? '', /ECONNREFUSED|Connection terminated|the database system is shutting down/, checks.storage?.error);
    assert.doesNotMatch(checks.storage?.error ?? '', /Failed query|select 1|params:/);
    assert.equal((await fetch(`${t.url}/health/live`)).status, 200);

    // Usage is held in memory, shown by the metrics; the warning is logged once, not per flush.
    await waitFor(() => t.app.parts.usage.failing && t.app.parts.usage.pendingRows > 0, { timeoutMs: 30_000, what: 'usage flush failing with rows held' });
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(metrics, /^junction_usage_flush_failing 1$/m);
    const pending = Number(/^junction_usage_pending_rows (\d+)$/m.exec(metrics)?.[1]);
    assert.ok(pending >= 1, `pending rows gauge rises: ${pending}`);
    const flushes = () => t.logs.filter((l) => l.includes('usage flush failed')).length;
    await new Promise((r) => setTimeout(r, 1000)); // several flush intervals of 200 ms
    assert.equal(flushes(), 1, 'one warning on entering the state');

    cluster.start();
    await waitFor(() => !t.app.parts.usage.failing && t.app.parts.usage.pendingRows === 0, { timeoutMs: 60_000, what: 'usage written after the database returns' });
    await t.app.parts.usage.flush();
    assert.equal(t.logs.filter((l) => l.includes('usage flush succeeds again')).length, 1, 'one line on leaving the state');

    const stored = await storedRequests(cluster.url, keyId);
    assert.equal(stored.usage, BEFORE + DURING, 'every call counted in usage: 0 missing');
    assert.equal(stored.analytics, BEFORE + DURING, 'every call counted in analytics: 0 missing');
    assert.equal(t.app.parts.usage.dropped.usageRows, 0);

    // And REST answers again.
    await waitFor(async () => (await fetch(`${t.url}/api/v1/api-keys`, { headers: auth })).status === 200, { timeoutMs: 30_000, what: 'REST answers again' });
  });
});

describe('a gateway started while the database is down (C48)', { skip }, () => {
  let cluster: PgCluster;

  before(async () => {
    cluster = await createPgCluster();
  });
  after(() => cluster?.destroy());

  test('it says it waits for the database, retries, answers live but not ready meanwhile, and listens once the database is started', async () => {
    const port = await freePort();
    const gw = await launchGateway({
      env: { DATABASE_URL: cluster.url, DATA_DIR: 'memory', LOG_FORMAT: 'json', JWT_SECRET: randomBytes(32).toString('hex'), KEY_ENCRYPTION_SECRET: randomBytes(32).toString('hex'), DEVNET: 'false', PORT: String(port) },
    });
    try {
      await waitFor(() => (gw.output().match(/waiting for the database/g) ?? []).length >= 2, { timeoutMs: 60_000, what: `two waiting lines:\n${gw.output()}` });
      assert.doesNotMatch(gw.output(), /Junction is listening|Cannot start/);
      // C3, C57: the port is bound before storage opens; until the start is over it says the
      // process lives, and every other request is told to come back, each in its own shape (C7, C22).
      const base = `http://127.0.0.1:${port}`;
      assert.equal((await fetch(`${base}/health/live`)).status, 200);
      const notReady = await fetch(`${base}/health/ready`);
      assert.equal(notReady.status, 503);
      assert.equal(notReady.headers.get('retry-after'), '1');
      assert.equal(((await notReady.json()) as { error: { code: string } }).error.code, 'SERVICE_UNAVAILABLE');
      const call = await rpc(`${base}/rpc/main/evm/50`, 1);
      assert.equal(call.status, 503);
      assert.equal(call.retryAfter, '1');
      assert.equal(call.body.error?.code, -32000);
      cluster.start();
      await waitFor(() => /"address":"(http:\/\/[^"]+)".*"msg":"Junction is listening"/.test(gw.output()), { timeoutMs: 90_000, what: `listening after the database started:\n${gw.output()}` });
      const url = /"address":"(http:\/\/[^"]+)".*"msg":"Junction is listening"/.exec(gw.output())?.[1] as string;
      assert.equal(url, base, 'the app takes over the port the start bound');
      const ready = await fetch(`${url}/health/ready`);
      assert.equal(ready.status, 200);
      // At most one line per attempt, attempts at least a second apart: a handful, not a flood.
      const waits = (gw.output().match(/waiting for the database/g) ?? []).length;
      assert.ok(waits < 30, `${waits} waiting lines`);
      assert.doesNotMatch(gw.output(), /postgres:\/\/root@127\.0\.0\.1:\d+\/postgres[^"]*"[^\n]*secret/i);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  });
});
