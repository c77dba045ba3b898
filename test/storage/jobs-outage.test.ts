// C48: a gateway on a PostgreSQL of the test's own, stopped for a while: its background jobs log
// the outage once (a warning when they start failing on storage, an info line when they recover),
// not at every run. The outage log on its own: test/jobs/storage-outage.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createPgCluster, type PgCluster, pgBinDir } from '../support/pg-cluster.ts';
import { waitFor } from '../support/wait.ts';

const skip = pgBinDir() ? false : 'no PostgreSQL binaries under /usr/lib/postgresql';

describe('a gateway whose database stops: the jobs log the outage once (C48)', { skip }, () => {
  let cluster: PgCluster;
  let t: TestApp;

  before(async () => {
    cluster = await createPgCluster();
    cluster.start();
    // The webhook outbox is looked at every 50 ms: a warning per look would be 20 a second.
    t = await startTestApp({ databaseUrl: cluster.url, listen: true, overrides: { webhooks: { pollIntervalMs: 50 }, usage: { flushIntervalMs: 100 } } });
  });
  after(async () => {
    await t?.close().catch(() => {});
    cluster?.destroy();
  });

  test('3 s without the database: at most one warning per job, and one line each when it answers again', async () => {
    const from = t.logs.length;
    cluster.stopImmediate();
    const stoppedAt = Date.now();
    await waitFor(() => t.logs.slice(from).some((l) => l.includes('webhook outbox: the database cannot be reached')), { what: 'the outbox warning' });
    // Long enough for 60 looks at the outbox.
    await new Promise((r) => setTimeout(r, Math.max(0, 3_000 - (Date.now() - stoppedAt))));
    const during = t.logs.slice(from);
    const warnings = during.map((l) => JSON.parse(l) as { level: number; msg: string; network?: string; consumer?: string }).filter((l) => l.level >= 40);
    assert.equal(during.filter((l) => l.includes('webhook outbox claim failed')).length, 0, 'no warning per look at the outbox');
    // One warning per job (per network for a network's follower, per consumer for the follower's
    // asking), however long the outage: none twice.
    const seen = new Map<string, number>();
    for (const w of warnings) {
      const job = `${w.msg} ${w.network ?? ''} ${w.consumer ?? ''}`;
      seen.set(job, (seen.get(job) ?? 0) + 1);
    }
    const repeated = [...seen].filter(([, n]) => n > 1);
    assert.deepEqual(repeated, [], 'a warning repeated during the outage');
    for (const job of ['webhook outbox', 'solver', 'analytics retention sweep', 'whale alert retention sweep', 'faucet: checking unsettled grants']) {
      assert.equal(warnings.filter((w) => w.msg.startsWith(`${job}: the database cannot be reached`)).length, 1, job);
    }

    const restartFrom = t.logs.length;
    cluster.start();
    await waitFor(() => t.logs.slice(restartFrom).some((l) => l.includes('webhook outbox: the database answers again')), { what: 'the recovery line', timeoutMs: 20_000 });
    assert.equal(t.logs.slice(restartFrom).filter((l) => l.includes('webhook outbox: the database answers again')).length, 1);
  });
});
