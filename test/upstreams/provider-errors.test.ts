// C26: answers meaning "this node cannot serve this now" move a read to the next
// node and count against that node; the user sees a node's own error only when every node gave one.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { NoUpstreamError } from '../../src/upstreams/http/pool.ts';
import { DEFAULT_PROVIDER_ERRORS, ProviderErrors } from '../../src/upstreams/http/provider-errors.ts';
import { call, fakes, pool, rpcError } from './helpers.ts';

const KINDS: Array<{ what: string; code: number; message: string; kind: 'busy' | 'missing' }> = [
  { what: 'geth limit exceeded (-32005)', code: -32005, message: 'limit exceeded', kind: 'busy' },
  { what: 'code -32016', code: -32016, message: 'over rate limit', kind: 'busy' },
  { what: '"rate limit" in the message', code: -32000, message: 'Your app has exceeded its rate limit, see https://example.com/key-abc', kind: 'busy' },
  { what: '"too many requests"', code: -32000, message: 'Too Many Requests', kind: 'busy' },
  { what: '"capacity"', code: 429, message: 'Your app has exceeded its compute units per second capacity', kind: 'busy' },
  { what: '"request timed out"', code: -32002, message: 'request timed out', kind: 'busy' },
  { what: '"header not found"', code: -32000, message: 'header not found', kind: 'missing' },
  { what: '"missing trie node" on a pruned node', code: -32000, message: 'missing trie node 0b6c1e... (path ) state 0x12 is not available', kind: 'missing' },
];

describe('provider errors move a read to the next node (C26)', () => {
  for (const k of KINDS) {
    test(`${k.what}: the read is answered by the next node, and the first node's figures show it`, async () => {
      const [a, b] = await fakes(2);
      a?.setRaw('eth_getBalance', rpcError(k.code, k.message));
      const p = pool([a!, b!]);
      const res = await p.forward(call('eth_getBalance', ['0x0', 'latest']), ['eth_getBalance']);
      assert.equal(res.upstream, 1);
      assert.equal(JSON.parse(res.body.toString()).result.method, 'eth_getBalance');
      assert.equal(a?.callCount('eth_getBalance'), 1);
      const errors = p.callStats()[0]?.errors;
      assert.equal(errors?.get(k.kind === 'busy' ? 'node_busy' : 'node_missing'), 1);
      const h = p.health()[0];
      if (k.kind === 'busy') {
        // Cooled down like after a 429: the next call starts at the other node.
        assert.equal(h?.state, 'down');
        assert.match(h?.lastError ?? '', new RegExp(`^node error ${k.code}`));
        assert.ok(!(h?.lastError ?? '').includes('example.com'), 'a provider address stays out of health');
        assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
      } else {
        // Missing old state says nothing about recent reads: the node stays in use.
        assert.equal(h?.state, 'up');
        assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
      }
    });
  }

  test('through request(): internal callers get the next node result, not the throttle', async () => {
    const [a, b] = await fakes(2);
    a?.setRaw('eth_chainId', rpcError(-32005, 'limit exceeded'));
    assert.deepEqual(await pool([a!, b!]).request('eth_chainId', []), { method: 'eth_chainId', params: [] });
  });

  test('when every node gave one, the user gets a node answer: the missing-data one over a throttle', async () => {
    const [a, b, c] = await fakes(3);
    const missing = rpcError(-32000, 'header not found');
    a?.setRaw('eth_call', rpcError(-32005, 'limit exceeded'));
    b?.setRaw('eth_call', missing);
    c?.setRaw('eth_call', rpcError(-32000, 'rate limit reached'));
    const res = await pool([a!, b!, c!]).forward(call('eth_call', [{}, '0x10']), ['eth_call']);
    assert.equal(res.status, 200);
    assert.equal(res.upstream, 1);
    assert.equal(res.body.toString(), missing);
    assert.deepEqual([a, b, c].map((f) => f?.callCount('eth_call')), [1, 1, 1]);
  });

  test('when every node throttles, the last one answer is passed on, not -32000', async () => {
    const [a, b] = await fakes(2);
    a?.setRaw('eth_chainId', rpcError(-32005, 'limit exceeded'));
    b?.setRaw('eth_chainId', rpcError(-32016, 'over rate limit'));
    const res = await pool([a!, b!]).forward(call('eth_chainId'), ['eth_chainId']);
    assert.equal(res.upstream, 1);
    assert.equal(res.body.toString(), rpcError(-32016, 'over rate limit'));
  });

  test('a node error outside the table (a revert) is the answer: no other node is asked', async () => {
    const [a, b] = await fakes(2);
    const revert = '{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}';
    a?.setRaw('eth_call', revert);
    const res = await pool([a!, b!]).forward(call('eth_call', [{}, 'latest']), ['eth_call']);
    assert.equal(res.upstream, 0);
    assert.equal(res.body.toString(), revert);
    assert.equal(b?.callCount('eth_call'), 0);
  });

  test('a result-size refusal ("query returned more than") is an answer, though its code -32005 is in the table', async () => {
    const [a, b] = await fakes(2);
    const tooMany = rpcError(-32005, 'query returned more than 10000 results');
    a?.setRaw('eth_getLogs', tooMany);
    const p = pool([a!, b!]);
    const res = await p.forward(call('eth_getLogs', [{}]), ['eth_getLogs']);
    assert.equal(res.upstream, 0);
    assert.equal(res.body.toString(), tooMany);
    assert.equal(p.health()[0]?.state, 'up');
  });

  test('a successful answer that holds the word "error" is passed on untouched', async () => {
    const [a, b] = await fakes(2);
    const trace = '{"jsonrpc":"2.0","id":1,"result":{"calls":[{"error":"execution reverted","type":"CALL"}]}}';
    a?.setRaw('debug_traceCall', trace);
    const res = await pool([a!, b!]).forward(call('debug_traceCall', [{}, 'latest']), ['debug_traceCall']);
    assert.equal(res.upstream, 0);
    assert.equal(res.body.toString(), trace);
  });

  test('a batch with one throttled item goes to the next node as a whole', async () => {
    const [a, b] = await fakes(2);
    a?.setRaw('eth_getBalance', rpcError(-32005, 'limit exceeded'));
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_getBalance', params: ['0x0', 'latest'] },
    ]);
    const res = await pool([a!, b!]).forward(batch, ['eth_chainId', 'eth_getBalance']);
    assert.equal(res.upstream, 1);
    const items = JSON.parse(res.body.toString()) as Array<{ result: { method: string } }>;
    assert.deepEqual(items.map((i) => i.result.method), ['eth_chainId', 'eth_getBalance']);
    assert.equal(b?.callCount('eth_chainId'), 1);
  });

  test('eth_sendRawTransaction answered "rate limit" is not sent to another node (C26)', async () => {
    const [a, b] = await fakes(2);
    const limited = rpcError(-32005, 'rate limit exceeded');
    a?.setRaw('eth_sendRawTransaction', limited);
    // Broadcast off: the one-node-after-another path, where the maybeSent rule applies.
    const res = await pool([a!, b!]).forward(call('eth_sendRawTransaction', ['0x02f8']), ['eth_sendRawTransaction']);
    assert.equal(res.upstream, 0);
    assert.equal(res.body.toString(), limited);
    assert.equal(b?.callCount('eth_sendRawTransaction'), 0);
  });

  test('a pool whose table is empty passes every node error on', async () => {
    const [a, b] = await fakes(2);
    a?.setRaw('eth_chainId', rpcError(-32005, 'limit exceeded'));
    const res = await pool([a!, b!], { providerErrors: [] }).forward(call('eth_chainId'), ['eth_chainId']);
    assert.equal(res.upstream, 0);
  });

  test('a provider error from the only node, then a failure elsewhere: the node answer, not -32000', async () => {
    const [a, b] = await fakes(2);
    await b?.setMode('refuse');
    a?.setRaw('eth_chainId', rpcError(-32005, 'limit exceeded'));
    const res = await pool([a!, b!]).forward(call('eth_chainId'), ['eth_chainId']).catch((e: unknown) => e);
    assert.ok(!(res instanceof NoUpstreamError));
  });
});

describe('the provider errors table', () => {
  test('config/default.json ships the same rows as the code default', () => {
    const shipped = (JSON.parse(readFileSync('config/default.json', 'utf8')) as { rpc: { providerErrors: unknown } }).rpc.providerErrors;
    assert.deepEqual(shipped, DEFAULT_PROVIDER_ERRORS);
  });

  test('the first matching row decides; code and message together must both match', () => {
    const t = new ProviderErrors([
      { code: -32000, message: 'busy now', kind: 'busy' },
      { message: 'busy', kind: 'answer' },
    ]);
    assert.equal(t.classify(-32000, 'Node BUSY NOW'), 'busy');
    assert.equal(t.classify(-32001, 'busy now'), 'answer');
    assert.equal(t.classify(-32000, 'other'), null);
    assert.equal(t.judge(Buffer.from('{"jsonrpc":"2.0","id":1,"result":"0x1"}')), null);
  });
});
