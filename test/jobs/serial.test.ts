import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SerialJob } from '../../src/jobs/serial.ts';

/** A pass that waits until released, counting how many started. */
function gatedPasses() {
  const state = { started: 0, releases: [] as (() => void)[] };
  const pass = () => {
    state.started += 1;
    return new Promise<void>((resolve) => state.releases.push(resolve));
  };
  const releaseNext = async () => {
    await new Promise((r) => setImmediate(r));
    state.releases.shift()?.();
  };
  return { state, pass, releaseNext };
}

describe('SerialJob: run now or right after', () => {
  test('a request while idle starts a pass at once', async () => {
    let passes = 0;
    const job = new SerialJob(async () => {
      passes += 1;
    });
    const run = job.request();
    assert.equal(passes, 1, 'the pass started synchronously');
    await run;
    assert.equal(job.busy, false);
  });

  test('requests during a pass make exactly one more pass right after, never two at once', async () => {
    const { state, pass, releaseNext } = gatedPasses();
    let overlapping = 0;
    let inPass = 0;
    const job = new SerialJob(async () => {
      inPass += 1;
      overlapping = Math.max(overlapping, inPass);
      await pass();
      inPass -= 1;
    });
    const run = job.request();
    const again = [job.request(), job.request(), job.request()];
    assert.equal(state.started, 1);
    assert.ok(again.every((p) => p === run), 'a request during a run joins it');
    await releaseNext();
    await new Promise((r) => setImmediate(r));
    assert.equal(state.started, 2, 'one more pass for three requests');
    await releaseNext();
    await run;
    assert.equal(state.started, 2);
    assert.equal(overlapping, 1);
  });

  test('a pass may ask for another pass itself', async () => {
    let passes = 0;
    const job = new SerialJob(async () => {
      passes += 1;
      if (passes < 3) void job.request();
    });
    await job.request();
    assert.equal(passes, 3);
  });

  test('an error ends the run and goes to onError, dropping the pass asked for meanwhile', async () => {
    const errors: unknown[] = [];
    let passes = 0;
    const job = new SerialJob(
      async () => {
        passes += 1;
        void job.request();
        throw new Error('boom');
      },
      { onError: (err) => errors.push(err) },
    );
    await job.request();
    assert.equal(passes, 1);
    assert.equal(errors.length, 1);
    await job.request();
    assert.equal(passes, 2, 'the next request runs again');
  });

  test('without onError the run rejects with the error', async () => {
    const job = new SerialJob(async () => {
      throw new Error('boom');
    });
    await assert.rejects(job.request(), /boom/);
    assert.equal(job.busy, false);
  });

  test('after stop no pass starts, and stop waits for the pass in progress without running the one asked for', async () => {
    const { state, pass, releaseNext } = gatedPasses();
    const job = new SerialJob(pass);
    void job.request();
    void job.request();
    const stopped = job.stop();
    let done = false;
    void stopped.then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'stop waits for the pass');
    await releaseNext();
    await stopped;
    assert.equal(state.started, 1);
    await job.request();
    assert.equal(state.started, 1);
  });

  test('idle waits until the pass asked for during the run has ended too', async () => {
    const { state, pass, releaseNext } = gatedPasses();
    const job = new SerialJob(pass);
    void job.request();
    let idle = false;
    const waiting = job.idle().then(() => (idle = true));
    void job.request();
    await releaseNext();
    await new Promise((r) => setImmediate(r));
    assert.equal(state.started, 2);
    assert.equal(idle, false, 'the second pass is still running');
    await releaseNext();
    await waiting;
    assert.equal(job.busy, false);
  });
});
