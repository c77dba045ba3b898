import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { createPgCluster, type PgCluster, pgBinDir, storedRequests } from '../support/pg-cluster.ts';
import { waitFor } from '../support/wait.ts';

// C48: a database that hangs rather than goes away. Every process of a PostgreSQL of the
// test's own gets SIGSTOP under load: connections stay open and nothing answers. Calls with known
// keys are answered meanwhile, the usage flush gives up after storage.queryTimeoutMs (short here)
// and holds the counts, and after SIGCONT every call is in usage.

const skip = pgBinDir() ? false : 'no PostgreSQL binaries under /usr/lib/postgresql';
const QUERY_TIMEOUT_MS = 1_000;
const ADMIN = 'admin-token-0123456789abcdef';

async function load(url: string, ms: number, concurrency = 4): Promise<{ statuses: number[]; slowestMs: number }> {
  const statuses: number[] = [];
  let slowestMs = 0;
  const until = Date.now() + ms;
  let id = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const started = performance.now();
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'eth_chainId', params: [] }) });
        await res.arrayBuffer();
        statuses.push(res.status);
        slowestMs = Math.max(slowestMs, performance.now() - started);
      }
    }),
  );
  return { statuses, slowestMs };
}

describe('the database hung (SIGSTOP) under a running gateway (C48)', { skip }, () => {
  let cluster: PgCluster;
  let node: FakeNode;
  let t: TestApp;
  let rpcUrl: string;
  let keyId: string;

  before(async () => {
    [cluster, node] = await Promise.all([createPgCluster(), startFakeNode()]);
    cluster.start();
    t = await startTestApp({
      databaseUrl: cluster.url,
      listen: true,
      env: { UPSTREAM_ETHEREUM: node.url, ADMIN_TOKEN: ADMIN },
      // A key cache TTL far shorter than the hang: an expired entry is served while storage is asked again (C48).
      overrides: { storage: { queryTimeoutMs: QUERY_TIMEOUT_MS }, usage: { flushIntervalMs: 200, maxPendingRows: 1000 }, cache: { enabled: false }, rpc: { keyCacheTtlMs: 300 } },
    });
    const u = await registerUser(t.app);
    // Limits out of the way: the load is what is measured, not the plan.
    await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: { requestsPerMinute: 10_000_000, dailyLimit: 100_000_000 } } });
    const k = await createKey(t.app, { networks: ['ethereum'] }, u);
    keyId = k.id;
    rpcUrl = `${t.url}/v1/ethereum/${k.key}`;
  });
  after(async () => {
    cluster?.thaw();
    await t?.close().catch(() => {});
    await node?.close();
    cluster?.destroy();
  });

  test('calls with a known key are served while it hangs, none waits on it, and usage is whole after SIGCONT', async () => {
    const warm = await load(rpcUrl, 500);
    assert.deepEqual(new Set(warm.statuses), new Set([200]));
    await t.app.parts.usage.flush();

    cluster.freeze();
    let during: Awaited<ReturnType<typeof load>>;
    try {
      // Several flush intervals and query timeouts: the flush fails, the calls go on.
      during = await load(rpcUrl, 3_000);
      await waitFor(() => t.app.parts.usage.failing, { timeoutMs: 10_000, what: 'the usage flush failing on the hung database' });
    } finally {
      cluster.thaw();
    }
    assert.deepEqual(new Set(during.statuses), new Set([200]), 'every call with a known key answered 200');
    // Not a timing measure (bench/scenarios/chaos.ts has those): a call that waited on the hung database would take its query timeout or more.
    assert.ok(during.slowestMs < QUERY_TIMEOUT_MS * 3, `slowest call ${Math.round(during.slowestMs)} ms`);

    await waitFor(() => !t.app.parts.usage.failing && t.app.parts.usage.pendingRows === 0, { timeoutMs: 30_000, what: 'usage written after SIGCONT' });
    await t.app.parts.usage.flush();
    const sent = warm.statuses.length + during.statuses.length;
    assert.equal((await storedRequests(cluster.url, keyId)).usage, sent, 'every call counted in usage: 0 missing, none twice');
    assert.equal(t.app.parts.usage.dropped.usageRows, 0);
  });
});
