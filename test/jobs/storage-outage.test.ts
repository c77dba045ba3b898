// C48: background jobs during a database outage say so once (a warning when they start
// failing on storage, an info line when they recover), not at every run: PeriodicJob with a
// StorageOutageLog (src/jobs/storage-outage.ts). The gateway's jobs on a PostgreSQL stopped for a
// while: test/storage/jobs-outage.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PeriodicJob } from '../../src/jobs/periodic.ts';
import { StorageOutageLog } from '../../src/jobs/storage-outage.ts';
import { waitFor } from '../support/wait.ts';

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
