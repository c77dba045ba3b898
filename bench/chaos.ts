// `npm run chaos`: faults under load, one scenario after another, and a table of what the gateway
// did (C48). Each scenario runs a gateway on its own Redis (a redis-server on a spare port, nothing
// on disk) in front of a fake node, sends calls at a fixed concurrency, injects its fault for a
// while, ends it, and measures:
//   served     calls answered 200 (429 counted apart: limits still hold)
//   5xx        calls answered 5xx (C48 allows none for a Redis fault)
//   max ms     the slowest call, as the client saw it (bounded by redis.commandTimeoutMs + work)
//   back s     seconds from the fault's end until /health/ready says Redis is up again
// To add a fault (the database, an upstream, a node), add an entry to SCENARIOS.
// Options: --seconds N (fault length, default 5), --concurrency N (default 16).
import { parseArgs } from 'node:util';
import { createKey, registerUser, startTestApp, type TestApp } from '../test/support/app.ts';
import { startFakeNode } from '../test/support/fake-node.ts';
import { hasRedisServer, type OwnRedis, startOwnRedis } from '../test/support/redis-server.ts';

interface Scenario {
  name: string;
  /** Starts the fault; resolves with the function that ends it. */
  fault(env: { redis: OwnRedis }): Promise<() => Promise<void>>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'Redis unreachable (SIGKILL, restarted empty)',
    fault: async ({ redis }) => {
      await redis.kill();
      return () => redis.restart();
    },
  },
  {
    name: 'Redis hung (SIGSTOP, then SIGCONT)',
    fault: async ({ redis }) => {
      redis.freeze();
      return async () => redis.thaw();
    },
  },
];

const ADMIN = 'admin-token-0123456789abcdef';
const { values } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, concurrency: { type: 'string', default: '16' } } });
const faultMs = Number(values.seconds) * 1000;
const concurrency = Number(values.concurrency);

interface Row {
  scenario: string;
  calls: number;
  served: number;
  limited: number;
  fivexx: number;
  otherErrors: number;
  maxMs: number;
  backS: number | null;
}

async function redisUp(t: TestApp): Promise<boolean> {
  const res = await fetch(`${t.url}/health/ready`);
  const body = (await res.json()) as { checks: { redis?: { state: string } } };
  return body.checks.redis?.state === 'up';
}

async function run(s: Scenario): Promise<Row> {
  const redis = await startOwnRedis();
  const fake = await startFakeNode();
  const t = await startTestApp({ listen: true, redisUrl: redis.url, env: { UPSTREAM_NATIVE_MAINNET: fake.url, ADMIN_TOKEN: ADMIN, LOG_LEVEL: 'warn' } });
  const row: Row = { scenario: s.name, calls: 0, served: 0, limited: 0, fivexx: 0, otherErrors: 0, maxMs: 0, backS: null };
  try {
    const u = await registerUser(t.app);
    // Limits high enough that the load is served, low enough to be real checks.
    await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: { requestsPerMinute: 10_000_000, dailyLimit: 100_000_000 } } });
    const { key } = await createKey(t.app, {}, u);
    const url = `${t.url}/v1/native-mainnet/${key}`;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const started = performance.now();
        try {
          const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
          await res.arrayBuffer();
          if (res.status === 200) row.served++;
          else if (res.status === 429) row.limited++;
          else if (res.status >= 500) row.fivexx++;
          else row.otherErrors++;
        } catch {
          row.otherErrors++;
        }
        row.calls++;
        row.maxMs = Math.max(row.maxMs, performance.now() - started);
      }
    };
    const workers = Array.from({ length: concurrency }, worker);
    await new Promise((r) => setTimeout(r, 1_000));
    const end = await s.fault({ redis });
    await new Promise((r) => setTimeout(r, faultMs));
    await end();
    const ended = performance.now();
    while (performance.now() - ended < 30_000) {
      if (await redisUp(t)) {
        row.backS = (performance.now() - ended) / 1000;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 1_000));
    stop = true;
    await Promise.all(workers);
  } finally {
    await t.close();
    await fake.close();
    await redis.close();
  }
  return row;
}

if (!hasRedisServer()) {
  console.error('chaos: no redis-server binary (apt-get install -y redis-server)');
  process.exit(1);
}
const rows: Row[] = [];
for (const s of SCENARIOS) rows.push(await run(s));
console.log(`\nChaos: ${faultMs / 1000} s of each fault under ${concurrency} concurrent callers (one instance, redis.commandTimeoutMs 250)\n`);
console.log('| fault | calls | served | 429 | 5xx | other errors | max ms | back s |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.scenario} | ${r.calls} | ${r.served} | ${r.limited} | ${r.fivexx} | ${r.otherErrors} | ${Math.round(r.maxMs)} | ${r.backS === null ? 'not back in 30 s' : r.backS.toFixed(1)} |`);
}
