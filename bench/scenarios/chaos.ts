// `npm run chaos`: faults under load, one scenario after another, and a table of what the gateway
// did (C48, C49, C55, C57). Each scenario starts a gateway of its own in front of what it
// breaks: its own Redis (a redis-server on a spare port), its own PostgreSQL cluster
// (test/support/pg-cluster.ts), three scripted nodes of native mainnet (test/support/fake-node.ts),
// or, for the stop, a gateway process of its own (dist/main.js) that it sends SIGTERM. It sends
// calls at a fixed concurrency, injects its fault for a while, ends it, and measures:
//   served     calls answered 200 with a node's answer (429 counted apart: limits still hold)
//   5xx        calls answered 5xx (C48 allows none for a Redis fault; a network with every node
//              down answers -32000 with 502, C26)
//   p50/p99/max ms   the calls' time as the client saw it, during the fault
//   back s     seconds from the fault's end until the part is back (Redis and database:
//              /health/ready says so; nodes: a call is answered by a node again)
//   missing    database faults and the stop: calls served but not in usage once the database is back
//              (the gateway restarted)
// Node scenarios run with the shipped answer sampling (rpc.sampling.rate 0.01, C55); a scenario may
// set native mainnet's own settings (consensus reads, C49). The stop's row reads differently: the
// load runs for the fault's length, then SIGTERM; "back s" is the time from SIGTERM to the exit.
// To add a fault, add an entry to SCENARIOS and a row to docs/reliability.md.
// Options: --seconds N (fault length, default 5), --db-seconds N (database faults, default 10;
// 120: the database away for two minutes, as docs/reliability.md reports it), --concurrency N
// (default 16), --only TEXT[,TEXT...] (the scenarios whose name holds one of the texts, any case).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'undici';
import { createKey, registerUser, startTestApp, type TestApp } from '../../test/support/app.ts';
import { type FakeNode, startFakeNode } from '../../test/support/fake-node.ts';
import { createPgCluster, type PgCluster, pgBinDir, storedRequests } from '../../test/support/pg-cluster.ts';
import { spawnGateway, usageTotal } from '../../test/support/process.ts';
import { hasRedisServer, type OwnRedis, startOwnRedis } from '../../test/support/redis-server.ts';
import { defineScenario, type Values } from '../lib/scenario.ts';
import { record } from '../lib/report/results.ts';

interface Env {
  redis?: OwnRedis;
  db?: PgCluster;
  /** Three nodes of native mainnet, in the order of its upstream list. */
  nodes: FakeNode[];
}
interface Scenario {
  name: string;
  /** What the scenario breaks: the gateway gets its own one of it (`process`: the gateway itself, stopped). */
  part: 'redis' | 'database' | 'nodes' | 'process';
  /** Starts the fault; resolves with the function that ends it. */
  fault(env: Env): Promise<() => Promise<void>>;
  /** Native mainnet's own settings in this scenario (merged into the shipped network by slug). */
  network?: Record<string, unknown>;
  /** The result a lying node answers: answers carrying it are counted as wrong answers served. */
  wrong?: string;
}

/** What the first node of native mainnet answers in the wrong-answer scenario. */
const LIE = '"0xbad"';

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
  {
    // C26 hedging: the hung node answers its probes, so it stays first in line; each read is hedged.
    name: '1 of 3 nodes hung, answering its probes (no consensus)',
    part: 'nodes',
    fault: async ({ nodes }) => {
      await nodes[0]!.setMode('stallCalls');
      return async () => nodes[0]!.setMode('ok');
    },
  },
  {
    // C49: the same hung node with consensus reads of eth_getBalance: it is replaced after the hedge delay.
    name: '1 of 3 nodes hung, answering its probes, consensus reads',
    part: 'nodes',
    network: { consensus: { methods: ['eth_getBalance'] } },
    fault: async ({ nodes }) => {
      await nodes[0]!.setMode('stallCalls');
      return async () => nodes[0]!.setMode('ok');
    },
  },
  {
    // C55: consensus off; the shipped sampling (1%) finds the liar, marks it, takes it out of rotation.
    name: '1 of 3 nodes answering wrong balances (no consensus, sampling 1%)',
    part: 'nodes',
    wrong: LIE,
    fault: async ({ nodes }) => {
      nodes[0]!.setScript('eth_getBalance', () => LIE);
      return async () => nodes[0]!.setScript('eth_getBalance', null);
    },
  },
  {
    // C57: a gateway process of its own under keep-alive load, stopped with SIGTERM.
    name: 'Stop under load (SIGTERM to the gateway process)',
    part: 'process',
    fault: () => Promise.resolve(async () => undefined),
  },
];
const ADMIN = 'admin-token-0123456789abcdef';
const OPTIONS = {
  seconds: { type: 'string', default: '5' },
  'db-seconds': { type: 'string', default: '10' },
  concurrency: { type: 'string', default: '16' },
  only: { type: 'string' },
} as const;
let values: Values<typeof OPTIONS>;

export default defineScenario({
  summary: 'faults under load (Redis, PostgreSQL, nodes hung, dead or lying, SIGTERM) and what the gateway did: C48, C49, C55, C57',
  options: OPTIONS,
  duration: { option: 'seconds', unit: 's' },
  run: async (ctx) => {
    values = ctx.opt;
    concurrency = Number(values.concurrency);
    await main();
  },
});
const faultMsOf = (s: Scenario) => Number(s.part === 'database' ? values['db-seconds'] : values.seconds) * 1000;
let concurrency = 16;

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
  /** Wrong-answer scenario: answers served with the lie, and those served once the liar was marked. */
  wrong: number;
  wrongAfterMark: number;
  /** Seconds from the fault's start until the first node was marked misbehaving, and out of rotation (/health/ready). */
  markedS: number | null;
  outS: number | null;
  /** What else the scenario has to say, printed under the table. */
  notes: string[];
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

/** The first upstream of native mainnet as /health/ready reports it. */
async function firstNode(t: TestApp): Promise<{ misbehaving?: { outOfRotation: boolean } } | undefined> {
  const res = await fetch(`${t.url}/health/ready`);
  const body = (await res.json()) as { networks: Record<string, { upstreams: Array<{ misbehaving?: { outOfRotation: boolean } }> }> };
  return body.networks['native-mainnet']?.upstreams[0];
}

const emptyRow = (s: Scenario, faultMs: number): Row => ({
  scenario: s.name,
  faultS: faultMs / 1000,
  calls: 0,
  served: 0,
  limited: 0,
  fivexx: 0,
  otherErrors: 0,
  during: [],
  maxMs: 0,
  backS: null,
  missing: null,
  knownDown: [],
  wrong: 0,
  wrongAfterMark: 0,
  markedS: null,
  outS: null,
  notes: [],
});

async function run(s: Scenario): Promise<Row> {
  if (s.part === 'process') return runStop(s);
  const faultMs = faultMsOf(s);
  const env: Env = { nodes: [] };
  if (s.part === 'redis') env.redis = await startOwnRedis();
  if (s.part === 'database') {
    env.db = await createPgCluster();
    env.db.start();
  }
  env.nodes = s.part === 'nodes' ? await Promise.all([startFakeNode(), startFakeNode(), startFakeNode()]) : [await startFakeNode()];
  let configDir: string | undefined;
  if (s.network) {
    configDir = mkdtempSync(path.join(os.tmpdir(), 'junction-chaos-'));
    writeFileSync(path.join(configDir, 'config.json'), JSON.stringify({ networks: [{ slug: 'native-mainnet', ...s.network }] }));
  }
  const t = await startTestApp({
    listen: true,
    ...(env.redis ? { redisUrl: env.redis.url } : {}),
    ...(env.db ? { databaseUrl: env.db.url } : {}),
    env: {
      UPSTREAM_NATIVE_MAINNET: env.nodes.map((n) => n.url).join(','),
      ADMIN_TOKEN: ADMIN,
      LOG_LEVEL: 'warn',
      ...(configDir ? { GATEWAY_CONFIG: path.join(configDir, 'config.json') } : {}),
    },
    overrides: {
      cache: { enabled: false },
      ...(s.part === 'database' ? { usage: { flushIntervalMs: 500 } } : {}),
      // Probes every second: "served again within a probe interval" is then a second. Answer
      // sampling as shipped (the test harness turns it off).
      ...(s.part === 'nodes' ? { rpc: { healthIntervalMs: 1_000, sampling: { rate: 0.01 } } } : {}),
    },
  });
  const row = emptyRow(s, faultMs);
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
          if (ok && s.wrong !== undefined && text.includes(`"result":${s.wrong}`)) {
            row.wrong++;
            if (row.markedS !== null) row.wrongAfterMark++;
          }
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
    // Wrong answers: when /health/ready first shows the liar marked, and out of rotation.
    let watching = s.wrong !== undefined;
    const watcher = (async () => {
      while (watching) {
        const m = (await firstNode(t))?.misbehaving;
        const at = (performance.now() - faultStarted) / 1000;
        if (m && row.markedS === null) row.markedS = at;
        if (m?.outOfRotation && row.outS === null) row.outS = at;
        await sleep(20);
      }
    })();
    await sleep(faultMs);
    await end();
    watching = false;
    await watcher;
    faultOn = false;
    const ended = performance.now();
    while (performance.now() - ended < 30_000) {
      const back =
        s.part === 'redis'
          ? await redisUp(t)
          : s.part === 'database'
            ? await storageUp(t)
            : s.wrong !== undefined
              ? (await firstNode(t))?.misbehaving?.outOfRotation !== true // back in rotation: a check found it agreeing
              : lastNodeAnswer > ended;
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
    if (s.wrong !== undefined) {
      const checks = t.app.parts.upstreams.stats().find((n) => n.network === 'native-mainnet')?.samples;
      row.notes.push(
        `${s.name}: ${row.wrong} of ${row.during.length} calls during the fault answered the wrong balance, ${row.wrongAfterMark} of them once /health/ready showed the liar marked; ` +
          `marked ${row.markedS === null ? 'never' : `after ${row.markedS.toFixed(2)} s`}, out of rotation ${row.outS === null ? 'never' : `after ${row.outS.toFixed(2)} s`}; ` +
          `back in rotation ${row.backS === null ? 'not within 30 s' : `${row.backS.toFixed(1)} s`} after it answered right again; checks: ${JSON.stringify(checks)}.`,
      );
    }
  } finally {
    await t.close();
    await Promise.all(env.nodes.map((n) => n.close()));
    await env.redis?.close();
    env.db?.destroy();
    if (configDir) rmSync(configDir, { recursive: true, force: true });
  }
  return row;
}

/**
 * C57: a gateway process of its own (dist/main.js, embedded storage) in front of one scripted node,
 * `concurrency` clients each calling on one kept-alive connection; after the fault's length of
 * steady load, SIGTERM to its process group. Each client stops at its first refused call. Measured:
 * the calls answered, those turned away (503), resets (errors other than a refused connection),
 * the time of the calls under way or sent after SIGTERM, SIGTERM to exit, and the calls answered
 * but missing from usage once the gateway is started again on the same data.
 */
async function runStop(s: Scenario): Promise<Row> {
  const faultMs = faultMsOf(s);
  const row = emptyRow(s, faultMs);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'junction-chaos-stop-'));
  const node = await startFakeNode({ head: 0x1234 });
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } }, server: { shutdownGraceMs: 10_000 } }));
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: node.url, GATEWAY_CONFIG: configFile };
  const rest = async (url: string, body: unknown, headers: Record<string, string> = {}) =>
    ((await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })).json()) as { data: unknown }).data;
  try {
    const gw = await spawnGateway({ env, detached: true, seeded: true });
    let exitCode: number | null = null;
    try {
      const reg = (await rest(`${gw.url}/api/v1/auth/register`, { email: 'chaos-stop@example.com', password: 'long enough pw', name: 'S' })) as { tokens: { accessToken: string } };
      const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
      const { key } = (await rest(`${gw.url}/api/v1/api-keys`, { name: 'stop' }, auth)) as { key: string };
      let stopAt = Number.POSITIVE_INFINITY;
      let refused = 0;
      const resets: string[] = [];
      const clients = Array.from({ length: concurrency }, () => new Client(gw.url, { pipelining: 1 }));
      const loops = clients.map(async (client, c) => {
        const body = JSON.stringify({ jsonrpc: '2.0', id: c, method: 'eth_getBalance', params: [`0x${(c + 1).toString(16).padStart(40, '0')}`, 'latest'] });
        for (;;) {
          const started = performance.now();
          let status: number | undefined;
          try {
            const res = await client.request({ path: '/rpc/main/evm/50', method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body });
            const text = await res.body.text();
            status = res.statusCode;
            if (status === 200 && text.includes('"result"')) row.served++;
            else if (status >= 500) row.fivexx++;
            else row.otherErrors++;
          } catch (err) {
            const e = err as { code?: string; cause?: { code?: string } };
            const code = e.cause?.code ?? e.code ?? String(err);
            if (code === 'ECONNREFUSED') refused++;
            else {
              row.otherErrors++;
              resets.push(code);
            }
          }
          const ended = performance.now();
          row.calls++;
          // The calls under way when the stop came, and those sent after it.
          if (ended >= stopAt) {
            row.during.push(ended - started);
            row.maxMs = Math.max(row.maxMs, ended - started);
          }
          if (status !== 200) return;
        }
      });
      await sleep(faultMs);
      stopAt = performance.now();
      process.kill(-(gw.child.pid as number), 'SIGTERM');
      const exit = await gw.exited;
      exitCode = exit.code;
      row.backS = (performance.now() - stopAt) / 1000;
      await Promise.all(loops);
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      const again = await spawnGateway({ env, seeded: true });
      try {
        row.missing = row.served - (await usageTotal(again.url, auth));
      } finally {
        again.child.kill('SIGTERM');
        await again.exited;
      }
      row.notes.push(
        `${s.name}: exit code ${exitCode} ${row.backS.toFixed(2)} s after SIGTERM; ${row.served} calls answered, ${row.fivexx} turned away with 503 (a new call on a connection still open), ` +
          `${resets.length} reset${resets.length === 1 ? '' : 's'}${resets.length ? ` (${[...new Set(resets)].join(', ')})` : ''}, ${refused} refused connections after the listener closed; ` +
          `${row.missing} answered calls missing from usage after the restart.`,
      );
    } finally {
      if (gw.child.exitCode === null && gw.child.signalCode === null) gw.child.kill('SIGKILL');
    }
  } finally {
    await node.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return row;
}

async function main(): Promise<void> {
const only = values.only?.split(',').map((o) => o.trim().toLowerCase()).filter((o) => o !== '') ?? [];
const wanted = SCENARIOS.filter((s) => only.length === 0 || only.some((o) => s.name.toLowerCase().includes(o)));
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
// The stop's columns: fault s is the load before SIGTERM; p50/p99/max the calls under way or sent after it; back s SIGTERM to exit.
for (const r of rows) {
  record(`${concurrency} concurrent callers`, r.scenario, {
    calls: { unit: 'calls', value: r.calls },
    served: { unit: 'calls', better: 'higher', value: r.served },
    fivexx: { unit: 'calls', better: 'lower', value: r.fivexx },
    p50_ms: pct(r.during, 50),
    p99_ms: pct(r.during, 99),
    max_ms: r.maxMs,
    back_s: r.backS === null ? null : { unit: 's', better: 'lower', value: r.backS },
    missing: r.missing === null ? null : { unit: 'calls', better: 'lower', value: r.missing },
  });
  const f = (x: number) => (Number.isNaN(x) ? '-' : x < 10 ? x.toFixed(1) : String(Math.round(x)));
  console.log(
    `| ${r.scenario} | ${r.faultS} | ${r.calls} | ${r.served} | ${r.limited} | ${r.fivexx} | ${r.otherErrors} | ${f(pct(r.during, 50))} | ${f(pct(r.during, 99))} | ${f(r.maxMs)} | ${r.backS === null ? 'not back in 30 s' : r.backS.toFixed(1)} | ${r.missing ?? '-'} |`,
  );
}
for (const r of rows) for (const note of r.notes) console.log(`\n${note}`);
// C49: a hung node with consensus reads against the same fault without them.
const hungPlain = rows.find((r) => r.scenario.startsWith('1 of 3 nodes hung') && r.scenario.includes('(no consensus)'));
const hungConsensus = rows.find((r) => r.scenario.startsWith('1 of 3 nodes hung') && r.scenario.includes('consensus reads'));
if (hungPlain && hungConsensus) {
  const ratio = pct(hungConsensus.during, 99) / pct(hungPlain.during, 99);
  console.log(`\nHung node: p99 with consensus reads ${pct(hungConsensus.during, 99).toFixed(1)} ms, without ${pct(hungPlain.during, 99).toFixed(1)} ms: ${ratio.toFixed(2)}x (goal: at most 2x).`);
}
const dead = rows.find((r) => r.knownDown.length > 0 && r.scenario.startsWith('All'));
if (dead) {
  const k = dead.knownDown;
  console.log(
    `\nAll nodes dead, once known (after the fault's first second): ${k.length} calls answered -32000 with 502 in p50 ${pct(k, 50).toFixed(1)} ms, p99 ${pct(k, 99).toFixed(1)} ms, max ${pct(k, 100).toFixed(1)} ms (goal < 50 ms).`,
  );
}
}
