// Shared by the upstream routing tests (C26): pools on fake nodes, closed after each test.
import { afterEach } from 'node:test';
import { type PoolOptions, UpstreamPool } from '../../src/upstreams/http/pool.ts';
import { type FakeMode, type FakeNode, type FakeNodeOptions, startFakeNode } from '../support/fake-node.ts';

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

/** Something to close after the test. */
export function closeAfter<T extends { close(): Promise<void> }>(thing: T): T {
  opened.push(thing);
  return thing;
}

/** One fake node per mode, closed after the test. */
export async function fakes(count: number, opts: FakeNodeOptions = {}, mode: FakeMode = 'ok'): Promise<FakeNode[]> {
  const list = await Promise.all(Array.from({ length: count }, () => startFakeNode(opts)));
  opened.push(...list);
  if (mode !== 'ok') await Promise.all(list.map((f) => f.setMode(mode)));
  return list;
}

export function pool(upstreams: Array<FakeNode | string | { http: string; archive?: boolean; weight?: number }>, opts: Partial<PoolOptions> = {}): UpstreamPool {
  const p = new UpstreamPool({
    network: 'testnet',
    upstreams: upstreams.map((u) => (typeof u === 'string' ? { http: u } : 'url' in u ? { http: u.url } : u)),
    requestTimeoutMs: 2_000,
    totalTimeoutMs: 5_000,
    ...opts,
  });
  opened.push(p);
  return p;
}

export function call(method: string, params: unknown[] = [], id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params });
}

export function rpcError(code: number, message: string, id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } });
}

