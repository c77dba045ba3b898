import { createTestDatabase, startTestApp, type TestApp, type TestAppOptions } from './app.ts';

/** Two gateway instances on one fresh PostgreSQL database and the local Redis: a scale-out set-up. */
export interface ScaleOut {
  a: TestApp;
  b: TestApp;
  /** The instances closed already (by `closeOne`). */
  readonly closed: ReadonlySet<TestApp>;
  /** Closes one instance now (a takeover test); `close` then skips it. */
  closeOne(t: TestApp): Promise<void>;
  /** Closes the instances still open, in start order, then drops the database. */
  close(): Promise<void>;
}

/**
 * Starts two instances with the same options on a new database and Redis (one after the other,
 * so the first runs the migrations). If the second fails to start, the first is closed and the
 * database dropped before the error is thrown. Shared state goes through the local Redis unless
 * the options name another (`redisUrl`, `redisClusterNodes`) or none (`redis: false`: the
 * database alone is shared).
 */
export async function startScaleOut(opts: Omit<TestAppOptions, 'databaseUrl' | 'backend'>): Promise<ScaleOut> {
  const db = await createTestDatabase();
  const options = { redis: true, ...opts, databaseUrl: db.url };
  const started: TestApp[] = [];
  const closed = new Set<TestApp>();
  const closeOne = async (t: TestApp) => {
    if (closed.has(t)) return;
    closed.add(t);
    await t.close();
  };
  const close = async () => {
    for (const t of started) await closeOne(t);
    await db.drop();
  };
  try {
    started.push(await startTestApp(options));
    started.push(await startTestApp(options));
  } catch (err) {
    await close();
    throw err;
  }
  const [a, b] = started as [TestApp, TestApp];
  return { a, b, closed, closeOne, close };
}
