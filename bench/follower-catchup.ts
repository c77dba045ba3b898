// The block follower's catch-up (C33): a devnet chain gets 10,000 blocks (some with transfers)
// while the follower is stopped; a new follower on the same storage resumes from its cursor and
// reads them all (JSON-RPC batches of `events.batchBlocks`, one transaction per batch). Prints
// blocks per second and the total time. Storage: embedded PGlite in memory, or PostgreSQL when
// DATABASE_URL is set.
//
//   npx tsx bench/follower-catchup.ts [--blocks 10000] [--every 20]
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { loadConfig } from '../src/config/load.ts';
import { startDevnet } from '../src/devnet/devnet.ts';
import { BlockFollower } from '../src/events/follower.ts';
import type { BlockConsumer, FollowedBlock } from '../src/events/types.ts';
import { openStorage } from '../src/storage/db.ts';
import { Upstreams } from '../src/upstreams/upstreams.ts';

const NETWORK = 'ethereum-sepolia';
const CHAIN_ID = 11_155_111;
const TIME_LIMIT_MS = 300_000;

async function rpc<T>(url: string, body: unknown): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = (await res.json()) as T;
  const items = Array.isArray(answer) ? answer : [answer];
  for (const item of items as Array<{ error?: { message: string } }>) if (item.error) throw new Error(item.error.message);
  return answer;
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + TIME_LIMIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Counts what it is handed; nothing else, so the figure is the follower's own. */
class Counter implements BlockConsumer {
  readonly name = 'bench-counter';
  blocks = 0;
  transactions = 0;
  last = -1;
  networks(): string[] {
    return [NETWORK];
  }
  async onBlock(block: FollowedBlock): Promise<void> {
    if (block.number !== this.last + 1 && this.last !== -1) throw new Error(`out of order: ${block.number} after ${this.last}`);
    this.last = block.number;
    this.blocks += 1;
    this.transactions += block.transactions.length;
  }
}

export async function main(argv: string[] = []): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { blocks: { type: 'string', default: '10000' }, every: { type: 'string', default: '20' } }, strict: false });
  const total = Number(values.blocks);
  const txEvery = Number(values.every); // one transfer every this many blocks
  console.log(`\n== Block follower catch-up: ${total.toLocaleString('en')} blocks, a transfer every ${txEvery} ==`);

  const devnet = await startDevnet({ networks: [{ slug: NETWORK, chainId: CHAIN_ID }], nativeBlockTimeSeconds: 1 });
  const url = devnet.upstreams[NETWORK]?.http as string;
  const databaseUrl = process.env.DATABASE_URL;
  const storage = await openStorage(databaseUrl ? { databaseUrl } : { dataDir: 'memory' });
  const logger = pino({ level: 'warn' });
  const config = loadConfig({
    env: { LOG_LEVEL: 'warn', UPSTREAM_ETHEREUM_SEPOLIA: url },
    overrides: { events: { confirmations: 1 }, whaleAlerts: { networks: [] } },
  });
  const upstreams = new Upstreams(config, logger);
  try {
    // A first follower makes the cursor at the head and stops.
    const first = new BlockFollower({ db: storage.db, settings: config, upstreams, logger });
    const warm = new Counter();
    first.register(warm);
    first.start();
    await until('a first cursor', () => (first.stats()[0]?.cursor ?? -1) >= 0);
    await first.close();
    const start = (first.stats()[0]?.cursor ?? 0) + 1;

    // The backlog: blocks with one transfer each, mined by the transfer, and empty ones in between.
    const minedAt = Date.now();
    const from = devnet.accounts[1]?.address as string;
    const to = devnet.accounts[2]?.address as string;
    let mined = 0;
    let sent = 0;
    while (mined < total) {
      await rpc(url, { jsonrpc: '2.0', id: 1, method: 'eth_sendTransaction', params: [{ from, to, value: '0x2386f26fc10000' }] });
      sent += 1;
      mined += 1;
      const empty = Math.min(txEvery - 1, total - mined);
      if (empty > 0) await rpc(url, { jsonrpc: '2.0', id: 1, method: 'anvil_mine', params: [`0x${empty.toString(16)}`] });
      mined += empty;
    }
    const head = Number.parseInt((await rpc<{ result: string }>(url, { jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] })).result, 16);
    console.log(`backlog: ${mined.toLocaleString('en')} blocks, ${sent} transfers, mined in ${((Date.now() - minedAt) / 1000).toFixed(1)} s`);

    // The measured part: a new follower resumes from the cursor and reaches the head.
    const follower = new BlockFollower({ db: storage.db, settings: config, upstreams, logger });
    const counter = new Counter();
    follower.register(counter);
    const t0 = performance.now();
    follower.start();
    await until(`block ${head}`, () => counter.last === head);
    const seconds = (performance.now() - t0) / 1000;
    await follower.close();
    const expected = head - start + 1;
    if (counter.blocks !== expected) throw new Error(`bench: ${counter.blocks} blocks handed, ${expected} expected`);
    console.log(
      `catch-up: ${counter.blocks.toLocaleString('en')} blocks (${counter.transactions} transactions) in ${seconds.toFixed(2)} s = ` +
        `${Math.round(counter.blocks / seconds).toLocaleString('en')} blocks/s (batches of ${config.events.batchBlocks}, storage ${storage.kind})`,
    );
  } finally {
    await upstreams.close();
    await storage.close();
    await devnet.stop();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
