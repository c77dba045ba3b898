import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Child, freePort, ROOT, startChild, tempDir, waitUntil } from '../children.ts';

// Pass-through rows run with the response cache off: with it on, identical concurrent
// eth_blockNumber calls share one upstream call (C44), which is not forwarding any more.
export const NO_CACHE = { cache: { enabled: false } };
// The bench registers one account per row from one address; Redis keeps that count between runs.
export const LIMITS = { limits: { registrationsPerHour: 1_000_000 } };
// Usage and analytics are flushed to storage every 500 ms (2 s by default), so that
// several flushes fall in every measured run and show in its tail and event-loop delay.
let FLUSH = { usage: { flushIntervalMs: 500 } };

/** The flush interval of the gateways started from now on (`bench --flush-ms`). */
export function setFlushIntervalMs(ms: number): void {
  FLUSH = { usage: { flushIntervalMs: ms } };
}

/**
 * A PostgreSQL database of the bench's own (made when missing) for the rows on PostgreSQL:
 * BENCH_DATABASE_URL, else `junction_bench` on the local server. Resolves to why it cannot be
 * used, or undefined.
 */
export const BENCH_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/junction_bench';
export async function benchDatabaseMissing(): Promise<string | undefined> {
  const { default: pg } = await import('pg');
  const target = new URL(BENCH_DATABASE_URL);
  const name = decodeURIComponent(target.pathname.slice(1));
  const server = new URL(BENCH_DATABASE_URL);
  server.pathname = '/postgres';
  const client = new pg.Client({ connectionString: server.href, connectionTimeoutMillis: 3000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`create database "${name.replaceAll('"', '""')}"`);
    return undefined;
  } catch (err) {
    return `PostgreSQL does not answer at ${target.host} (${(err as Error).message}); BENCH_DATABASE_URL names another`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** One gateway row of the table: how its process is started and how the bench account is set up. */
export interface GatewayVariant {
  label: string;
  /** Extra environment for the gateway process (e.g. `REDIS_URL`). */
  env?: Record<string, string>;
  /**
   * The bench account's plan, set through the admin API before its key is made. The default is
   * `enterprise` (no limits), so a plan limit never turns the run into a 429 benchmark.
   */
  account?: {
    tier?: 'free' | 'pro' | 'max' | 'enterprise';
    limits?: { requestsPerMinute?: number | null; dailyLimit?: number | null; monthlyLimit?: number | null };
  };
  /** Resolves to why the row cannot run on this machine (e.g. Redis does not answer), or undefined. */
  skip?: () => Promise<string | undefined>;
  /** Starts what the row needs before its gateway (e.g. its own Redis Cluster): more environment, and how to stop it. */
  setUp?: () => Promise<{ env: Record<string, string>; close(): Promise<void> }>;
  /** Config file content for this row (GATEWAY_CONFIG), e.g. `{ cache: { enabled: false } }`. */
  config?: Record<string, unknown>;
  /** The JSON-RPC body of this row, when not the bench's default call. */
  body?: string;
  /** What the row is compared with the bare Node proxy for: plain forwarding, or answers from the response cache. */
  kind?: 'pass-through' | 'cached';
  /** Node.js and V8 flags of this row's process (e.g. `--max-semi-space-size=16`). */
  nodeArgs?: string[];
}

export interface RunningGateway {
  child: Child;
  url: string;
  /** GET /metrics, open (no METRICS_TOKEN): the bench reads the event-loop delay there. */
  metricsUrl: string;
  /** The RPC address under test and the headers that carry the key. */
  rpcUrl: string;
  headers: Record<string, string>;
}

/**
 * The Node.js options `npm start` gives in the checkout `dir` (its package.json's `start`, e.g.
 * `--v8-pool-size=1`), so that a gateway here runs as it does in production, and a checkout
 * without them (`--baseline`) as that one did.
 */
export function startFlags(dir: string): string[] {
  const start = (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { scripts?: { start?: string } }).scripts?.start ?? '';
  const words = start.split(/\s+/);
  const from = words.indexOf('node');
  if (from === -1) return [];
  const out: string[] = [];
  for (const w of words.slice(from + 1)) {
    if (!w.startsWith('--')) break;
    out.push(w);
  }
  return out;
}

async function call<T = unknown>(url: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

interface Session {
  data: { user: { id: string }; tokens: { accessToken: string } };
}

/**
 * Starts `src/main.ts` as its own process (embedded storage in a temp dir, native mainnet's
 * upstream at `upstreamUrl`), registers an account, applies the variant's plan and creates an
 * API key. Resolves once an RPC call through it returns the upstream's answer.
 */
export async function startGateway(
  variant: GatewayVariant,
  upstreamUrl: string,
  opts: { nodeArgs?: string[]; /** Another checkout whose dist/ is started (bench/scenarios/proxy.ts --baseline). */ cwd?: string } = {},
): Promise<RunningGateway> {
  const port = await freePort();
  const adminToken = randomBytes(16).toString('hex');
  const configFile = path.join(tempDir('gateway-config'), 'config.json');
  writeFileSync(configFile, JSON.stringify({ ...FLUSH, ...variant.config }));
  // The compiled gateway, as `npm start` runs it: with its Node.js options (bench/scenarios/proxy.ts builds dist/ first).
  const child = startChild(variant.label, process.execPath, [...startFlags(opts.cwd ?? ROOT), ...(variant.nodeArgs ?? []), ...(opts.nodeArgs ?? []), 'dist/main.js'], {
    role: 'target',
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    env: {
      ...process.env,
      // The same gateway whatever the shell exports: embedded storage, in-process state, no config file.
      DATABASE_URL: undefined,
      REDIS_URL: undefined,
      REDIS_CLUSTER_NODES: undefined,
      GATEWAY_CONFIG: configFile,
      DEVNET: undefined,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: tempDir('gateway-data'),
      LOG_LEVEL: 'warn',
      ADMIN_TOKEN: adminToken,
      METRICS_TOKEN: undefined,
      METRICS_PORT: undefined,
      UPSTREAM_NATIVE_MAINNET: upstreamUrl,
      // Ready once storage is open: the other 15 networks' public nodes are out of reach here.
      READY_WHEN: 'storage',
      ...variant.env,
    },
  });
  const url = `http://127.0.0.1:${port}`;
  // Not /health/live: the port is bound before storage opens, and answers 503 until the start is over.
  await waitUntil(child, 'readiness', async () => (await fetch(`${url}/health/ready`)).ok);

  const email = `bench-${Date.now()}@example.com`;
  const session = await call<Session>(`${url}/api/v1/auth/register`, 'POST', { email, password: 'bench password 123', name: 'Bench' });
  const bearer = { authorization: `Bearer ${session.data.tokens.accessToken}` };
  const account = variant.account ?? { tier: 'enterprise' };
  await call(`${url}/api/v1/admin/users/${session.data.user.id}`, 'PATCH', account, { 'x-admin-token': adminToken });
  const key = (await call<{ data: { key: string } }>(`${url}/api/v1/api-keys`, 'POST', { name: 'bench' }, bearer)).data.key;

  const rpcUrl = `${url}/rpc/main/evm/50`;
  const headers = { 'x-api-key': key };
  const probe = { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] };
  // The first calls may race the pool's first health probe; retry briefly.
  let last: unknown;
  await waitUntil(child, 'an RPC answer from the upstream', async () => {
    last = await call(rpcUrl, 'POST', probe, headers).catch((err: Error) => err.message);
    return typeof last === 'object' && last !== null && 'result' in last;
  }, 15_000).catch((err: Error) => {
    throw new Error(`${err.message}\nlast answer: ${JSON.stringify(last)}`);
  });
  return { child, url, metricsUrl: `${url}/metrics`, rpcUrl, headers };
}
