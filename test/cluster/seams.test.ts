// C56: the seams through which workers reach what the primary owns, in one process: IPC channels
// over an in-memory pipe (messages cloned as the cluster's `advanced` serialization does, in
// order), the primary's limiter and its embedded database (PGlite in its thread, as in a start).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { sql } from 'drizzle-orm';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.ts';
import { DatabaseError } from '../../src/errors/storage.ts';
import type { Check } from '../../src/metering/limiter.ts';
import { RedisLimiter } from '../../src/metering/redis-limiter.ts';
import { SharedLimiter, SharedLimits } from '../../src/metering/shared-limiter.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { IpcChannel, type IpcEndpoint } from '../../src/storage/ipc.ts';
import { RedisLink } from '../../src/storage/redis.ts';
import { type OpenTransactions, serveSharedPglite, sharedStorage } from '../../src/storage/pglite-shared.ts';
import { pgliteTemplate } from '../support/pglite-template.ts';
import { REDIS_URL, serviceSkip } from '../support/services.ts';

const redisSkip = await serviceSkip('Redis');

/** Two ends of one in-memory IPC pipe; `cut()` is the other process dying. */
function pipe(): { worker: IpcEndpoint; primary: IpcEndpoint; cut: () => void } {
  const ends = [new EventEmitter(), new EventEmitter()] as const;
  let open = true;
  const sender = (to: EventEmitter) => (message: unknown, callback?: (err: Error | null) => void) => {
    if (!open) throw new Error('channel closed');
    const copy = structuredClone(message);
    setImmediate(() => {
      if (open) to.emit('message', copy);
      callback?.(null);
    });
    return true;
  };
  const end = (self: EventEmitter, other: EventEmitter): IpcEndpoint => Object.assign(self, { send: sender(other) });
  return {
    worker: end(ends[0], ends[1]),
    primary: end(ends[1], ends[0]),
    cut: (): void => {
      open = false;
      for (const e of ends) e.emit('disconnect');
    },
  };
}

describe('WORKERS settings (C56)', () => {
  test('WORKERS takes a count or auto, and names the setting otherwise', () => {
    assert.equal(loadConfig({ env: {} }).server.workers, 1);
    assert.equal(loadConfig({ env: { WORKERS: '4' } }).server.workers, 4);
    assert.equal(loadConfig({ env: { WORKERS: 'auto' } }).server.workers, 'auto');
    assert.throws(() => loadConfig({ env: { WORKERS: 'many' } }), /WORKERS: server\.workers = "many": must be a whole number from 1 to 1024, or "auto"/);
    assert.throws(() => loadConfig({ env: { WORKERS: '0' } }), /WORKERS/);
  });
});

describe('limits shared by workers (C56, C12)', () => {
  test('calls of four workers at once on a key limited to 10 a minute: exactly 10 admitted, and a refund gives one back to all', async () => {
    const limits = new SharedLimits();
    const primaryEnds: IpcChannel[] = [];
    const workers = Array.from({ length: 4 }, () => {
      const p = pipe();
      const primaryEnd = new IpcChannel(p.primary);
      primaryEnds.push(primaryEnd);
      limits.serve(primaryEnd);
      return new SharedLimiter(new IpcChannel(p.worker));
    });
    const check: Check = { kind: 'window', key: 'k:ten', limit: 10, windowMs: 60_000, cost: 1 };
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => (workers[i % 4] as SharedLimiter).consume([check])));
    assert.equal(results.filter((r) => r.allowed).length, 10);
    assert.ok(results.filter((r) => !r.allowed).every((r) => (r.states[0]?.retryAfterMs ?? 0) > 0), 'the refused are told when to retry');
    await (workers[1] as SharedLimiter).refund([check]);
    assert.equal((await (workers[2] as SharedLimiter).consume([check])).allowed, true, 'the place given back by one worker is taken by another');
    assert.equal((await (workers[3] as SharedLimiter).consume([check])).allowed, false);
    // Without Redis these are the limits: a worker that exits takes nothing with it (memory starts
    // afresh only after an outage of Redis, C48).
    limits.gone(primaryEnds[0] as IpcChannel);
    assert.equal((await (workers[3] as SharedLimiter).consume([check])).allowed, false, 'the window is still full after a worker exited');
  });
});

describe('Redis away with workers: one machine, one count in the primary (C48, C56)', { skip: redisSkip }, () => {
  let redis: Redis;
  before(async () => {
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  after(() => redis?.disconnect());

  const prefix = `test:${randomUUID()}:`;
  /** One worker: its own link to Redis (probed by the test), its fallback the primary's limits. */
  const worker = (limits: SharedLimits) => {
    const p = pipe();
    const primary = new IpcChannel(p.primary);
    limits.serve(primary);
    const link = new RedisLink(redis, { log: pino({ level: 'silent' }), probeMs: 3_600_000 });
    const workerEnd = new IpcChannel(p.worker);
    return { link, limiter: new RedisLimiter(redis, { prefix, link, fallback: new SharedLimiter(workerEnd) }), cut: p.cut, primary, workerEnd };
  };
  const win = (key: string): Check => ({ kind: 'window', key, limit: 10, windowMs: 60_000, cost: 1 });
  const day = (key: string, resetAt: number): Check => ({ kind: 'counter', key, limit: 12, resetAt, cost: 1 });
  const admitted = async (all: Array<Promise<{ allowed: boolean }>>) => (await Promise.all(all)).filter((r) => r.allowed).length;
  /** Notes are on their way over the pipe: the primary has them after this. */
  const delivered = () => new Promise((resolve) => setTimeout(resolve, 20));

  test('two workers away from Redis at once: a key limited to 10 gets 10 in all across the outage, not 10 on each; memory starts afresh once the last worker is back', async () => {
    const limits = new SharedLimits();
    const [a, b] = [worker(limits), worker(limits)] as const;
    const k = randomUUID();
    const resetAt = Date.now() + 3_600_000;
    // 3 through Redis: a's 2 and b's 1, which each brings along into memory.
    assert.equal(await admitted([a.limiter.consume([win(k), day(`d${k}`, resetAt)]), a.limiter.consume([win(k), day(`d${k}`, resetAt)]), b.limiter.consume([win(k), day(`d${k}`, resetAt)])]), 3);
    a.link.failed(new Error('taken for away by the test'));
    b.link.failed(new Error('taken for away by the test'));
    await delivered();
    assert.equal(limits.away, 2);
    // 30 at once over both: 7 more, where each worker's own memory would have admitted 8 and 9.
    const calls = Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).limiter.consume([win(k), day(`d${k}`, resetAt)]));
    assert.equal(await admitted(calls), 7);
    // a is back; b still counts on memory, which keeps what both admitted.
    assert.equal(await a.link.probe(), true);
    await delivered();
    assert.equal(limits.away, 1);
    assert.equal(await admitted([b.limiter.consume([win(k)])]), 0, 'b is still refused in memory');
    assert.equal(await b.link.probe(), true);
    await delivered();
    assert.equal(limits.away, 0);
    assert.equal(await redis.zcard(prefix + k), 10, 'what each admitted in memory written back: the 10, once each');
    assert.equal(Number(await redis.get(`${prefix}d${k}`)), 10, 'the day counted the same 10');
    assert.equal(await admitted([a.limiter.consume([win(k)]), b.limiter.consume([win(k)])]), 0, 'shared limits again: the window is full');

    // The primary's memory started afresh: the outage's 10 are no longer in it.
    const fresh = worker(limits);
    assert.equal(await admitted([new SharedLimiter(fresh.workerEnd).consume([win(k)])]), 1, 'memory starts afresh for the next outage');

    // A worker that exits while away no longer holds memory as it is.
    const k2 = randomUUID();
    a.link.failed(new Error('away again'));
    b.link.failed(new Error('away again'));
    assert.equal(await admitted(Array.from({ length: 4 }, () => a.limiter.consume([win(k2)]))), 4);
    a.cut();
    limits.gone(a.primary);
    assert.equal(limits.away, 1);
    assert.equal(await admitted(Array.from({ length: 10 }, () => b.limiter.consume([win(k2)]))), 6, "what a admitted before it exited still counts while b is away");
    limits.gone(b.primary);
    assert.equal(limits.away, 0);
    for (const w of [a, b]) {
      w.link.close();
      await w.limiter.close();
    }
    await limits.close();
  });
});

describe('the embedded store shared by workers (C56)', () => {
  let storage: Storage;
  before(async () => {
    storage = await openStorage({ dataDir: 'memory', pgliteImage: await pgliteTemplate() });
    await storage.db.execute(sql`create table worker_rows (n int primary key, v text)`);
  });
  after(() => storage.close());

  const worker = () => {
    const p = pipe();
    const served: OpenTransactions = serveSharedPglite(new IpcChannel(p.primary), storage.embedded as NonNullable<Storage['embedded']>);
    return { db: sharedStorage(new IpcChannel(p.worker)).db, served, cut: p.cut };
  };

  test("a worker's transaction holds the database: another worker's query waits for its commit, and rows, types and errors come back as from the store itself", async () => {
    const a = worker();
    const b = worker();
    let committed = false;
    let readBeforeCommit: number | undefined;
    let other: Promise<unknown> | undefined;
    await a.db.transaction(async (t) => {
      await t.execute(sql`insert into worker_rows (n, v) values (1, 'one')`);
      // Posted while the transaction is open: answered after it ended.
      other = b.db.execute(sql`select count(*)::int as c from worker_rows`).then((r: unknown) => {
        readBeforeCommit = committed ? undefined : (r as { rows: Array<{ c: number }> }).rows[0]?.c;
        return r;
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await t.execute(sql`insert into worker_rows (n, v) values (2, 'two')`);
      committed = true;
    });
    const seen = (await other) as { rows: Array<{ c: number }> };
    assert.equal(readBeforeCommit, undefined, 'the other worker did not read inside the open transaction');
    assert.equal(seen.rows[0]?.c, 2, 'it read both rows, after the commit');
    const raw: unknown = await b.db.execute(sql`select '\\x0102ff'::bytea as b, 12345678901234::bigint as n`);
    const bytes = raw as { rows: Array<{ b: unknown; n: unknown }> };
    assert.deepEqual([...(bytes.rows[0]?.b as Uint8Array)], [1, 2, 255], 'bytes come back as bytes');
    assert.equal(String(bytes.rows[0]?.n), '12345678901234');
    // A unique violation is PostgreSQL's error with its SQLSTATE, as from the storage thread of one process.
    await assert.rejects(a.db.execute(sql`insert into worker_rows (n, v) values (1, 'again')`), (err: { cause?: { code?: string } }) => err.cause instanceof DatabaseError && err.cause.code === '23505');
  });

  test("a transaction that throws is rolled back, and one left open by a worker that died is rolled back and lets the others go on", async () => {
    const a = worker();
    const b = worker();
    await assert.rejects(
      a.db.transaction(async (t) => {
        await t.execute(sql`insert into worker_rows (n, v) values (10, 'ten')`);
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    const dying = worker();
    let inside!: () => void;
    const begun = new Promise<void>((resolve) => (inside = resolve));
    void dying.db
      .transaction(async (t) => {
        await t.execute(sql`insert into worker_rows (n, v) values (11, 'eleven')`);
        inside();
        await new Promise(() => {}); // never ends: the worker dies here
      })
      .catch(() => {});
    await begun;
    dying.cut();
    dying.served.abandon();
    const left: unknown = await b.db.execute(sql`select n from worker_rows where n >= 10 order by n`);
    const rows = left as { rows: unknown[] };
    assert.deepEqual(rows.rows, [], 'neither the thrown nor the abandoned transaction left a row');
  });
});

describe('the IPC channel (C56)', () => {
  /** A pipe whose worker end counts what it sends, one entry per message that crosses. */
  function counted(): { worker: IpcChannel; primary: IpcChannel; crossings: unknown[] } {
    const p = pipe();
    const crossings: unknown[] = [];
    const send = p.worker.send.bind(p.worker);
    p.worker.send = (message, callback) => {
      crossings.push(message);
      return send(message, callback);
    };
    return { worker: new IpcChannel(p.worker), primary: new IpcChannel(p.primary), crossings };
  }

  test("the calls of one event-loop turn cross the pipe as one message, answered each in order, and their answers come back as one", async () => {
    const { worker, primary, crossings } = counted();
    const seen: number[] = [];
    primary.handle('echo', (n) => {
      seen.push(n as number);
      return (n as number) * 2;
    });
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => worker.call<number>('echo', i)));
    assert.deepEqual(answers, Array.from({ length: 50 }, (_, i) => i * 2));
    assert.deepEqual(seen, Array.from({ length: 50 }, (_, i) => i), 'handled in the order sent');
    assert.equal(crossings.length, 1, 'fifty calls made in one turn: one message over the pipe');
    // A later turn is a message of its own.
    assert.equal(await worker.call('echo', 7), 14);
    assert.equal(crossings.length, 2);
  });

  test('a note leaves at once, after the calls queued before it and before those after it', async () => {
    const { worker, primary, crossings } = counted();
    const order: string[] = [];
    primary.handle('call', (body) => {
      order.push(`call ${String(body)}`);
      return null;
    });
    primary.onNote('note', (body) => order.push(`note ${String(body)}`));
    const first = worker.call('call', 1);
    worker.note('note', 2);
    assert.equal(crossings.length, 1, 'the note and the call before it left together, at once');
    const last = worker.call('call', 3);
    await Promise.all([first, last]);
    assert.deepEqual(order, ['call 1', 'note 2', 'call 3']);
    assert.equal(crossings.length, 2);
  });

  test('a call whose message cannot be sent fails, and so does every call of the same turn', async () => {
    const p = pipe();
    const worker = new IpcChannel(p.worker);
    new IpcChannel(p.primary).handle('echo', (n) => n);
    p.worker.send = () => {
      throw new Error('channel closed');
    };
    const results = await Promise.allSettled([worker.call('echo', 1), worker.call('echo', 2)]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    assert.match(String((results[0] as PromiseRejectedResult).reason), /could not reach the other process: channel closed/);
  });
});
