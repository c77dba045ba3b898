// C57: the stop every gateway process shares (one process, the primary, its workers), driven by
// signals from an emitter and an exit that records its code instead of ending the test process.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import pino from 'pino';
import { GracefulStop, type GracefulStopOptions } from '../../src/http/graceful-stop.ts';

interface Line {
  level: number;
  msg: string;
  signal?: string;
  err?: { message: string };
}

/** A stop listening on an emitter: its log lines, the exit codes it gave, and a promise of the first. */
function setUp(opts: Partial<GracefulStopOptions> = {}) {
  const lines: Line[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (chunk, _enc, cb) => (lines.push(JSON.parse(String(chunk)) as Line), cb()) }));
  const exits: number[] = [];
  let exited!: (code: number) => void;
  const firstExit = new Promise<number>((resolve) => (exited = resolve));
  const signals = new EventEmitter();
  const stop = new GracefulStop({
    log,
    limitMs: 5_000,
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
    ...opts,
  }).listen(signals);
  const said = (msg: string) => lines.filter((l) => l.msg === msg);
  return { stop, signals, lines, said, exits, firstExit };
}

/** Steps that count their runs and wait until `finish()`. */
function heldSteps() {
  let runs = 0;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return {
    steps: async () => {
      runs++;
      await done;
    },
    runs: () => runs,
    finish: () => finish(),
  };
}

describe('GracefulStop (C57)', () => {
  test('a repeated signal during a stop is ignored at debug: the steps run once and the process exits once, with 0', async () => {
    const held = heldSteps();
    const t = setUp({ steps: held.steps });
    t.signals.emit('SIGTERM', 'SIGTERM');
    // The copy relayed by npm, then a Ctrl-C, while the steps are still running.
    t.signals.emit('SIGTERM', 'SIGTERM');
    t.signals.emit('SIGINT', 'SIGINT');
    assert.equal(t.stop.stopping, true);
    assert.equal(held.runs(), 1);
    assert.deepEqual(t.exits, [], 'no exit while the steps run');
    held.finish();
    assert.equal(await t.firstExit, 0);
    t.signals.emit('SIGHUP', 'SIGHUP');
    assert.equal(held.runs(), 1);
    assert.deepEqual(t.exits, [0]);
    assert.deepEqual(t.said('stopping').map((l) => [l.level, l.signal]), [[30, 'SIGTERM']]);
    assert.deepEqual(t.said('already stopping; signal ignored').map((l) => [l.level, l.signal]), [[20, 'SIGTERM'], [20, 'SIGINT'], [20, 'SIGHUP']]);
    assert.equal(t.said('stopped').length, 1);
  });

  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    test(`${signal} begins the stop`, async () => {
      const held = heldSteps();
      const t = setUp({ steps: held.steps });
      t.signals.emit(signal, signal);
      held.finish();
      assert.equal(await t.firstExit, 0);
      assert.equal(held.runs(), 1);
      assert.equal(t.said('stopping')[0]?.signal, signal);
    });
  }

  test('a signal other than the three does not stop', () => {
    const held = heldSteps();
    const t = setUp({ steps: held.steps });
    t.signals.emit('SIGUSR2', 'SIGUSR2');
    assert.equal(t.stop.stopping, false);
    assert.equal(held.runs(), 0);
  });

  test('a step that fails exits 1 with the error logged, not the stop\'s own code', async () => {
    const t = setUp({
      steps: async () => {
        throw new Error('storage would not close');
      },
    });
    t.signals.emit('SIGTERM', 'SIGTERM');
    assert.equal(await t.firstExit, 1);
    assert.equal(t.said('error while stopping')[0]?.err?.message, 'storage would not close');
    assert.deepEqual(t.said('stopped'), []);
  });

  test('steps that outlast the limit exit 1 when it runs out', async () => {
    const held = heldSteps();
    const t = setUp({ steps: held.steps, limitMs: 50 });
    // The limit's timer does not hold a process open (the stop's own work does): this test holds it.
    const holdOpen = setTimeout(() => {}, 5_000);
    const started = performance.now();
    t.signals.emit('SIGTERM', 'SIGTERM');
    assert.equal(await t.firstExit, 1);
    clearTimeout(holdOpen);
    assert.ok(performance.now() - started >= 45, 'not before the limit');
    assert.equal(t.said('graceful stop took too long; exiting').length, 1);
    held.finish();
  });

  test('steps that end in time leave no exit behind them for the limit', async () => {
    const held = heldSteps();
    const t = setUp({ steps: held.steps, limitMs: 50 });
    t.signals.emit('SIGTERM', 'SIGTERM');
    held.finish();
    assert.equal(await t.firstExit, 0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(t.exits, [0]);
  });

  test('a stop the process asks for itself carries its exit code and reason, and a signal after it is ignored', async () => {
    const held = heldSteps();
    const t = setUp({ steps: held.steps });
    void t.stop.stop('start failed', 1);
    t.signals.emit('SIGTERM', 'SIGTERM');
    held.finish();
    assert.equal(await t.firstExit, 1);
    assert.equal(held.runs(), 1);
    assert.equal(t.said('stopping')[0]?.signal, 'start failed');
    assert.equal(t.said('stopped').length, 1);
    assert.equal(t.said('already stopping; signal ignored').length, 1);
  });

  test('before its steps are given a stop only marks stopping (the start ends itself); steps given later do not run for it', async () => {
    const t = setUp();
    t.signals.emit('SIGTERM', 'SIGTERM');
    assert.equal(t.stop.stopping, true);
    assert.equal(t.said('stopping')[0]?.signal, 'SIGTERM');
    const held = heldSteps();
    t.stop.setSteps(held.steps);
    t.signals.emit('SIGINT', 'SIGINT');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(held.runs(), 0);
    assert.deepEqual(t.exits, []);
    assert.equal(t.said('already stopping; signal ignored')[0]?.signal, 'SIGINT');
  });

  test('steps given once the start is far enough run on the first signal', async () => {
    const t = setUp();
    const held = heldSteps();
    t.stop.setSteps(held.steps);
    t.signals.emit('SIGHUP', 'SIGHUP');
    held.finish();
    assert.equal(await t.firstExit, 0);
    assert.equal(held.runs(), 1);
  });
});

describe('a CORS preflight during a stop (C57)', () => {
  test('is answered 204 with Connection: close, on a connection kept alive from before the stop', async () => {
    const { Client } = await import('undici');
    const { startTestApp } = await import('../support/app.ts');
    const t = await startTestApp({ listen: true });
    const client = new Client(t.url, { pipelining: 1 });
    const preflight = () =>
      client.request({ method: 'OPTIONS', path: '/v1/native-mainnet/x', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } }).then(async (r) => {
        await r.body.dump();
        return { status: r.statusCode, connection: r.headers.connection };
      });
    try {
      assert.deepEqual(await preflight(), { status: 204, connection: 'keep-alive' });
      const draining = t.app.parts.drain.drain(3_000);
      assert.deepEqual(await preflight(), { status: 204, connection: 'close' });
      await draining;
    } finally {
      await client.close().catch(() => {});
      await t.close();
    }
  });
});
