// Run by attempt-lifetime.test.ts in a process of its own (no test runner's bookkeeping on its
// heap): forwards calls through a pool, 32 under way at once, and prints how many bytes per call
// V8's old generation grew by.
import v8 from 'node:v8';
import { UpstreamPool } from '../../src/upstreams/http/pool.ts';
import { startFakeNode } from '../support/fake-node.ts';

const BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
/** Calls under way at once, as a loaded gateway has them (the bench's 32 connections). */
const LANES = 32;
const CALLS = 9_600;

function oldSpaceUsed(): number {
  for (const s of v8.getHeapSpaceStatistics()) if (s.space_name === 'old_space') return s.space_used_size;
  return 0;
}

const node = await startFakeNode();
const pool = new UpstreamPool({ network: 'testnet', upstreams: [{ http: node.url }], requestTimeoutMs: 10_000, totalTimeoutMs: 10_000 });
const lane = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) {
    const res = await pool.forward(BODY, ['eth_blockNumber']);
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
  }
};
await lane(1_000); // code compiled, pools and buffers grown
// What the old generation grew by, summed between samples (a major collection in between only lowers it).
let grown = 0;
let last = oldSpaceUsed();
const sample = setInterval(() => {
  const now = oldSpaceUsed();
  if (now > last) grown += now - last;
  last = now;
}, 5);
await Promise.all(Array.from({ length: LANES }, () => lane(CALLS / LANES)));
clearInterval(sample);
console.log(JSON.stringify({ bytesPerCall: Math.round(grown / CALLS) }));
await pool.close();
await node.close();
