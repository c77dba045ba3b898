// `npm run chaos`: faults under load, one scenario after another, and a table of what the gateway
// did (C48, issue 29). Each scenario starts a gateway of its own in front of what it breaks: its own
// Redis (a redis-server on a spare port), its own PostgreSQL cluster (test/support/pg-cluster.ts),
// or three scripted nodes of native mainnet (test/support/fake-node.ts). It sends calls at a fixed
// concurrency, injects its fault for a while, ends it, and measures:
//   served     calls answered 200 with a node's answer (429 counted apart: limits still hold)
//   5xx        calls answered 5xx (C48 allows none for a Redis fault; a network with every node
//              down answers -32000 with 502, C26)
//   p50/p99/max ms   the calls' time as the client saw it, during the fault
//   back s     seconds from the fault's end until the part is back (Redis and database:
//              /health/ready says so; nodes: a call is answered by a node again)
//   missing    database faults: calls served but not in usage_daily once the database is back
// To add a fault, add an entry to SCENARIOS and a row to docs/reliability.md.
// Options: --seconds N (fault length, default 5), --db-seconds N (database faults, default 10;
// 120 for the two minutes of issue 29), --concurrency N (default 16), --only TEXT.
import os from 'node:os';
import { parseArgs } from 'node:util';
import { createKey, registerUser, startTestApp, type TestApp } from '../test/support/app.ts';
import { type FakeNode, startFakeNode } from '../test/support/fake-node.ts';
import { createPgCluster, type PgCluster, pgBinDir, storedRequests } from '../test/support/pg-cluster.ts';
import { hasRedisServer, type OwnRedis, startOwnRedis } from '../test/support/redis-server.ts';

interface Env {
  redis?: OwnRedis;
  db?: PgCluster;
  /** Three nodes of native mainnet, in the order of its upstream list. */
  nodes: FakeNode[];
}
interface Scenario {
  name: string;
  /** What the scenario breaks: the gateway gets its own one of it. */
  part: 'redis' | 'database' | 'nodes';
  /** Starts the fault; resolves with the function that ends it. */
  fault(env: Env): Promise<() => Promise<void>>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'Redis unreachable (SIGKILL, restarted empty)',
    part: 'redis',
    fault: async ({ redis }) => {
      await redis!.kill();
      return () => redis!.restart();
    },
  },
  {
    name: 'Redis hung (SIGSTOP, then SIGCONT)',
    part: 'redis',
    fault: async ({ redis }) => {
      redis!.freeze();
      return async () => redis!.thaw();
    },
  },
  {
    name: 'Database stopped (pg_ctl stop -m immediate, then started)',
    part: 'database',
    fault: async ({ db }) => {
      db!.stopImmediate();
      return async () => db!.start();
    },
  },
  {
    name: 'Database hung (SIGSTOP of every PostgreSQL process, then SIGCONT)',
    part: 'database',
    fault: async ({ db }) => {
      db!.freeze();
      return async () => db!.thaw();
    },
  },
  {
    name: '2 of 3 nodes dead (connection refused)',
    part: 'nodes',
    fault: async ({ nodes }) => {
      await Promise.all(nodes.slice(0, 2).map((n) => n.setMode('refuse')));
      return async () => void (await Promise.all(nodes.slice(0, 2).map((n) => n.setMode('ok'))));
    },
  },
  {
    name: '2 of 3 nodes stalled (accept, never answer)',
    part: 'nodes',
    fault: async ({ nodes }) => {
      await Promise.all(nodes.slice(0, 2).map((n) => n.setMode('stall')));
      return async () => void (await Promise.all(nodes.slice(0, 2).map((n) => n.setMode('ok'))));
    },
  },
  {
    name: '1 of 3 nodes flapping (refusing 2 s, answering 2 s)',
    part: 'nodes',
    fault: async ({ nodes }) => {
      let down = false;
      const flap = setInterval(() => {
        down = !down;
        void nodes[0]!.setMode(down ? 'refuse' : 'ok');
      }, 2_000);
      await nodes[0]!.setMode('refuse');
      down = true;
      return async () => {
        clearInterval(flap);
        await nodes[0]!.setMode('ok');
      };
    },
  },
  {
    name: 'All 3 nodes dead (connection refused), then one back',
    part: 'nodes',
    fault: async ({ nodes }) => {
      await Promise.all(nodes.map((n) => n.setMode('refuse')));
      return async () => void (await nodes[2]!.setMode('ok'));
    },
  },
];

const ADMIN = 'admin-token-0123456789abcdef';
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    'db-seconds': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '16' },
    only: { type: 'string' },
  },
});
const faultMsOf = (s: Scenario) => Number(s.part === 'database' ? values['db-seconds'] : values.seconds) * 1000;
const concurrency = Number(values.concurrency);

interface Row {
  scenario: string;
  faultS: number;
  calls: number;
  served: number;
  limited: number;
  fivexx: number;
  otherErrors: number;
  /** Times of the calls made while the fault lasted, ms. */
  during: number[];
  maxMs: number;
  backS: number | null;
  /** Database faults: calls served but not in usage once the database was back. */
  missing: number | null;
  /** All nodes dead: the times of the -32000 answers once the gateway knew (after the first second). */
  knownDown: number[];
}

async function redisUp(t: TestApp): Promise<boolean> {
  const res = await fetch(`${t.url}/health/ready`);
  const body = (await res.json()) as { checks: { redis?: { state: string } } };
  return body.checks.redis?.state === 'up';
}

async function storageUp(t: TestApp): Promise<boolean> {
  const res = await fetch(`${t.url}/health/ready`);
  const body = (await res.json()) as { checks: { storage?: { ok: boolean } } };
  return body.checks.storage?.ok === true && !t.app.parts.usage.failing;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

async function run(s: Scenario): Promise<Row> {
  const faultMs = faultMsOf(s);
  const env: Env = { nodes: [] };
  if (s.part === 'redis') env.redis = await startOwnRedis();
  if (s.part === 'database') {
    env.db = await createPgCluster();
    env.db.start();
  }
  env.nodes = s.part === 'nodes' ? await Promise.all([startFakeNode(), startFakeNode(), startFakeNode()]) : [await startFakeNode()];
  const t = await startTestApp({
    listen: true,
    ...(env.redis ? { redisUrl: env.redis.url } : {}),
    ...(env.db ? { databaseUrl: env.db.url } : {}),
    env: { UPSTREAM_NATIVE_MAINNET: env.nodes.map((n) => n.url).join(','), ADMIN_TOKEN: ADMIN, LOG_LEVEL: 'warn' },
    overrides: {
      cache: { enabled: false },
      ...(s.part === 'database' ? { usage: { flushIntervalMs: 500 } } : {}),
      // Probes every second: "served again within a probe interval" is then a second.
      ...(s.part === 'nodes' ? { rpc: { healthIntervalMs: 1_000 } } : {}),
    },
  });
  const row: Row = { scenario: s.name, faultS: faultMs / 1000, calls: 0, served: 0, limited: 0, fivexx: 0, otherErrors: 0, during: [], maxMs: 0, backS: null, missing: null, knownDown: [] };
  let faultOn = false;
  let faultStarted = 0;
  try {
    const u = await registerUser(t.app);
    // Limits high enough that the load is served, low enough to be real checks.
    const set = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${u.id}`, headers: { 'x-admin-token': ADMIN }, payload: { limits: { requestsPerMinute: 10_000_000, dailyLimit: 100_000_000, monthlyLimit: 1_000_000_000 } } });
    if (set.statusCode !== 200) throw new Error(`setting the account's limits answered ${set.statusCode}: ${set.body}`);
    const created = await createKey(t.app, {}, u);
    const url = `${t.url}/v1/native-mainnet/${created.key}`;
    // A read the nodes answer (the fake node echoes the method): eth_chainId for Redis and database faults.
    const body = JSON.stringify(s.part === 'nodes' ? { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: ['0x0000000000000000000000000000000000000001', 'latest'] } : { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] });
    let stop = false;
    let lastNodeAnswer = 0;
    const worker = async () => {
      while (!stop) {
        const started = performance.now();
        let ok = false;
        try {
          const res = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
          const text = await res.text();
          ok = res.status === 200 && text.includes('"result"');
          if (ok) row.served++;
          else if (res.status === 429) row.limited++;
          else if (res.status >= 500) row.fivexx++;
          else row.otherErrors++;
        } catch {
          row.otherErrors++;
        }
        const ended = performance.now();
        const ms = ended - started;
        row.calls++;
        if (ok) lastNodeAnswer = ended;
        if (faultOn) {
          row.during.push(ms);
          row.maxMs = Math.max(row.maxMs, ms);
          if (!ok && ended - faultStarted > 1_000) row.knownDown.push(ms);
        }
      }
    };
    const workers = Array.from({ length: concurrency }, worker);
    await sleep(1_000);
    faultOn = true;
    faultStarted = performance.now();
    const end = await s.fault(env);
    await sleep(faultMs);
    await end();
    faultOn = false;
    const ended = performance.now();
    while (performance.now() - ended < 30_000) {
      const back = s.part === 'redis' ? await redisUp(t) : s.part === 'database' ? await storageUp(t) : lastNodeAnswer > ended;
      if (back) {
        row.backS = (performance.now() - ended) / 1000;
        break;
      }
      await sleep(50);
    }
    await sleep(1_000);
    stop = true;
    await Promise.all(workers);
    if (env.db) {
      await t.app.parts.usage.flush();
      row.missing = row.served - (await storedRequests(env.db.url, created.id)).usage;
    }
  } finally {
    await t.close();
    await Promise.all(env.nodes.map((n) => n.close()));
    await env.redis?.close();
    env.db?.destroy();
  }
  return row;
}

const wanted = SCENARIOS.filter((s) => !values.only || s.name.toLowerCase().includes(values.only.toLowerCase()));
const runnable = wanted.filter((s) => {
  if (s.part === 'redis' && !hasRedisServer()) {
    console.error(`chaos: skipping "${s.name}": no redis-server binary (apt-get install -y redis-server)`);
    return false;
  }
  if (s.part === 'database' && !pgBinDir()) {
    console.error(`chaos: skipping "${s.name}": no PostgreSQL binaries under /usr/lib/postgresql`);
    return false;
  }
  return true;
});
const rows: Row[] = [];
for (const s of runnable) {
  console.error(`chaos: ${s.name}`);
  rows.push(await run(s));
}
console.log(`\nChaos: each fault under ${concurrency} concurrent callers, one instance (redis.commandTimeoutMs 250, storage.queryTimeoutMs 10000, node probes every 1 s), load average ${os.loadavg()[0]!.toFixed(1)}\n`);
console.log('| fault | fault s | calls | served | 429 | 5xx | other | p50 ms | p99 ms | max ms | back s | missing from usage |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  const f = (x: number) => (Number.isNaN(x) ? '-' : x < 10 ? x.toFixed(1) : String(Math.round(x)));
  console.log(
    `| ${r.scenario} | ${r.faultS} | ${r.calls} | ${r.served} | ${r.limited} | ${r.fivexx} | ${r.otherErrors} | ${f(pct(r.during, 50))} | ${f(pct(r.during, 99))} | ${f(r.maxMs)} | ${r.backS === null ? 'not back in 30 s' : r.backS.toFixed(1)} | ${r.missing ?? '-'} |`,
  );
}
const dead = rows.find((r) => r.knownDown.length > 0 && r.scenario.startsWith('All'));
if (dead) {
  const k = dead.knownDown;
  console.log(
    `\nAll nodes dead, once known (after the fault's first second): ${k.length} calls answered -32000 with 502 in p50 ${pct(k, 50).toFixed(1)} ms, p99 ${pct(k, 99).toFixed(1)} ms, max ${pct(k, 100).toFixed(1)} ms (goal < 50 ms).`,
  );
}
