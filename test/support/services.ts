import net from 'node:net';

/** Where the test suites find PostgreSQL and Redis (TEST_DATABASE_URL / TEST_REDIS_URL). */
export const PG_ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const REQUIRED = process.env.REQUIRE_SERVICES === '1';

function answers(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const socket = net.connect({ host: u.hostname, port: Number(u.port || 5432) }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * `skip` option for a suite that needs a service: false when it answers (or REQUIRE_SERVICES=1,
 * so that a missing server fails the run), else the reason printed as the skip.
 */
export async function serviceSkip(name: 'PostgreSQL' | 'Redis'): Promise<false | string> {
  const url = name === 'PostgreSQL' ? PG_ADMIN_URL : REDIS_URL;
  if (REQUIRED || (await answers(url))) return false;
  return `${name} does not answer at ${new URL(url).host}: skipped (set REQUIRE_SERVICES=1 to fail instead)`;
}

export interface StorageBackend {
  name: 'pglite' | 'postgres';
  skip: false | string;
}

/** Storage suites run on both: PGlite always, PostgreSQL when it answers (C32, issue: both backends). */
export async function storageBackends(): Promise<StorageBackend[]> {
  return [
    { name: 'pglite', skip: false },
    { name: 'postgres', skip: await serviceSkip('PostgreSQL') },
  ];
}
