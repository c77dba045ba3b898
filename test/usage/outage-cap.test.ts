import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { OK } from '../../src/analytics/recorder.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { createPgCluster, type PgCluster, pgBinDir } from '../support/pg-cluster.ts';
import { waitFor } from '../support/wait.ts';

// C48 (docs/decisions.md#c48, "Database part"): while the database is unreachable, usage and
// analytics are held in memory merged by row, at most `usage.maxPendingRows` rows (checked at each
// failed flush); past it the oldest rows are dropped and counted
// (`junction_usage_dropped_rows_total{kind}`, `junction_usage_dropped_requests_total`), and when
// the database returns exactly the rows kept are written.
//
// Real parts: a PostgreSQL of the test's own (stopped with `pg_ctl -m immediate`, every connection
// cut), the whole gateway on a port, calls over HTTP answered by a fake node. The cap is 5 rows.

const skip = pgBinDir() ? false : 'no PostgreSQL binaries under /usr/lib/postgresql';
const CAP = 5;
const NETWORK = 'ethereum';
const HOUR_MS = 3_600_000;

type KeyName = 'a' | 'b';
/** One (key, network, method) row as this test names it: `a eth_blockNumber`. */
type RowName = `${KeyName} ${string}`;

/** `name value` or `name{labels} value` of a Prometheus text, as a number (NaN when absent). */
function metric(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('usage and analytics held in memory during a database outage are capped at usage.maxPendingRows (C48)', { skip }, () => {
  let cluster: PgCluster;
  let node: FakeNode;
  let t: TestApp;
  const keys = {} as Record<KeyName, { id: string; key: string; userId: string }>;

  before(async () => {
    [cluster, node] = await Promise.all([createPgCluster(), startFakeNode()]);
    cluster.start();
    t = await startTestApp({
      databaseUrl: cluster.url,
      listen: true,
      env: { UPSTREAM_ETHEREUM: node.url },
      overrides: { usage: { flushIntervalMs: 2000, maxPendingRows: CAP }, cache: { enabled: false } },
    });
    const a = await createKey(t.app, { name: 'a', networks: [NETWORK] });
    const b = await createKey(t.app, { name: 'b', networks: [NETWORK] }, a.user);
    keys.a = { id: a.id, key: a.key, userId: a.user.id };
    keys.b = { id: b.id, key: b.key, userId: a.user.id };
  });
  after(async () => {
    await t?.close().catch(() => {});
    await node?.close();
    cluster?.destroy();
  });

  /** `times` calls of `method` with key `k` over HTTP, each answered 200 (a known key is served without the database, C48). */
  const call = async (k: KeyName, method: string, times = 1) => {
    for (let i = 0; i < times; i++) {
      const res = await fetch(`${t.url}/v1/${NETWORK}/${keys[k].key}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: i, method, params: [] }),
      });
      const body = (await res.json()) as { result?: unknown; error?: unknown };
      assert.equal(res.status, 200, `${k} ${method}: ${JSON.stringify(body)}`);
      assert.ok('result' in body, `${k} ${method}: ${JSON.stringify(body)}`);
    }
  };
  /**
   * One answered call as the RPC pipeline records it once answered (rpc/pipeline.ts usage, rpc/outcome.ts
   * analytics), made synchronously: the only way to place it deterministically inside a flush under way.
   */
  const recordNow = (k: KeyName, method: string) => {
    const usage = t.app.parts.usage;
    usage.record({ userId: keys[k].userId, keyId: keys[k].id, network: NETWORK, method, computeUnits: 1 });
    usage.analytics?.call(keys[k].userId, keys[k].id, NETWORK, method, 1, OK, 1);
  };
  /** A flush that must fail (the database is down); afterwards the cap holds, usage and analytics alike. */
  const failedFlush = async (during?: () => void) => {
    const usage = t.app.parts.usage;
    // flush() swaps the pending rows synchronously (no flush is under way: the timer is stopped), so what
    // `during` records lands in the rows recorded meanwhile, merged back with the failed batch.
    const flushing = usage.flush();
    during?.();
    await assert.rejects(flushing);
    assert.equal(usage.failing, true);
    assert.ok(usage.pendingRows <= CAP, `usage rows held after a failed flush: ${usage.pendingRows} > ${CAP}`);
    assert.ok(usage.pendingAnalyticsRows <= CAP, `analytics rows held after a failed flush: ${usage.pendingAnalyticsRows} > ${CAP}`);
  };
  const metrics = async () => {
    const res = await fetch(`${t.url}/metrics`);
    assert.equal(res.status, 200);
    return res.text();
  };
  /** What storage holds for the two keys: usage_daily and analytics_hours requests by `key method`. */
  const stored = async (): Promise<{ usage: Record<RowName, number>; analytics: Record<RowName, number> }> => {
    const c = new pg.Client({ connectionString: cluster.url });
    await c.connect();
    const nameOf = (keyId: string, method: string): RowName => `${keyId === keys.a.id ? 'a' : 'b'} ${method}`;
    try {
      const ids = [keys.a.id, keys.b.id];
      const u = await c.query<{ key_id: string; network: string; method: string; n: string }>(
        'select key_id, network, method, sum(requests)::text as n from usage_daily where key_id = any($1) group by 1, 2, 3',
        [ids],
      );
      const a = await c.query<{ key_id: string; network: string; method: string; n: string }>(
        `select s.key_id, s.network, s.method, sum(r.requests)::text as n
           from analytics_hours r join analytics_series s on s.id = r.series where s.key_id = any($1) group by 1, 2, 3`,
        [ids],
      );
      for (const r of [...u.rows, ...a.rows]) assert.equal(r.network, NETWORK);
      return {
        usage: Object.fromEntries(u.rows.map((r) => [nameOf(r.key_id, r.method), Number(r.n)])),
        analytics: Object.fromEntries(a.rows.map((r) => [nameOf(r.key_id, r.method), Number(r.n)])),
      };
    } finally {
      await c.end();
    }
  };
  const sorted = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));

  test('past the cap the oldest rows are dropped and counted, metrics say so, and exactly the kept rows are written when the database returns', async () => {
    // Analytics rows are per UTC hour (usage per day: the runner's day guard): a test across an
    // hour would hold each row twice. Clear of the hour's end first.
    const left = HOUR_MS - (Date.now() % HOUR_MS);
    if (left < 60_000) await new Promise((r) => setTimeout(r, left + 100));
    const usage = t.app.parts.usage;

    // Each key is used once before the outage: its entry is then in the key cache, and these rows are stored.
    await call('a', 'web3_clientVersion');
    await call('b', 'web3_clientVersion');
    // close() writes what is left and stops the periodic flush for good; the service goes on
    // recording and flushing on demand, so the test alone decides when a flush happens.
    await usage.close();
    assert.equal(usage.pendingRows, 0);
    assert.deepEqual(await stored(), { usage: { 'a web3_clientVersion': 1, 'b web3_clientVersion': 1 }, analytics: { 'a web3_clientVersion': 1, 'b web3_clientVersion': 1 } });

    cluster.stopImmediate();

    // 1. Three distinct rows (oldest first), one of them called again: merged, not a row more.
    await call('a', 'eth_blockNumber', 3); // R1
    await call('b', 'eth_blockNumber'); // R2: the same method with another key is another row
    await call('a', 'eth_gasPrice', 2); // R3
    await call('a', 'eth_blockNumber'); // R1 again: 4 requests
    assert.equal(usage.pendingRows, 3, 'a row called again is merged, not counted twice');
    assert.equal(usage.pendingAnalyticsRows, 3);
    // Under the cap: the failed flush keeps all. While it is under way, a new row and a call to a
    // row of the failing batch are recorded (the meanwhile rows of the merge).
    await failedFlush(() => {
      recordNow('b', 'net_version'); // R4, 2 requests
      recordNow('b', 'net_version');
      recordNow('a', 'eth_gasPrice'); // R3 again: 3 requests
    });
    assert.equal(usage.pendingRows, 4);
    assert.equal(usage.pendingAnalyticsRows, 4);
    assert.deepEqual(usage.dropped, { usageRows: 0, usageRequests: 0, analyticsRows: 0 });

    // 2. Two new rows: 6 held until the next flush checks the cap.
    await call('b', 'eth_gasPrice'); // R5
    await call('a', 'net_version', 2); // R6
    assert.equal(usage.pendingRows, 6);
    assert.equal(usage.pendingAnalyticsRows, 6);
    // The failing flush finds 6 rows; during it the oldest row (R1) is called once more: it is still
    // the oldest (its place is its first call's) and is dropped with its 5 requests.
    await failedFlush(() => recordNow('a', 'eth_blockNumber'));
    assert.equal(usage.pendingRows, CAP);
    assert.equal(usage.pendingAnalyticsRows, CAP);
    assert.deepEqual(usage.dropped, { usageRows: 1, usageRequests: 5, analyticsRows: 1 });

    // 3. Before any other flush (the row recorded meanwhile is still the one today's calls count
    // into), the dropped row is called again: a new row (R1'), counting from 0, not the dropped
    // counts brought back, nor counted into the dropped row and lost. 6 held until the next flush,
    // which drops the oldest (R2).
    await call('a', 'eth_blockNumber'); // R1': 1 request
    assert.equal(usage.pendingRows, CAP + 1);
    assert.equal(usage.pendingAnalyticsRows, CAP + 1);
    await failedFlush();
    assert.deepEqual(usage.dropped, { usageRows: 2, usageRequests: 6, analyticsRows: 2 });

    // 4. Retries with nothing new drop nothing more and count nothing twice.
    await failedFlush();
    await failedFlush();
    assert.equal(usage.pendingRows, CAP);
    assert.equal(usage.pendingAnalyticsRows, CAP);
    assert.deepEqual(usage.dropped, { usageRows: 2, usageRequests: 6, analyticsRows: 2 });

    // 5. A call to a kept row (R6) adds no row; a new row (R7) pushes out the oldest kept one (R3).
    await call('a', 'net_version'); // R6: 3 requests
    await call('a', 'eth_chainId'); // R7
    assert.equal(usage.pendingRows, CAP + 1);
    await failedFlush();
    assert.equal(usage.pendingRows, CAP);
    assert.equal(usage.pendingAnalyticsRows, CAP);
    assert.deepEqual(usage.dropped, { usageRows: 3, usageRequests: 9, analyticsRows: 3 });
    // 8 distinct rows recorded during the outage, 5 held, 3 dropped (R1, R2, R3: the oldest).

    // The metrics say the same.
    const during = await metrics();
    assert.equal(metric(during, 'junction_usage_flush_failing'), 1);
    assert.equal(metric(during, 'junction_usage_pending_rows'), CAP);
    assert.equal(metric(during, 'junction_analytics_pending_rows'), CAP);
    assert.equal(metric(during, 'junction_usage_dropped_rows_total', '{kind="usage"}'), 3);
    assert.equal(metric(during, 'junction_usage_dropped_rows_total', '{kind="analytics"}'), 3);
    assert.equal(metric(during, 'junction_usage_dropped_requests_total'), 9);

    // The database returns: exactly the kept rows are written, with every request they counted.
    cluster.start();
    await waitFor(
      async () => {
        try {
          await usage.flush();
          return true;
        } catch {
          return false;
        }
      },
      { timeoutMs: 30_000, what: 'a usage flush succeeds once the database is back' },
    );
    assert.equal(usage.failing, false);
    assert.equal(usage.pendingRows, 0);
    assert.equal(usage.pendingAnalyticsRows, 0);
    const kept = { 'b net_version': 2, 'b eth_gasPrice': 1, 'a net_version': 3, 'a eth_chainId': 1, 'a eth_blockNumber': 1 };
    const expected = sorted({ 'a web3_clientVersion': 1, 'b web3_clientVersion': 1, ...kept });
    const now = await stored();
    assert.deepEqual(sorted(now.usage), expected, 'usage: the rows kept, none dropped, nothing lost');
    assert.deepEqual(sorted(now.analytics), expected, 'analytics: the rows kept, none dropped, nothing lost');

    // Dropped counts stay counted (counters); the gauges are back to 0.
    const back = await metrics();
    assert.equal(metric(back, 'junction_usage_flush_failing'), 0);
    assert.equal(metric(back, 'junction_usage_pending_rows'), 0);
    assert.equal(metric(back, 'junction_analytics_pending_rows'), 0);
    assert.equal(metric(back, 'junction_usage_dropped_rows_total', '{kind="usage"}'), 3);
    assert.equal(metric(back, 'junction_usage_dropped_rows_total', '{kind="analytics"}'), 3);
    assert.equal(metric(back, 'junction_usage_dropped_requests_total'), 9);
  });
});

// C48 with workers: the rows a worker hands over (UsageService.absorb) past the cap are the new ones
// dropped, for analytics as for usage; a row already held takes the worker's counts.
describe('a worker\'s handover past the cap drops its new rows, not the rows held (C48)', () => {
  test('held A-E, cap 5, handed A and F: A takes the counts, F is dropped and counted', async () => {
    const { AnalyticsRecorder } = await import('../../src/analytics/recorder.ts');
    const primary = new AnalyticsRecorder(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    for (let i = 0; i < CAP; i++) primary.call('u', 'k', NETWORK, `m${i}`, 1, OK, 1);
    const worker = new AnalyticsRecorder(['m0', 'm5']);
    worker.call('u', 'k', NETWORK, 'm0', 1, OK, 1);
    worker.call('u', 'k', NETWORK, 'm0', 1, OK, 1);
    worker.call('u', 'k', NETWORK, 'm5', 1, OK, 1);
    const handed = worker.take();
    assert.ok(handed);
    assert.equal(primary.absorb(handed, CAP), 1, 'one new row dropped');
    const held = [...(primary.take() ?? new Map()).values()].map((r) => [r.method, r.requests]);
    assert.deepEqual(held, [['m0', 3], ['m1', 1], ['m2', 1], ['m3', 1], ['m4', 1]]);
  });
});
