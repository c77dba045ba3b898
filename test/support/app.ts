import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { openStorage, type Storage } from '../../src/storage/db.ts';
import { PG_ADMIN_URL } from './services.ts';

/** A throwaway PostgreSQL database, dropped by `drop()`. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `junction_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export interface TestApp {
  app: FastifyInstance;
  config: Config;
  storage: Storage;
  /** Every log line the app wrote, as text. */
  logs: string[];
  close(): Promise<void>;
}

export interface TestAppOptions {
  backend?: 'pglite' | 'postgres';
  /** An existing PostgreSQL URL to reuse (restart tests); else a fresh database is made. */
  databaseUrl?: string;
  /** A PGlite directory to reuse (restart tests); default in memory. */
  dataDir?: string;
  env?: Record<string, string>;
  overrides?: Record<string, unknown>;
  secrets?: { jwtSecret: string; keyEncryptionSecret: string };
}

export const TEST_SECRETS = {
  jwtSecret: 'test-jwt-secret-0123456789abcdef0123456789',
  keyEncryptionSecret: 'test-key-secret-0123456789abcdef0123456789',
};

/** The app on the given storage backend, not listening (use `app.inject`), logs captured. */
export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  let dropDb: (() => Promise<void>) | undefined;
  let databaseUrl = opts.databaseUrl;
  if (opts.backend === 'postgres' && !databaseUrl) {
    const db = await createTestDatabase();
    databaseUrl = db.url;
    dropDb = db.drop;
  }
  const config = loadConfig({ env: { LOG_LEVEL: 'info', ...opts.env }, overrides: opts.overrides ?? {} });
  const storage = await openStorage({ databaseUrl: databaseUrl ?? null, dataDir: opts.dataDir ?? 'memory' });
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const app = await buildApp(config, { storage, secrets: opts.secrets ?? TEST_SECRETS, logStream });
  await app.ready();
  return {
    app,
    config,
    storage,
    logs,
    close: async () => {
      await app.close();
      await storage.close();
      await dropDb?.();
    },
  };
}

let counter = 0;
/** A unique e-mail per call. */
export const uniqueEmail = (tag = 'user') => `${tag}.${Date.now().toString(36)}.${counter++}@example.com`;

/** Registers an account and returns its tokens and a ready Authorization header. */
export async function registerUser(
  app: FastifyInstance,
  body: { email?: string; password?: string; name?: string } = {},
): Promise<{ id: string; email: string; password: string; accessToken: string; refreshToken: string; auth: { authorization: string } }> {
  const email = body.email ?? uniqueEmail();
  const password = body.password ?? 'correct horse battery';
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/auth/register',
    payload: { email, password, name: body.name ?? 'Test User' },
  });
  if (res.statusCode !== 200) throw new Error(`register failed: ${res.statusCode} ${res.body}`);
  const { user, tokens } = res.json().data;
  return { id: user.id, email, password, ...tokens, auth: { authorization: `Bearer ${tokens.accessToken}` } };
}
