// Webhook delivery (C39): events published into the outbox (each in a storage transaction, as
// the follower does) and sent, signed, to a local receiver. Prints the throughput of a burst
// (events per second into the outbox, then out of it) and the latency from a
// publish's commit to the receiver, p50/p99, at a steady rate. Storage: embedded PGlite in
// memory, or PostgreSQL when DATABASE_URL is set. The receiver runs in this process.
//
//   npx tsx bench/webhook-delivery.ts [--burst 1000] [--steady 200] [--rate 20]
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { users } from '../src/auth/schema.ts';
import { loadConfig } from '../src/config/load.ts';
import { openStorage } from '../src/storage/db.ts';
import { Webhooks } from '../src/webhooks/service.ts';

const TIME_LIMIT_MS = 120_000;
const BATCH = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + TIME_LIMIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await sleep(2);
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { burst: { type: 'string', default: '1000' }, steady: { type: 'string', default: '200' }, rate: { type: 'string', default: '20' } },
    strict: false,
  });
  const burst = Number(values.burst);
  const steady = Number(values.steady);
  const rate = Number(values.rate);
  const databaseUrl = process.env.DATABASE_URL;
  const config = loadConfig({ env: { LOG_LEVEL: 'warn' }, overrides: { webhooks: { allowPrivateTargets: true, maxEndpoints: { max: 10, enterprise: null } } } });
  console.log(`\n== Webhook delivery: ${databaseUrl ? 'PostgreSQL' : 'PGlite (in memory)'}, concurrency ${config.webhooks.concurrency}, local receiver ==`);

  // Arrival time of each event id at the receiver.
  const arrived = new Map<string, number>();
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrived.set(String(req.headers['webhook-id']), performance.now());
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const storage = await openStorage(databaseUrl ? { databaseUrl } : { dataDir: 'memory' });
  const webhooks = new Webhooks({ db: storage.db, settings: config, logger: pino({ level: 'warn' }), encryptionSecret: randomBytes(32).toString('hex') });
  try {
    const userId = randomUUID();
    await storage.db.insert(users).values({ id: userId, email: `${userId}@bench.invalid`, name: 'bench', passwordHash: 'x', tier: 'enterprise' });
    await webhooks.endpoints.create(userId, { url, events: ['intent.updated'] });

    const publish = async (from: number, n: number): Promise<number> => {
      await storage.db.transaction(async (tx) => {
        for (let i = from; i < from + n; i++) await webhooks.publish(tx, { type: 'intent.updated', accountId: userId, data: { seq: i } });
      });
      const committed = performance.now();
      webhooks.wake();
      return committed;
    };

    // Burst: the outbox filled first (transactions of BATCH events), then the sender started: the
    // two rates apart.
    const t0 = performance.now();
    for (let i = 0; i < burst; i += BATCH) await publish(i, Math.min(BATCH, burst - i));
    const t1 = performance.now();
    webhooks.start();
    await until('the burst', () => arrived.size >= burst);
    const t2 = Math.max(...arrived.values());
    console.log(`publish: ${burst} events in ${((t1 - t0) / 1000).toFixed(2)} s = ${Math.round(burst / ((t1 - t0) / 1000))} events/s into the outbox`);
    console.log(`deliver: ${burst} events in ${((t2 - t1) / 1000).toFixed(2)} s = ${Math.round(burst / ((t2 - t1) / 1000))} events/s signed, sent and recorded`);

    // Steady: one event per transaction at `rate` per second; latency commit -> arrival.
    arrived.clear();
    const commits: number[] = [];
    const gap = 1000 / rate;
    const start = performance.now();
    for (let i = 0; i < steady; i++) {
      const due = start + i * gap;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      commits.push(await publish(burst + i, 1));
    }
    await until('the steady events', () => arrived.size >= steady);
    // Arrivals need not come in commit order: each commit is matched to its event id through the outbox.
    const ids = await storage.db.execute(
      sql`select id from webhook_events where (body::jsonb -> 'data' ->> 'seq')::int >= ${burst} order by (body::jsonb -> 'data' ->> 'seq')::int`,
    );
    const rows = (ids as { rows: Array<{ id: string }> }).rows;
    const latencies = rows.map((r, i) => (arrived.get(r.id) ?? NaN) - (commits[i] ?? NaN)).filter((x) => Number.isFinite(x));
    latencies.sort((a, b) => a - b);
    console.log(
      `steady ${rate}/s, ${steady} events: commit -> receiver p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, max ${(latencies.at(-1) ?? NaN).toFixed(1)} ms`,
    );
    const s = webhooks.stats;
    console.log(`sender: ${s.attempts} attempts, ${s.delivered} delivered, ${s.failed} failed`);
  } finally {
    await webhooks.close();
    await storage.close();
    receiver.closeAllConnections();
    receiver.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
