// Run by slots.test.ts in a process of its own (no test runner's bookkeeping on its heap): under
// steady traffic, how many bytes per call (`attempts`: forwarded through an upstream pool, 32
// under way at once) or per connection (`connections`: one request each, to a server whose
// connections C57's drain follows, 16 at once) V8's old generation grew by. Prints JSON.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import pino from 'pino';
import { ConnectionDrain } from '../../src/http/drain.ts';
import { UpstreamPool } from '../../src/upstreams/http/pool.ts';
import { startFakeNode } from '../support/fake-node.ts';

function oldSpaceUsed(): number {
  for (const s of v8.getHeapSpaceStatistics()) if (s.space_name === 'old_space') return s.space_used_size;
  return 0;
}

/**
 * Bytes the old generation grew by per unit of work, summed between samples. One full collection
 * runs while the work is under way (the fixture runs with --expose-gc): it moves whatever is live
 * then, the structures that hold the objects under way included, to the old generation, as a busy
 * process's own major collections do at some moment; from there a structure that leaves stale
 * pointers behind keeps what it held alive through the scavenges (and the growth shows it), where
 * without that moment it may or may not get there in a short run.
 */
async function grownPer(units: number, lanes: number, warmUp: number, one: () => Promise<void>): Promise<number> {
  let done = 0;
  const lane = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      await one();
      if (++done === warmUp + 200) (globalThis as { gc?: () => void }).gc?.();
    }
  };
  await lane(warmUp); // code compiled, pools and buffers grown
  let grown = 0;
  let last = oldSpaceUsed();
  const sample = setInterval(() => {
    const now = oldSpaceUsed();
    if (now > last) grown += now - last;
    last = now;
  }, 5);
  await Promise.all(Array.from({ length: lanes }, () => lane(units / lanes)));
  clearInterval(sample);
  return Math.round(grown / units);
}

const what = process.argv[2];
if (what === 'attempts') {
  const node = await startFakeNode();
  const pool = new UpstreamPool({ network: 'testnet', upstreams: [{ http: node.url }], requestTimeoutMs: 10_000, totalTimeoutMs: 10_000 });
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  const bytes = await grownPer(9_600, 32, 1_000, async () => {
    const res = await pool.forward(body, ['eth_blockNumber']);
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
  });
  console.log(JSON.stringify({ bytes }));
  await pool.close();
  await node.close();
} else if (what === 'connections') {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('{}'));
  });
  new ConnectionDrain(pino({ level: 'silent' })).attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const bytes = await grownPer(6_400, 16, 500, () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent: false, headers: { connection: 'close' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end('{}');
    }),
  );
  console.log(JSON.stringify({ bytes }));
  server.close();
} else {
  throw new Error('usage: lifetime-fixture.ts attempts|connections');
}
