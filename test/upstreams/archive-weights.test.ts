// C26: archive nodes first for state older than the prune depth, and weights that
// share the calls among equally good upstreams.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { methodFacts } from '../../src/methods/catalogue.ts';
import { judgeParams } from '../../src/methods/judge.ts';
import { blockNumberOf } from '../../src/methods/values.ts';
import { needsArchive } from '../../src/upstreams/http/archive.ts';
import { call, fakes, pool } from './helpers.ts';

const HEAD = 10_000;
const hex = (n: number) => `0x${n.toString(16)}`;
const ADDR = '0x0000000000000000000000000000000000000001';

/** The block a call reads state at, as the pipeline's judge stage hands it to the pool (C53). */
function judgedBlock(method: string, params: unknown[]): number | null {
  const j = judgeParams(methodFacts(method), params, call(method, params));
  assert.ok(!('code' in j), `${method} is judged`);
  return blockNumberOf(j.block);
}

describe('archive routing (C26)', () => {
  async function setup() {
    const [full, archive] = await fakes(2, { head: HEAD });
    const p = pool([full!, { http: archive!.url, archive: true }], { pruneDepthBlocks: 128 });
    await p.checkHealth();
    return { full: full!, archive: archive!, p };
  }

  const OLD = hex(HEAD - 1_000);
  const RECENT = hex(HEAD - 10);
  const cases: Array<{ what: string; method: string; params: unknown[]; upstream: number }> = [
    { what: 'eth_getBalance at an old block', method: 'eth_getBalance', params: [ADDR, OLD], upstream: 1 },
    { what: 'eth_call at an old block', method: 'eth_call', params: [{ to: ADDR }, OLD], upstream: 1 },
    { what: 'eth_call at an old block by EIP-1898 object', method: 'eth_call', params: [{ to: ADDR }, { blockNumber: OLD }], upstream: 1 },
    { what: 'eth_getStorageAt at earliest', method: 'eth_getStorageAt', params: [ADDR, '0x0', 'earliest'], upstream: 1 },
    { what: 'eth_getProof, whatever its block', method: 'eth_getProof', params: [ADDR, [], 'latest'], upstream: 1 },
    { what: 'eth_getBalance at latest', method: 'eth_getBalance', params: [ADDR, 'latest'], upstream: 0 },
    { what: 'eth_getBalance within the prune depth', method: 'eth_getBalance', params: [ADDR, RECENT], upstream: 0 },
    { what: 'eth_call by block hash (age unknown)', method: 'eth_call', params: [{ to: ADDR }, { blockHash: `0x${'ab'.repeat(32)}` }], upstream: 0 },
    { what: 'eth_getBlockByNumber at an old block (blocks stay on full nodes)', method: 'eth_getBlockByNumber', params: [OLD, false], upstream: 0 },
  ];
  for (const c of cases) {
    test(`${c.what} goes to ${c.upstream === 1 ? 'the archive node first' : 'the first node as usual'}`, async () => {
      const { p } = await setup();
      const res = await p.forward(call(c.method, c.params), [c.method], { block: judgedBlock(c.method, c.params) });
      if (c.upstream === 1) assert.equal(res.upstream, 1);
      // As usual: where a call without a block goes (probe latency may put either node first).
      else assert.equal(res.upstream, (await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream);
    });
  }

  test('a batch with one old-state read goes to the archive node', async () => {
    const { p } = await setup();
    const batch = `[${call('eth_chainId')},${call('eth_getBalance', [ADDR, OLD], 2)}]`;
    assert.equal((await p.forward(batch, ['eth_chainId', 'eth_getBalance'], { block: judgedBlock('eth_getBalance', [ADDR, OLD]) })).upstream, 1);
  });

  test('a failing archive node hands the old read to the full node (its answer beats none)', async () => {
    const { p, archive } = await setup();
    await archive.setMode('refuse');
    assert.equal((await p.forward(call('eth_getBalance', [ADDR, OLD]), ['eth_getBalance'], { block: HEAD - 1_000 })).upstream, 0);
  });

  test('a pruned full node answering "missing trie node" moves the read to the archive node even without the flag', async () => {
    const [pruned, other] = await fakes(2, { head: HEAD });
    pruned?.setRaw('eth_getBalance', '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"missing trie node abc"}}');
    const p = pool([pruned!, other!]);
    assert.equal((await p.forward(call('eth_getBalance', [ADDR, OLD]), ['eth_getBalance'])).upstream, 1);
  });

  test('needsArchive: unknown head, tags and hashes are recent', () => {
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, '0x1']), null, 128), false);
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, '0x1']), 200, 128), true);
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, '0X1']), 200, 128), true);
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, '0x48']), 200, 128), false);
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, 'safe']), 200, 128), false);
    assert.equal(needsArchive(['eth_getBalance'], judgedBlock('eth_getBalance', [ADDR, `0x${'ab'.repeat(32)}`]), 200, 128), false);
    assert.equal(needsArchive(['eth_getBlockByNumber'], 1, 200, 128), false);
  });
});

describe('weights (C26)', () => {
  test('weights 3 and 1 share 400 calls 300 to 100 between equally good upstreams', async () => {
    const [a, b] = await fakes(2);
    const p = pool([{ http: a!.url, weight: 3 }, { http: b!.url, weight: 1 }]);
    await p.checkHealth();
    const counts = [0, 0];
    for (let i = 0; i < 400; i++) {
      const { upstream } = await p.forward(call('eth_chainId', [], i), ['eth_chainId']);
      counts[upstream] = (counts[upstream] ?? 0) + 1;
    }
    // Smooth weighted round robin is exact; a little room in case a probe reorders for a moment.
    assert.ok(Math.abs((counts[0] ?? 0) - 300) <= 8 && Math.abs((counts[1] ?? 0) - 100) <= 8, `counts ${counts.join('/')}`);
  });

  test('three upstreams of weight 1 take a third each', async () => {
    const list = await fakes(3);
    const p = pool(list.map((f) => ({ http: f.url, weight: 1 })));
    await p.checkHealth();
    for (let i = 0; i < 90; i++) await p.forward(call('eth_chainId', [], i), ['eth_chainId']);
    assert.deepEqual(list.map((f) => f.callCount('eth_chainId')), [30, 30, 30]);
  });

  test('without any weight the first upstream takes every call (primary and backups)', async () => {
    const [a, b] = await fakes(2);
    const p = pool([a!, b!]);
    await p.checkHealth();
    for (let i = 0; i < 20; i++) await p.forward(call('eth_chainId', [], i), ['eth_chainId']);
    // One of them takes all (the first listed unless its probe was clearly slower).
    assert.deepEqual([a?.callCount('eth_chainId'), b?.callCount('eth_chainId')].sort(), [0, 20]);
  });

  test('a lagging upstream gets no share, whatever its weight', async () => {
    const [a, b, c] = await fakes(3);
    a?.setHead(100);
    b?.setHead(101);
    c?.setHead(10);
    const p = pool([{ http: a!.url, weight: 1 }, { http: b!.url, weight: 1 }, { http: c!.url, weight: 100 }]);
    await p.checkHealth();
    for (let i = 0; i < 20; i++) await p.forward(call('eth_chainId', [], i), ['eth_chainId']);
    assert.deepEqual([a, b, c].map((f) => f?.callCount('eth_chainId')), [10, 10, 0]);
  });
});
