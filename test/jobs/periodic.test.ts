import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PeriodicJob } from '../../src/jobs/periodic.ts';

/** A run's error fails the test (as an unhandled rejection). */
const noError = (err: unknown): never => assert.fail(String(err));
/** Lets a finished run settle (its promise chain), the timers being mocked. */
const settle = () => new Promise((r) => setImmediate(r));

describe('PeriodicJob: once at start, then every interval', () => {
  test('nothing runs before start; start runs at once (first) and then on every tick', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const runs: boolean[] = [];
    const job = new PeriodicJob({ run: async (first) => void runs.push(first), everyMs: 5, onError: noError });
    t.mock.timers.tick(20);
    assert.deepEqual(runs, []);
    job.start();
    assert.deepEqual(runs, [true], 'the first run started synchronously');
    await settle();
    t.mock.timers.tick(4);
    assert.deepEqual(runs, [true], 'no tick before the interval');
    t.mock.timers.tick(1);
    await settle();
    t.mock.timers.tick(5);
    assert.deepEqual(runs, [true, false, false]);
    await job.stop();
    t.mock.timers.tick(20);
    assert.equal(runs.length, 3, 'no tick after stop');
  });

  test('a tick while a run is going is skipped, and stop waits for that run', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    let started = 0;
    let release!: () => void;
    const job = new PeriodicJob({
      run: () => {
        started += 1;
        return new Promise<void>((resolve) => (release = resolve));
      },
      everyMs: 2,
      onError: noError,
    });
    job.start();
    t.mock.timers.tick(30);
    assert.equal(started, 1, 'ticks during the run were skipped');
    let stopped = false;
    const stopping = job.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, false);
    release();
    await stopping;
    assert.equal(job.started, false);
  });

  test('a failed run goes to onError and the next tick runs again', async (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const errors: unknown[] = [];
    let runs = 0;
    const job = new PeriodicJob({
      run: async () => {
        runs += 1;
        throw new Error(`run ${runs}`);
      },
      everyMs: 5,
      onError: (err) => errors.push(err),
    });
    job.start();
    await settle();
    t.mock.timers.tick(5);
    await settle();
    assert.equal(errors.length, 2);
    await job.stop();
    assert.match(String(errors[0]), /run 1/);
    assert.match(String(errors[1]), /run 2/);
  });

  test('start after stop starts again; start while started does nothing', async () => {
    let runs = 0;
    const job = new PeriodicJob({ run: async () => void (runs += 1), everyMs: 60_000, onError: noError });
    job.start();
    job.start();
    await job.stop();
    assert.equal(runs, 1);
    job.start();
    await job.stop();
    assert.equal(runs, 2);
  });
});
