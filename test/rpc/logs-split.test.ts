// An eth_getLogs wider than the network's maxLogsRange is split into chunks,
// merged in order and answered as one, metered by its chunks. The upstream is a scripted node in
// front of a devnet chain that counts eth_getLogs and refuses any range wider than its cap, as
// providers do; the chain has events spread over many blocks.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createPublicClient, encodeFunctionData, type Hex, http as viemHttp } from 'viem';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import { rpc, waitForReceipt } from '../../src/json/rpc-client.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { TINY_ABI, TINY_BYTECODE } from '../support/tiny-contract.ts';
import { withUpstreams } from '../support/ws.ts';

/** The widest range the scripted node serves, and the network's maxLogsRange. */
const NODE_CAP = 10;
const MAX_RESULTS = 8;
const MAX_CHUNKS = 20;

let devnet: Devnet;
let t: TestApp;
let key: string;
let proxy: { url: string; ranges: Array<[number, number] | 'hash' | 'tag'>; blockTags: string[]; close(): Promise<void> };
let contract: Hex;
let anvil: string;

/** Forwards to the chain; eth_getLogs over more than NODE_CAP blocks is refused as a provider refuses it. */
async function rangeCappedNode(target: string): Promise<typeof proxy> {
  const ranges: Array<[number, number] | 'hash' | 'tag'> = [];
  /** The tags of every eth_getBlockByNumber asked by one (how a node resolves `safe` and `finalized`). */
  const blockTags: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const call = JSON.parse(body) as { id?: unknown; method?: string; params?: Array<Record<string, string>> };
        if (call.method === 'eth_getBlockByNumber') blockTags.push(JSON.stringify(call.params?.[0]));
        if (call.method === 'eth_getLogs') {
          const f = call.params?.[0] ?? {};
          if (f.blockHash) ranges.push('hash');
          else if (!/^0x/.test(f.fromBlock ?? 'latest') || !/^0x/.test(f.toBlock ?? 'latest')) ranges.push('tag');
          else {
            const r: [number, number] = [Number.parseInt(f.fromBlock as string, 16), Number.parseInt(f.toBlock as string, 16)];
            ranges.push(r);
            if (r[1] - r[0] + 1 > NODE_CAP) {
              res.writeHead(200, { 'content-type': 'application/json' });
              res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32005, message: `block range exceeds ${NODE_CAP}` } }));
              return;
            }
          }
        }
        const up = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        res.writeHead(up.status, { 'content-type': 'application/json' });
        res.end(await up.text());
      })();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ranges,
    blockTags,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const from = () => devnet.accounts[1]?.address as Hex;
async function send(tx: { to?: Hex; data: Hex }) {
  const hash = await rpc<Hex>(anvil, 'eth_sendTransaction', [{ from: from(), ...tx }]);
  return waitForReceipt(anvil, hash);
}

before(async () => {
  devnet = await startDevnet({ networks: [{ slug: 'ethereum', chainId: 1, native: false }], nativeBlockTimeSeconds: 1 });
  anvil = (devnet.upstreams.ethereum as { http: string }).http;
  proxy = await rangeCappedNode(anvil);
  const networks = withUpstreams({ ethereum: [{ http: proxy.url, name: 'capped' }] }).map((n) =>
    n.slug === 'ethereum' ? { ...n, maxLogsRange: NODE_CAP, maxLogsResults: MAX_RESULTS } : n,
  );
  t = await startTestApp({
    listen: true,
    overrides: { networks, rpc: { logsChunkConcurrency: 3, maxLogsChunks: MAX_CHUNKS }, whaleAlerts: { networks: [] } },
  });
  key = (await createKey(t.app, { networks: ['ethereum'] })).key;
  // Six events, each followed by a few empty blocks: they spread over about 30 blocks.
  contract = (await send({ data: TINY_BYTECODE })).contractAddress as Hex;
  for (let v = 1n; v <= 6n; v++) {
    await send({ to: contract, data: encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [v] }) });
    await rpc(anvil, 'anvil_mine', ['0x4']);
  }
});

after(async () => {
  await t?.close();
  await proxy?.close();
  await devnet?.stop();
});

const gateway = () => `${t.url}/v1/ethereum/${key}`;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers read freely in tests
async function call(body: unknown): Promise<{ status: number; json: any; cuLeft: number }> {
  const res = await fetch(gateway(), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json(), cuLeft: Number(res.headers.get('x-cu-remaining')) };
}
const getLogs = (filter: Record<string, unknown>, id: unknown = 1) => call({ jsonrpc: '2.0', id, method: 'eth_getLogs', params: [filter] });
const head = async () => Number.parseInt(await rpc<string>(anvil, 'eth_blockNumber', []), 16);
const widths = (since: number) => proxy.ranges.slice(since).map((r) => (Array.isArray(r) ? r[1] - r[0] + 1 : r));

describe('eth_getLogs over a wide range', () => {
  test('is split into chunks the node accepts, merged in order, answered as one, and metered per chunk', async () => {
    const truth = await rpc<unknown[]>(anvil, 'eth_getLogs', [{ address: contract, fromBlock: '0x0', toBlock: 'latest' }]);
    assert.equal(truth.length, 6);
    const narrow = await getLogs({ address: contract, fromBlock: '0x1', toBlock: '0x2' });
    const since = proxy.ranges.length;
    const latest = await head();
    const wide = await getLogs({ address: contract, fromBlock: 'earliest', toBlock: 'latest' }, 'wide-1');
    assert.equal(wide.status, 200);
    assert.equal(wide.json.id, 'wide-1');
    assert.deepEqual(wide.json.result, truth, 'the same logs as the chain answers to one query, in order');
    const sent = widths(since);
    const chunks = Math.ceil((latest + 1) / NODE_CAP);
    assert.equal(sent.length, chunks, `${chunks} chunks of at most ${NODE_CAP} blocks: ${JSON.stringify(sent)}`);
    assert.ok(sent.every((w) => typeof w === 'number' && w <= NODE_CAP), 'no chunk wider than the cap');
    // C10: eth_getLogs weighs 10 compute units; the split one cost 10 per chunk.
    assert.equal(narrow.cuLeft - wide.cuLeft, 10 * chunks, 'metered by the chunks it cost');

    // viem's getLogs reads the same through the gateway.
    const client = createPublicClient({ transport: viemHttp(gateway()) });
    const viaViem = await client.getLogs({ address: contract, fromBlock: 0n, toBlock: 'latest' });
    assert.deepEqual(viaViem.map((l) => BigInt(l.data)), [1n, 2n, 3n, 4n, 5n, 6n]);
  });

  test('a wide range up to finalized is resolved by a node only once metered, then split and answered', async () => {
    const truth = await rpc<unknown[]>(anvil, 'eth_getLogs', [{ address: contract, fromBlock: '0x0', toBlock: 'finalized' }]);
    const asked = proxy.blockTags.length;
    const wide = await getLogs({ address: contract, fromBlock: 'earliest', toBlock: 'finalized' }, 'fin');
    assert.equal(wide.status, 200);
    assert.deepEqual(wide.json.result, truth);
    assert.deepEqual(proxy.blockTags.slice(asked), ['"finalized"'], 'one node call resolves the tag');
  });

  test('a key over its limit sending a batch of such eth_getLogs makes no node call: tags resolve from the known head (C10)', async () => {
    const limited = (await createKey(t.app, { networks: ['ethereum'], rateLimit: 1 })).key;
    const post = (body: unknown) => fetch(`${t.url}/v1/ethereum/${limited}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal((await post({ jsonrpc: '2.0', id: 0, method: 'eth_chainId', params: [] })).status, 200);
    const ranges = proxy.ranges.length;
    const asked = proxy.blockTags.length;
    const batch = Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'eth_getLogs', params: [{ fromBlock: i % 2 ? 'safe' : '0x0', toBlock: 'finalized' }] }));
    const res = await post(batch);
    assert.equal(res.status, 429);
    assert.deepEqual(proxy.blockTags.slice(asked), [], 'no block asked of a node');
    assert.equal(proxy.ranges.length, ranges, 'no eth_getLogs sent');
  });

  test('a range within maxLogsRange and a blockHash query go to the node as they are', async () => {
    const since = proxy.ranges.length;
    const block = await rpc<{ hash: string }>(anvil, 'eth_getBlockByNumber', ['latest', false]);
    const byHash = await getLogs({ blockHash: block.hash });
    assert.deepEqual(byHash.json.result, []);
    const short = await getLogs({ address: contract, fromBlock: '0x1', toBlock: `0x${NODE_CAP.toString(16)}` });
    assert.ok(Array.isArray(short.json.result));
    const recent = await getLogs({ address: contract, fromBlock: 'latest' });
    assert.deepEqual(recent.json.result, []);
    assert.deepEqual(widths(since), ['hash', NODE_CAP, 'tag'], 'one call each, unchanged');
  });

  test('more than maxLogsResults logs is -32602 naming the limit, with a range that fits', async () => {
    // Six events and a limit of 8: a second contract's events push the total over it.
    const other = (await send({ data: TINY_BYTECODE })).contractAddress as Hex;
    for (let v = 1n; v <= 4n; v++) await send({ to: other, data: encodeFunctionData({ abi: TINY_ABI, functionName: 'store', args: [v] }) });
    const res = await getLogs({ fromBlock: '0x0', toBlock: 'latest' });
    assert.equal(res.status, 200);
    assert.equal(res.json.error?.code, -32602);
    assert.match(res.json.error.message, /more than 8 logs \(maxLogsResults\)/);
    assert.equal(res.json.error.data.limit, 'maxLogsResults');
    assert.equal(res.json.error.data.maxLogsResults, MAX_RESULTS);
    const suggested = res.json.error.data.suggestedRange as { fromBlock: string; toBlock: string };
    const fits = await getLogs(suggested);
    assert.ok(Array.isArray(fits.json.result) && fits.json.result.length <= MAX_RESULTS, 'the suggested range is answered');
  });

  test('a range of more than maxLogsChunks chunks is refused before anything is sent, and costs nothing', async () => {
    const before = await getLogs({ fromBlock: 'latest' });
    const since = proxy.ranges.length;
    const res = await getLogs({ fromBlock: '0x0', toBlock: `0x${(NODE_CAP * MAX_CHUNKS + 5).toString(16)}` });
    assert.equal(res.status, 200);
    assert.equal(res.json.error?.code, -32602);
    assert.equal(res.json.error.data.limit, 'maxLogsBlocks');
    assert.equal(res.json.error.data.maxBlocks, NODE_CAP * MAX_CHUNKS);
    assert.equal(proxy.ranges.length, since, 'nothing sent');
    assert.equal(res.cuLeft, before.cuLeft, 'nothing metered');
  });

  test('in a batch, a split eth_getLogs is answered in place among the other calls', async () => {
    const res = await call([
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_getLogs', params: [{ address: contract, fromBlock: '0x0', toBlock: 'latest' }] },
      { jsonrpc: '2.0', id: 3, method: 'eth_getLogs', params: [{ fromBlock: '0x0', toBlock: '0xffffffff' }] },
    ]);
    assert.deepEqual(res.json.map((a: { id: number }) => a.id), [1, 2, 3]);
    assert.equal(res.json[0].result, '0x1');
    assert.equal(res.json[1].result.length, 6);
    assert.equal(res.json[2].error.code, -32602);
  });
});
