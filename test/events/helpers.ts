// Shared by the block follower's tests: a devnet chain, apps in front of it, and consumers that
// record what they are handed (in memory, and in a table written in the block's transaction).
import { sql } from 'drizzle-orm';
import type { BlockConsumer, FollowedBlock } from '../../src/events/types.ts';
import type { Db } from '../../src/storage/db.ts';
import { startTestApp, type TestApp, type TestAppOptions } from '../support/app.ts';

export const SEPOLIA = 'ethereum-sepolia';

/** Settings that keep the tests quick: 1 confirmation, a 2 s lease, a 100 ms head poll. */
export const TEST_EVENTS = { confirmations: 1, maxCatchUpBlocks: 10_000, batchBlocks: 50, leaseSeconds: 2, pollIntervalMs: 100 };

/** A JSON-RPC call straight to a chain (anvil_* control methods, checks behind the gateway's back). */
export async function chainRpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

export const chainHead = async (url: string): Promise<number> => Number.parseInt(await chainRpc<string>(url, 'eth_blockNumber'), 16);

/** Mines `n` empty blocks at once. */
export const mine = (url: string, n: number) => chainRpc(url, 'anvil_mine', [`0x${n.toString(16)}`]);

/** An app whose upstream for each given network is the given chain address; no whale networks (the tests register their own consumers). */
export function startFollowingApp(
  upstreams: Record<string, string>,
  opts: Omit<TestAppOptions, 'env'> & { events?: Partial<typeof TEST_EVENTS>; env?: Record<string, string> } = {},
): Promise<TestApp> {
  const env: Record<string, string> = { ...opts.env };
  for (const [slug, url] of Object.entries(upstreams)) env[`UPSTREAM_${slug.toUpperCase().replaceAll('-', '_')}`] = url;
  const { events, ...rest } = opts;
  return startTestApp({
    ...rest,
    env,
    overrides: { ...rest.overrides, events: { ...TEST_EVENTS, ...events }, whaleAlerts: { networks: [] } },
  });
}

/** Records every block it is handed, in memory; `failOn` makes `onBlock` throw for those block numbers. */
export class Recorder implements BlockConsumer {
  readonly name: string;
  readonly blocks: FollowedBlock[] = [];
  readonly committed: FollowedBlock[] = [];
  readonly failOn = new Set<number>();
  nets: string[];

  constructor(nets: string[], name = 'test-recorder') {
    this.nets = nets;
    this.name = name;
  }

  networks(): string[] {
    return this.nets;
  }

  async onBlock(block: FollowedBlock, _tx: Db): Promise<void> {
    if (this.failOn.has(block.number)) throw new Error(`refusing block ${block.number} on purpose`);
    this.blocks.push(block);
  }

  afterCommit(block: FollowedBlock): void {
    this.committed.push(block);
  }

  numbers(network: string): number[] {
    return this.committed.filter((b) => b.network === network).map((b) => b.number);
  }
}

/** A table of the tests: one row per block a consumer was handed, written in the block's transaction. */
export async function createSeenTable(db: Db): Promise<void> {
  await db.execute(sql`create table if not exists follower_test_seen (network text not null, number bigint not null, holder text not null)`);
}

/**
 * Writes one row per block into `follower_test_seen` inside the block's transaction, so the rows
 * are exactly the blocks whose transaction committed. `failOn`: the row is written, then `onBlock`
 * throws (the row must roll back with the cursor).
 */
export class TableRecorder implements BlockConsumer {
  readonly name = 'test-table';
  readonly failOn = new Set<number>();
  readonly nets: string[];
  readonly holder: string;

  constructor(nets: string[], holder: string) {
    this.nets = nets;
    this.holder = holder;
  }

  networks(): string[] {
    return this.nets;
  }

  async onBlock(block: FollowedBlock, tx: Db): Promise<void> {
    await tx.execute(sql`insert into follower_test_seen (network, number, holder) values (${block.network}, ${block.number}, ${this.holder})`);
    if (this.failOn.has(block.number)) throw new Error(`refusing block ${block.number} on purpose`);
  }
}

/** Rows of `follower_test_seen` for a network: how often each block number was seen, and by whom. */
export async function seenRows(db: Db, network: string): Promise<Array<{ number: number; holder: string }>> {
  const res: unknown = await db.execute(sql`select number::int as number, holder from follower_test_seen where network = ${network} order by number`);
  const rows = Array.isArray(res) ? res : (res as { rows: unknown[] }).rows;
  return rows as Array<{ number: number; holder: string }>;
}

/** Block numbers from `from` to `to` that are not seen exactly once. */
export function notExactlyOnce(rows: ReadonlyArray<{ number: number }>, from: number, to: number): string[] {
  const counts = new Map<number, number>();
  for (const r of rows) counts.set(Number(r.number), (counts.get(Number(r.number)) ?? 0) + 1);
  const bad: string[] = [];
  for (let n = from; n <= to; n++) if (counts.get(n) !== 1) bad.push(`${n}x${counts.get(n) ?? 0}`);
  for (const n of counts.keys()) if (n < from || n > to) bad.push(`${n} outside ${from}..${to}`);
  return bad;
}
