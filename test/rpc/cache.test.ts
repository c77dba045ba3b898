import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { loadConfig } from '../../src/config/load.ts';
import { type CacheOptions, ResponseCache, answerText, successResult } from '../../src/rpc/dispatch/cache.ts';
import { idText } from '../../src/json/lossless.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';

// C44: the response cache and request coalescing, on their own (the pipeline wires them in).
const NET = { slug: 'ethereum' };
const OTHER = { slug: 'polygon' };
const HASH = `0x${'ab'.repeat(32)}`;
const HASH2 = `0x${'cd'.repeat(32)}`;
const ADDR = '0x00000000000000000000000000000000000000aa';
const HEAD = 1000;
const DEPTH = 64;
const SAFE = HEAD - DEPTH; // 936
const hex = (n: number) => `0x${n.toString(16)}`;

const make = (o: Partial<CacheOptions> = {}) => new ResponseCache({ enabled: true, maxBytesPerNetwork: 1 << 20, safeDepth: DEPTH, ...o });
const ok = (id: string, result: string) => `{"jsonrpc":"2.0","id":${id},"result":${result}}`;

describe('response cache: which calls are cacheable (C44)', () => {
  const c = make();
  /** The LRU key of a call whose answer may be stored, or null. */
  const keyOf = (cache: ResponseCache, network: { slug: string }, method: string, params: unknown, head: number | null, finalized: number | null = null): string | null => {
    const p = cache.plan(network, method, params, head, finalized);
    return p?.cacheable ? p.key : null;
  };
  const key = (method: string, params: unknown, head: number | null = HEAD, finalized: number | null = null) => keyOf(c, NET, method, params, head, finalized);

  test('eth_chainId and net_version are always cacheable, whatever the head and params', () => {
    for (const m of ['eth_chainId', 'net_version']) {
      assert.ok(key(m, [], null));
      assert.equal(key(m, undefined, null), key(m, [], HEAD));
    }
  });

  test('blocks, transactions and receipts by hash are cacheable with a hash, even before the head is known', () => {
    for (const [m, params] of [
      ['eth_getBlockByHash', [HASH, false]],
      ['eth_getBlockByHash', [HASH, true]],
      ['eth_getBlockTransactionCountByHash', [HASH]],
      ['eth_getTransactionByBlockHashAndIndex', [HASH, '0x0']],
      ['eth_getUncleCountByBlockHash', [HASH]],
      ['eth_getUncleByBlockHashAndIndex', [HASH, '0x0']],
      ['eth_getTransactionByHash', [HASH]],
      ['eth_getTransactionReceipt', [HASH]],
      ['eth_getBlockReceipts', [HASH]],
    ] as const) {
      assert.ok(key(m, params, null), `${m} ${JSON.stringify(params)}`);
    }
  });

  test('a malformed hash is not cacheable', () => {
    for (const bad of ['0x1234', `0x${'zz'.repeat(32)}`, 12, null]) {
      assert.equal(key('eth_getBlockByHash', [bad, false]), null);
      assert.equal(key('eth_getTransactionReceipt', [bad]), null);
    }
    assert.equal(key('eth_getTransactionReceipt', { hash: HASH }), null);
  });

  test('transactions and receipts by hash are stored only once their block is at or below the safe block', () => {
    const p = c.plan(NET, 'eth_getTransactionReceipt', [HASH], HEAD);
    assert.equal(p?.settledAt, SAFE);
    assert.equal(c.plan(NET, 'eth_getTransactionByHash', [HASH], null)?.settledAt, null);
    assert.equal(c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)?.settledAt, undefined);
  });

  test('by-number reads are cacheable for a hex block at or below head - safeDepth, and not above', () => {
    for (const [m, rest] of [
      ['eth_getBlockByNumber', [false]],
      ['eth_getBlockTransactionCountByNumber', []],
      ['eth_getTransactionByBlockNumberAndIndex', ['0x1']],
      ['eth_getUncleCountByBlockNumber', []],
      ['eth_getUncleByBlockNumberAndIndex', ['0x0']],
      ['eth_getBlockReceipts', []],
    ] as const) {
      assert.ok(key(m, [hex(SAFE), ...rest]), `${m} at the safe block`);
      assert.ok(key(m, ['0x0', ...rest]), `${m} at genesis`);
      assert.equal(key(m, [hex(SAFE + 1), ...rest]), null, `${m} one above the safe block`);
      assert.equal(key(m, [hex(HEAD), ...rest]), null, `${m} at the head`);
    }
  });

  test('by-number reads are not cacheable while the head is unknown', () => {
    assert.equal(key('eth_getBlockByNumber', ['0x1', false], null), null);
    assert.equal(key('eth_getBalance', [ADDR, '0x1'], null), null);
  });

  test('the finalized block, when higher than head - safeDepth, makes blocks up to it cacheable', () => {
    assert.ok(key('eth_getBlockByNumber', [hex(990), false], HEAD, 990));
    assert.equal(key('eth_getBlockByNumber', [hex(991), false], HEAD, 990), null);
    // A lower finalized block does not take cacheability away.
    assert.ok(key('eth_getBlockByNumber', [hex(SAFE), false], HEAD, 10));
    assert.ok(key('eth_getBlockByNumber', [hex(500), false], null, 500));
  });

  test('tags are never cacheable: latest, pending, safe, finalized, earliest', () => {
    for (const tag of ['latest', 'pending', 'safe', 'finalized', 'earliest']) {
      assert.equal(key('eth_getBlockByNumber', [tag, false]), null, tag);
      assert.equal(key('eth_getBlockReceipts', [tag]), null, tag);
      assert.equal(key('eth_getBalance', [ADDR, tag]), null, tag);
      assert.equal(key('eth_call', [{ to: ADDR, data: '0x' }, tag]), null, tag);
    }
  });

  test('block numbers are read as nodes read them (C54); what no node reads as a block is not cacheable', () => {
    for (const bad of ['0x', '0xzz', '0x1fffffffffffffff', 'Latest', '-1']) {
      assert.equal(key('eth_getBlockByNumber', [bad, false]), null, String(bad));
    }
    for (const good of [10, '10', '0x010', '0x3A8', '0X3a8']) assert.ok(key('eth_getBlockByNumber', [good, false]), String(good));
    // By number only: a hash where a number is expected is the node's error to give.
    assert.equal(key('eth_getBlockByNumber', [HASH, false]), null);
  });

  test('state reads at a fixed old block are cacheable: eth_call, eth_getBalance, eth_getCode, eth_getStorageAt, eth_getTransactionCount, eth_getProof', () => {
    const call = { to: ADDR, data: '0x70a08231' };
    const cases: Array<[string, (b: unknown) => unknown[]]> = [
      ['eth_call', (b) => [call, b]],
      ['eth_getBalance', (b) => [ADDR, b]],
      ['eth_getCode', (b) => [ADDR, b]],
      ['eth_getTransactionCount', (b) => [ADDR, b]],
      ['eth_getStorageAt', (b) => [ADDR, '0x0', b]],
      ['eth_getProof', (b) => [ADDR, ['0x0'], b]],
    ];
    for (const [m, params] of cases) {
      assert.ok(key(m, params(hex(SAFE))), `${m} at the safe block`);
      assert.equal(key(m, params(hex(SAFE + 1))), null, `${m} on a moving block`);
      assert.ok(key(m, params({ blockHash: HASH })), `${m} by EIP-1898 blockHash`);
      assert.ok(key(m, params({ blockNumber: hex(SAFE) })), `${m} by EIP-1898 blockNumber`);
      assert.equal(key(m, params({ blockHash: HASH, requireCanonical: true })), null, `${m} requireCanonical`);
      assert.equal(key(m, params({ blockNumber: hex(SAFE + 1) })), null, `${m} EIP-1898 moving block`);
    }
    // Without a block the node reads latest.
    assert.equal(key('eth_call', [call]), null);
    assert.equal(key('eth_getBalance', [ADDR]), null);
    // State overrides are part of the key, and stay cacheable.
    const plain = key('eth_call', [call, hex(SAFE)]);
    const overridden = key('eth_call', [call, hex(SAFE), { [ADDR]: { balance: '0x1' } }]);
    assert.ok(plain && overridden && plain !== overridden);
  });

  test('eth_getLogs is cacheable by blockHash or with both ends at or below the safe block', () => {
    assert.ok(key('eth_getLogs', [{ blockHash: HASH, address: ADDR }]));
    assert.ok(key('eth_getLogs', [{ fromBlock: '0x1', toBlock: hex(SAFE), topics: [] }]));
    assert.equal(key('eth_getLogs', [{ fromBlock: '0x1', toBlock: hex(SAFE + 1) }]), null);
    assert.equal(key('eth_getLogs', [{ fromBlock: '0x1' }]), null, 'toBlock defaults to latest');
    assert.equal(key('eth_getLogs', [{ toBlock: '0x1' }]), null, 'fromBlock defaults to latest');
    assert.equal(key('eth_getLogs', [{ fromBlock: '0x1', toBlock: 'finalized' }]), null);
    assert.equal(key('eth_getLogs', [{ blockHash: HASH, fromBlock: '0x1', toBlock: '0x2' }]), null, 'invalid mix');
    assert.equal(key('eth_getLogs', [{ fromBlock: '0x1', toBlock: '0x2' }], null), null);
  });

  test('moving reads, transactions and filters are never cacheable', () => {
    for (const [m, p] of [
      ['eth_blockNumber', []],
      ['eth_gasPrice', []],
      ['eth_estimateGas', [{ to: ADDR }, '0x1']],
      ['eth_feeHistory', ['0x4', '0x10', []]],
      ['eth_sendRawTransaction', ['0x02']],
      ['eth_newFilter', [{}]],
      ['eth_getFilterChanges', ['0x1']],
      ['eth_subscribe', ['newHeads']],
      ['web3_clientVersion', []],
      ['nat_getBlockByNumber', ['0x1']],
    ] as const) {
      assert.equal(key(m, p), null, m);
    }
  });

  test('side-effect-free reads are coalesced without being cached; transactions, filters and subscriptions are neither', () => {
    for (const m of ['eth_blockNumber', 'eth_gasPrice', 'eth_estimateGas', 'eth_call', 'eth_getBalance', 'eth_getBlockByNumber']) {
      const p = c.plan(NET, m, ['latest'], HEAD);
      assert.equal(p?.cacheable, false, m);
      assert.ok(p?.key, m);
    }
    for (const m of ['eth_sendRawTransaction', 'eth_newFilter', 'eth_newBlockFilter', 'eth_getFilterChanges', 'eth_getFilterLogs', 'eth_uninstallFilter', 'eth_subscribe', 'nat_getMasternodes']) {
      assert.equal(c.plan(NET, m, [], HEAD), null, m);
    }
  });

  test('keys differ by network, method and params, and are equal for equal calls', () => {
    const a = key('eth_getBlockByHash', [HASH, false]);
    assert.equal(a, key('eth_getBlockByHash', [HASH, false]));
    assert.notEqual(a, key('eth_getBlockByHash', [HASH, true]));
    assert.notEqual(a, key('eth_getBlockByHash', [HASH2, false]));
    assert.notEqual(a, keyOf(c, OTHER, 'eth_getBlockByHash', [HASH, false], HEAD));
    assert.notEqual(key('eth_chainId', []), keyOf(c, OTHER, 'eth_chainId', [], HEAD));
  });

  test('with cache.enabled false nothing is cacheable nor coalesced', () => {
    const off = make({ enabled: false });
    assert.equal(keyOf(off, NET, 'eth_chainId', [], HEAD), null);
    assert.equal(off.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD), null);
    assert.equal(off.plan(NET, 'eth_blockNumber', [], HEAD), null);
  });

  test('the shipped config turns the cache on with 32 MiB per network and a safe depth of 64 blocks', () => {
    const cfg = loadConfig({ env: {} });
    assert.deepEqual({ ...cfg.cache }, { enabled: true, maxBytesPerNetwork: 32 * 1024 * 1024, safeDepth: 64 });
  });
});

describe('response cache: storing answers', () => {
  test('successResult takes the result text as the node wrote it, wherever the member sits', () => {
    const block = '{"number":"0x1","big":123456789012345678901234567890,"s":"a\\"}b"}';
    assert.equal(successResult(ok('1', block)), block);
    assert.equal(successResult(` { "result" : ${block} , "id" : "x", "jsonrpc":"2.0" } \n`), block);
    assert.equal(successResult(ok('1', '"0x1"')), '"0x1"');
    assert.equal(successResult(ok('1', '[]')), '[]');
    // An "error" inside the result is data, not an error answer.
    assert.equal(successResult(ok('1', '{"error":"revert"}')), '{"error":"revert"}');
  });

  test('successResult refuses error answers, null results and bodies that are not one whole answer object', () => {
    assert.equal(successResult('{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}'), null);
    assert.equal(successResult(ok('1', 'null')), null);
    assert.equal(successResult('{"jsonrpc":"2.0","id":1,"result":{"number":"0x1"'), null, 'truncated');
    assert.equal(successResult('{"jsonrpc":"2.0","id":1,"result":"0x1"}garbage'), null);
    assert.equal(successResult('[{"jsonrpc":"2.0","id":1,"result":"0x1"}]'), null);
    assert.equal(successResult('{"jsonrpc":"2.0","id":1}'), null);
    assert.equal(successResult(''), null);
  });

  test('a null result (unknown block or transaction) is not stored: it can appear later', () => {
    const c = make();
    const p = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    assert.equal(c.put(p, ok('1', 'null')), false);
    assert.equal(c.get(NET, p.key), null);
    assert.equal(c.put(p, ok('1', '{"hash":"x"}')), true);
    assert.equal(c.get(NET, p.key), '{"hash":"x"}');
  });

  test('error answers are not stored', () => {
    const c = make();
    const p = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    assert.equal(c.put(p, '{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}'), false);
    assert.equal(c.stats().ethereum?.entries ?? 0, 0);
  });

  test('a pending transaction, or one mined above the safe block, is not stored; one mined at the safe block is', () => {
    const c = make();
    const p = c.plan(NET, 'eth_getTransactionByHash', [HASH], HEAD)!;
    assert.equal(c.put(p, ok('1', `{"hash":"${HASH}","blockHash":null,"blockNumber":null}`)), false);
    assert.equal(c.put(p, ok('1', `{"hash":"${HASH}","blockNumber":"${hex(SAFE + 1)}"}`)), false);
    assert.equal(c.put(p, ok('1', `{"hash":"${HASH}"}`)), false);
    assert.equal(c.put(p, ok('1', `{"blockHash":"${HASH2}","blockNumber":"${hex(SAFE)}","hash":"${HASH}"}`)), true);
    // Without a known head nothing can be shown settled.
    const unknown = c.plan(NET, 'eth_getTransactionReceipt', [HASH], null)!;
    assert.equal(c.put(unknown, ok('1', `{"blockNumber":"0x1"}`)), false);
  });

  test('a read that is only coalesced is never stored', () => {
    const c = make();
    const p = c.plan(NET, 'eth_blockNumber', [], HEAD)!;
    assert.equal(c.put(p, ok('1', '"0x10"')), false);
  });

  test('inserting past maxBytesPerNetwork evicts the least recently used, and the bytes never exceed the bound', () => {
    const max = 8000;
    const c = make({ maxBytesPerNetwork: max });
    const plans = Array.from({ length: 200 }, (_, i) => c.plan(NET, 'eth_getBlockByNumber', [hex(i), false], HEAD)!);
    const result = (i: number) => `{"number":"${hex(i)}","pad":"${'x'.repeat(200)}"}`;
    const size = (i: number) => plans[i]!.key.length + result(i).length;
    for (let i = 0; i < plans.length; i++) {
      assert.equal(c.put(plans[i]!, ok('1', result(i))), true);
      const s = c.stats().ethereum!;
      assert.ok(s.bytes <= max, `bytes ${s.bytes} after ${i + 1} inserts`);
      // Keep block 0 in use: it must survive while older-used entries go.
      if (i > 0) assert.equal(c.get(NET, plans[0]!.key), result(0), `block 0 still cached after ${i + 1} inserts`);
    }
    const s = c.stats().ethereum!;
    assert.ok(s.evicted > 0);
    assert.equal(s.stored, 200);
    // What is held is exactly block 0 plus the newest blocks that fit beside it.
    let expected = size(0);
    let held = 1;
    for (let i = plans.length - 1; i > 0 && expected + size(i) <= max; i--) {
      expected += size(i);
      held++;
    }
    assert.equal(s.bytes, expected);
    assert.equal(s.entries, held);
    assert.equal(c.get(NET, plans[1]!.key), null, 'the least recently used went first');
    assert.equal(c.get(NET, plans[199]!.key), result(199));
  });

  test('hits on the newest entry, then on others, keep the least recently used order', () => {
    const result = (i: number) => `"${'z'.repeat(300)}${i}"`;
    const probe = make();
    const plan = (i: number) => probe.plan(NET, 'eth_getBlockByNumber', [hex(i), false], HEAD)!;
    const size = plan(0).key.length + result(0).length;
    // Room for exactly eight entries (one entry may take at most an eighth of the bound).
    const c = make({ maxBytesPerNetwork: size * 8 + 10 });
    for (let i = 0; i < 8; i++) assert.equal(c.put(plan(i), ok('1', result(i))), true);
    // 7 is the newest: hit it twice (nothing to move), then 0 (moved past 7), then 7 again (moved past 0).
    c.get(NET, plan(7).key);
    c.get(NET, plan(7).key);
    c.get(NET, plan(0).key);
    c.get(NET, plan(7).key);
    // Least recent first: 1..6, 0, 7. Six new entries evict 1..6, the seventh evicts 0, not 7.
    for (let i = 8; i < 15; i++) c.put(plan(i), ok('1', result(i)));
    assert.equal(c.get(NET, plan(7).key), result(7), 'block 7 was used last');
    assert.equal(c.get(NET, plan(0).key), null, 'block 0 was used before block 7');
    for (let i = 1; i < 7; i++) assert.equal(c.get(NET, plan(i).key), null);
    assert.equal(c.stats().ethereum!.entries, 8);
  });

  test('each network has its own bound', () => {
    const c = make({ maxBytesPerNetwork: 4000 });
    const a = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    const b = c.plan(OTHER, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    c.put(a, ok('1', '"a"'));
    for (let i = 0; i < 100; i++) c.put(c.plan(OTHER, 'eth_getBlockByNumber', [hex(i), false], HEAD)!, ok('1', `"${'y'.repeat(100)}"`));
    c.put(b, ok('1', '"b"'));
    assert.equal(c.get(NET, a.key), '"a"');
    assert.equal(c.get(OTHER, b.key), '"b"');
    assert.ok(c.stats().polygon!.bytes <= 4000);
  });

  test('storing the same key again replaces the entry without counting its bytes twice', () => {
    const c = make();
    const p = c.plan(NET, 'eth_chainId', [], HEAD)!;
    c.put(p, ok('1', '"0x1"'));
    c.put(p, ok('2', '"0x1"'));
    const s = c.stats().ethereum!;
    assert.equal(s.entries, 1);
    assert.equal(s.bytes, p.key.length + 5);
  });

  test('an answer larger than an eighth of the bound is not stored, so one answer cannot empty the cache', () => {
    const c = make({ maxBytesPerNetwork: 8000 });
    const small = c.plan(NET, 'eth_chainId', [], HEAD)!;
    c.put(small, ok('1', '"0x1"'));
    const big = c.plan(NET, 'eth_getBlockByHash', [HASH, true], HEAD)!;
    assert.equal(c.put(big, ok('1', `"${'z'.repeat(1000)}"`)), false);
    assert.equal(c.get(NET, small.key), '"0x1"');
    assert.equal(make({ maxBytesPerNetwork: 0 }).put(small, ok('1', '"0x1"')), false);
  });
});

describe('response cache: answers with the caller’s own id (C23)', () => {
  const odd = ['12345678901234567890123', '9007199254740993', '-0', '1e400', '"a\\"b\\\\c\\u00e9\\n"', '"\\u2028"', 'null', '""'];

  test('answerText writes the id exactly as given, numbers beyond 2^53 and escaped strings included', () => {
    for (const id of odd) {
      const text = answerText(id, '{"n":1}');
      assert.equal(text, `{"jsonrpc":"2.0","id":${id},"result":{"n":1}}`);
      assert.equal(idText(text), id);
      JSON.parse(text);
    }
  });

  test('a hit is served with each caller’s own id and the stored result bytes', async () => {
    const c = make();
    const p = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    const result = '{"number":"0x1","difficulty":123456789012345678901234567890}';
    c.put(p, ok('7', result));
    for (const id of odd) {
      const a = await c.serve(p, id, () => assert.fail('a hit goes to no node'));
      assert.equal(a.hit, true);
      assert.equal(a.body, answerText(id, result));
    }
    assert.equal(c.stats().ethereum!.hits, odd.length);
  });
});

describe('response cache: coalescing identical reads', () => {
  test('N concurrent calls with one key make one fetch and all get its value', async () => {
    const c = make();
    let calls = 0;
    const releases: Array<(v: string) => void> = [];
    const fetch = () => {
      calls++;
      return new Promise<string>((r) => releases.push(r));
    };
    const all = Array.from({ length: 50 }, () => c.coalesce('ethereum eth_blockNumber []', fetch));
    for (const release of releases) release('0x10');
    assert.deepEqual(await Promise.all(all), Array(50).fill('0x10'));
    assert.equal(calls, 1);
    assert.equal(c.stats().ethereum!.coalesced, 49);
  });

  test('a failure reaches every waiter of the flight, is not kept, and the next call fetches again', async () => {
    const c = make();
    let calls = 0;
    const fails: Array<(e: Error) => void> = [];
    const all = Array.from({ length: 10 }, () =>
      c.coalesce('k x', () => {
        calls++;
        return new Promise<string>((_, reject) => fails.push(reject));
      }),
    );
    for (const fail of fails) fail(new Error('no node'));
    const outcomes = await Promise.allSettled(all);
    assert.ok(outcomes.every((o) => o.status === 'rejected' && (o.reason as Error).message === 'no node'));
    assert.equal(calls, 1);
    assert.equal(await c.coalesce('k x', async () => (calls++, 'ok')), 'ok');
    assert.equal(calls, 2);
  });

  test('a fetch that throws at once rejects its callers instead of throwing', async () => {
    const c = make();
    await assert.rejects(c.coalesce('k y', () => { throw new Error('sync'); }), /sync/);
    assert.equal(await c.coalesce('k y', async () => 'again'), 'again');
  });

  test('different keys do not share a flight', async () => {
    const c = make();
    let calls = 0;
    const fetch = async () => ++calls;
    await Promise.all([c.coalesce('a 1', fetch), c.coalesce('a 2', fetch), c.coalesce('b 1', fetch)]);
    assert.equal(calls, 3);
  });

  test('serve: concurrent identical calls share one node call, each answer carries its caller’s id, and the next call is a hit', async () => {
    const c = make();
    const p = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    let calls = 0;
    const releases: Array<(body: Buffer) => void> = [];
    const fetch = () => {
      calls++;
      return new Promise<Buffer>((r) => releases.push(r));
    };
    const ids = ['1', '"two"', '12345678901234567890', 'null'];
    const pending = ids.map((id) => c.serve(p, id, fetch));
    for (const release of releases) release(Buffer.from(ok('1', '{"hash":"h"}')));
    const answers = await Promise.all(pending);
    assert.equal(calls, 1);
    answers.forEach((a, i) => {
      assert.equal(a.hit, false);
      assert.equal(idText(String(a.body)), ids[i]);
      assert.deepEqual(JSON.parse(String(a.body)).result, { hash: 'h' });
    });
    const again = await c.serve(p, '5', () => assert.fail('stored'));
    assert.deepEqual(again, { body: ok('5', '{"hash":"h"}'), hit: true });
    const s = c.stats().ethereum!;
    assert.deepEqual({ hits: s.hits, misses: s.misses, coalesced: s.coalesced, entries: s.entries }, { hits: 1, misses: 4, coalesced: 3, entries: 1 });
  });

  test('serve: a node error reaches every caller under its own id and is not stored', async () => {
    const c = make();
    const p = c.plan(NET, 'eth_getBlockByHash', [HASH, false], HEAD)!;
    let calls = 0;
    const err = '{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument"}}';
    const fetch = async () => (calls++, err);
    const [a, b] = await Promise.all([c.serve(p, '1', fetch), c.serve(p, '"b"', fetch)]);
    assert.equal(a.body, err);
    assert.equal(b.body, err.replace('"id":1', '"id":"b"'));
    await c.serve(p, '3', fetch);
    assert.equal(calls, 2);
  });

  test('serve: a null result is passed on and asked again next time', async () => {
    const c = make();
    const p = c.plan(NET, 'eth_getTransactionReceipt', [HASH], HEAD)!;
    let calls = 0;
    const fetch = async () => (calls++, ok('1', 'null'));
    assert.equal((await c.serve(p, '1', fetch)).body, ok('1', 'null'));
    assert.equal((await c.serve(p, '1', fetch)).body, ok('1', 'null'));
    assert.equal(calls, 2);
  });

  test('serve: a failure (no node answered) rejects every caller of the flight and the next call tries again', async () => {
    const c = make();
    const p = c.plan(NET, 'eth_chainId', [], HEAD)!;
    let calls = 0;
    const failing = async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 5));
      throw new Error('upstream down');
    };
    const outcomes = await Promise.allSettled([c.serve(p, '1', failing), c.serve(p, '2', failing), c.serve(p, '3', failing)]);
    assert.deepEqual(outcomes.map((o) => o.status), ['rejected', 'rejected', 'rejected']);
    assert.equal(calls, 1);
    const a = await c.serve(p, '4', async () => (calls++, ok('4', '"0x1"')));
    assert.equal(a.body, ok('4', '"0x1"'));
    assert.equal(calls, 2);
  });

  describe('over real HTTP to a node', () => {
    let node: FakeNode;
    before(async () => {
      node = await startFakeNode({ delayMs: 50 });
    });
    after(() => node.close());

    const forward = async (body: string) => {
      const res = await request(node.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      return Buffer.from(await res.body.arrayBuffer());
    };

    test('20 concurrent identical latest reads reach the node once; a cacheable one is not asked again', async () => {
      const c = make();
      const call = (id: number, method: string, params: unknown[]) => {
        const p = c.plan(NET, method, params, HEAD)!;
        return c.serve(p, String(id), () => forward(JSON.stringify({ jsonrpc: '2.0', id, method, params })));
      };
      const latest = await Promise.all(Array.from({ length: 20 }, (_, i) => call(i, 'eth_getBalance', [ADDR, 'latest'])));
      assert.equal(node.callCount('eth_getBalance'), 1);
      latest.forEach((a, i) => assert.equal(JSON.parse(String(a.body)).id, i));
      // A later latest read is a new flight: coalescing never keeps an answer.
      await call(99, 'eth_getBalance', [ADDR, 'latest']);
      assert.equal(node.callCount('eth_getBalance'), 2);

      const old = await Promise.all(Array.from({ length: 20 }, (_, i) => call(i, 'eth_getBlockByNumber', ['0x10', false])));
      assert.ok(old.every((a) => !a.hit));
      assert.equal((await call(100, 'eth_getBlockByNumber', ['0x10', false])).hit, true);
      assert.equal(node.callCount('eth_getBlockByNumber'), 1);
    });
  });
});
