// C48: background jobs during a database outage say so once (a warning when they start
// failing on storage, an info line when they recover), not at every run. First PeriodicJob with a
// StorageOutageLog alone, then a gateway on a PostgreSQL of the test's own, stopped for a while.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PeriodicJob } from '../../src/jobs/periodic.ts';
import { StorageOutageLog } from '../../src/jobs/storage-outage.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { createPgCluster, type PgCluster, pgBinDir } from '../support/pg-cluster.ts';
import { waitFor } from '../support/wait.ts';

const skip = pgBinDir() ? false : 'no PostgreSQL binaries under /usr/lib/postgresql';

function recorder(): { lines: Array<{ level: string; msg: string }>; log: ConstructorParameters<typeof StorageOutageLog>[0] } {
  const lines: Array<{ level: string; msg: string }> = [];
  const at = (level: string) => (_obj: object, msg: string) => void lines.push({ level, msg });
  return { lines, log: { warn: at('warn'), info: at('info'), debug: at('debug') } };
}

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });

describe('StorageOutageLog with PeriodicJob', () => {
  test('50 runs failing on storage: one warning, then one info line on the first success', async () => {
    const { lines, log } = recorder();
    const errors: unknown[] = [];
    let failing = true;
    let runs = 0;
    const job = new PeriodicJob({
      run: async () => {
        runs++;
        if (failing) throw refused();
      },
      everyMs: 2,
      onError: (err) => errors.push(err),
      outage: new StorageOutageLog(log, 'test sweep'),
    });
    job.start();
    await waitFor(() => runs >= 50, { what: '50 runs' });
    failing = false;
    await waitFor(() => lines.some((l) => l.level === 'info'), { what: 'the recovery line' });
    await job.stop();
    assert.deepEqual(errors, [], 'a storage outage is not handed to onError');
    assert.equal(lines.filter((l) => l.level === 'warn').length, 1);
    assert.equal(lines.filter((l) => l.level === 'info').length, 1);
    assert.match(lines.find((l) => l.level === 'warn')!.msg, /test sweep: the database cannot be reached/);
    assert.match(lines.find((l) => l.level === 'info')!.msg, /test sweep: the database answers again/);
  });

  test('other errors still go to onError, every time', async () => {
    const { lines, log } = recorder();
    const errors: unknown[] = [];
    let runs = 0;
    const job = new PeriodicJob({
      run: async () => {
        runs++;
        throw new Error('a bug');
      },
      everyMs: 2,
      onError: (err) => errors.push(err),
      outage: new StorageOutageLog(log, 'test sweep'),
    });
    job.start();
    await waitFor(() => runs >= 5, { what: '5 runs' });
    await job.stop();
    assert.equal(errors.length, runs);
    assert.deepEqual(lines, []);
  });
});

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
    const warnings = during.map((l) => JSON.parse(l) as { level: number; msg: string; network?: string }).filter((l) => l.level >= 40);
    assert.equal(during.filter((l) => l.includes('webhook outbox claim failed')).length, 0, 'no warning per look at the outbox');
    // One warning per job (per network for a network's follower), however long the outage: none twice.
    const seen = new Map<string, number>();
    for (const w of warnings) seen.set(`${w.msg} ${w.network ?? ''}`, (seen.get(`${w.msg} ${w.network ?? ''}`) ?? 0) + 1);
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
