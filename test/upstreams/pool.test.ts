import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import {
  NoUpstreamError,
  type PoolLogger,
  type PoolOptions,
  UpstreamPool,
  UpstreamRpcError,
} from '../../src/upstreams/http/pool.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { type FakeMode, type FakeNode, startDeafNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { toRpcError } from '../../src/errors/rpc.ts';

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

/** One fake node per mode, closed after the test. */
async function fakes<const M extends readonly FakeMode[]>(...modes: M): Promise<{ [K in keyof M]: FakeNode }> {
  const list = await Promise.all(modes.map(() => startFakeNode()));
  opened.push(...list);
  await Promise.all(list.map((f, i) => f.setMode(modes[i] ?? 'ok')));
  return list as { [K in keyof M]: FakeNode };
}

function pool(upstreams: Array<FakeNode | string>, opts: Partial<PoolOptions> = {}): UpstreamPool {
  const p = new UpstreamPool({
    network: 'testnet',
    upstreams: upstreams.map((u) => ({ http: typeof u === 'string' ? u : u.url })),
    requestTimeoutMs: 1_000,
    totalTimeoutMs: 3_000,
    ...opts,
  });
  opened.push(p);
  return p;
}

function call(method: string, params: unknown[] = [], id: number | string = 1): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method, params });
}

describe('UpstreamPool forwarding', () => {
  test('returns the node bytes unchanged, odd whitespace and key order included', async () => {
    const [a] = await fakes('ok');
    const raw = '  {"result" :  "0x1" ,\n\t"id":7,   "jsonrpc":"2.0"}\r\n ';
    a.setRaw('eth_getBalance', raw);
    const res = await pool([a]).forward(call('eth_getBalance', ['0x0', 'latest'], 7), ['eth_getBalance']);
    assert.equal(res.status, 200);
    assert.equal(res.upstream, 0);
    assert.ok(Buffer.isBuffer(res.body));
    assert.deepEqual(res.body, Buffer.from(raw));
  });

  test('passes a node JSON-RPC error through byte for byte without failing over', async () => {
    const [a, b] = await fakes('ok', 'ok');
    const revert = '{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}';
    a.setRaw('eth_call', revert);
    const res = await pool([a, b]).forward(call('eth_call', [{ to: '0x0' }, 'latest']), ['eth_call']);
    assert.equal(res.upstream, 0);
    assert.equal(res.body.toString(), revert);
    assert.equal(b.callCount('eth_call'), 0);
  });

  for (const mode of ['refuse', 'status500', 'status429', 'garbage'] as const) {
    test(`fails over from an upstream in mode ${mode} to a good one`, async () => {
      const [bad, good] = await fakes(mode, 'ok');
      const res = await pool([bad, good]).forward(call('eth_getBalance', ['0x0', 'latest']), ['eth_getBalance']);
      assert.equal(res.upstream, 1);
      assert.equal(JSON.parse(res.body.toString()).result.method, 'eth_getBalance');
      assert.equal(bad.callCount('eth_getBalance'), mode === 'refuse' ? 0 : 1);
      assert.equal(good.callCount('eth_getBalance'), 1);
    });
  }

  test('fails over from a stalled upstream once the attempt timeout passes', async () => {
    const [stalled, good] = await fakes('stall', 'ok');
    const p = pool([stalled, good], { requestTimeoutMs: 500 });
    const t0 = Date.now();
    const res = await p.forward(call('eth_blockNumber'), ['eth_blockNumber']);
    const elapsed = Date.now() - t0;
    assert.equal(res.upstream, 1);
    assert.equal(stalled.callCount('eth_blockNumber'), 1);
    // Not before the timeout (undici's timers never end an attempt early); that it moved on at
    // all within the total is the answer from upstream 1.
    assert.ok(elapsed >= 450, `took ${elapsed} ms`);
  });

  test('forwards a batch and fails over as a whole', async () => {
    const [bad, good] = await fakes('status500', 'ok');
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_blockNumber', params: [] },
    ]);
    const res = await pool([bad, good]).forward(batch, ['eth_chainId', 'eth_blockNumber']);
    assert.equal(res.upstream, 1);
    assert.equal(JSON.parse(res.body.toString()).length, 2);
  });

  test('a per-method timeout gives a slow method more time than the default', async () => {
    const [slow, other] = await fakes('ok', 'ok');
    // undici's timers (which bound each attempt) tick about every half second: room for that.
    slow.setDelay(2_000);
    const p = pool([slow, other], { requestTimeoutMs: 500, methodTimeoutsMs: { eth_getLogs: 5_000 } });
    assert.equal((await p.forward(call('eth_getLogs', [{}]), ['eth_getLogs'])).upstream, 0);
    assert.equal((await p.forward(call('eth_call', [{}]), ['eth_call'])).upstream, 1);
  });
});

describe('UpstreamPool when nothing answers', () => {
  test('throws NoUpstreamError within the total timeout when every upstream is bad: the attempts are given no more than the total between them (C48)', async () => {
    const [a, b, c, d] = await fakes('refuse', 'stall', 'stall', 'status500');
    // undici's timers end an attempt up to ~500 ms after its timeout (never before): the total
    // leaves the second stall room to start however late the first one ends.
    const p = pool([a, b, c, d], { requestTimeoutMs: 1_000, totalTimeoutMs: 2_000 });
    const err = await p.forward(call('eth_chainId'), ['eth_chainId']).catch((e: unknown) => e);
    assert.ok(err instanceof NoUpstreamError);
    assert.equal(toRpcError(err).code, -32000, 'clients see -32000 (C22)');
    assert.equal(err.maybeSent, false);
    // What each attempt was given, not the wall clock (a loaded host stretches that): the first
    // stall its whole timeout, the second only what was left of the total (none left: not asked).
    const given = err.attempts.map((x) => Number(/^timeout after (\d+) ms$/.exec(x.reason)?.[1] ?? 0));
    assert.deepEqual(
      err.attempts.slice(0, 2).map((x) => x.upstream),
      [0, 1],
    );
    assert.equal(err.attempts[0]?.reason, 'ECONNREFUSED');
    assert.equal(given[1], 1_000);
    assert.ok(given.slice(2).every((ms) => ms < 1_000), JSON.stringify(err.attempts));
    assert.ok(given.reduce((x, y) => x + y, 0) <= 2_000, JSON.stringify(err.attempts));
    // The 500 is asked only with time left (a millisecond may be).
    assert.equal(d.calls.get('eth_chainId') ?? 0, err.attempts.filter((x) => x.upstream === 3).length);
  });

  test('a node that never takes the connection costs an attempt its timeout, not undici\'s 10 s connect limit, and a transaction moves on to the next node since nothing was sent (C48, C26)', async () => {
    const deaf = await startDeafNode();
    opened.push(deaf);
    const [ok] = await fakes('ok');
    const p = pool([deaf.url, ok], { requestTimeoutMs: 1_000, totalTimeoutMs: 5_000 });
    // Without the connect counted in the attempt, the first attempt would hold the call for
    // undici's 10 s connect limit, past the whole 5 s total, and the call would fail.
    const raw = '0x02f8';
    const answer = await p.forward(call('eth_sendRawTransaction', [raw]), ['eth_sendRawTransaction']);
    assert.equal(answer.upstream, 1);
    assert.equal(ok.calls.get('eth_sendRawTransaction'), 1);
    const down = p.health()[0];
    assert.equal(down?.healthy, false);
    assert.match(down?.lastError ?? '', /^no connection within 1000 ms$/);
  });

  test('throws NoUpstreamError at once when every upstream refuses', async () => {
    const [a, b] = await fakes('refuse', 'refuse');
    const p = pool([a, b]);
    const t0 = Date.now();
    await assert.rejects(p.forward(call('eth_chainId'), ['eth_chainId']), NoUpstreamError);
    assert.ok(Date.now() - t0 < 1_000);
    // Both are cooling down now, yet still tried as a last resort.
    assert.deepEqual(
      p.health().map((h) => h.healthy),
      [false, false],
    );
    await a.setMode('ok');
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('a pool without upstreams throws NoUpstreamError', async () => {
    await assert.rejects(pool([]).request('eth_chainId', []), NoUpstreamError);
  });
});

describe('UpstreamPool health', () => {
  test('skips an upstream lagging more than maxLagBlocks once the health check ran', async () => {
    const [behind, ahead] = await fakes('ok', 'ok');
    behind.setHead(100);
    ahead.setHead(200);
    const p = pool([behind, ahead], { maxLagBlocks: 5 });
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    await p.checkHealth();
    const [h0, h1] = p.health();
    assert.deepEqual([h0?.head, h0?.lag, h0?.healthy], [100, 100, true]);
    assert.deepEqual([h1?.head, h1?.lag], [200, 0]);
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
    // Within maxLagBlocks it is used again: config order decides between equals.
    behind.setHead(195);
    await p.checkHealth();
    assert.equal(p.health()[0]?.lag, 5);
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    // A lagging upstream is still better than nothing.
    behind.setHead(100);
    await p.checkHealth();
    await ahead.setMode('refuse');
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('prefers the upstream with the lowest probe latency', async () => {
    const [slow, fast] = await fakes('ok', 'ok');
    slow.setDelay(200);
    const p = pool([slow, fast]);
    await p.checkHealth();
    assert.ok((p.health()[0]?.latencyMs ?? 0) > (p.health()[1]?.latencyMs ?? 0));
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);
  });

  test('an unhealthy upstream is avoided, then used again after it recovers', async () => {
    const [flaky, other] = await fakes('refuse', 'ok');
    const p = pool([flaky, other], { healthIntervalMs: 100 });
    p.start();
    await waitFor(() => p.health()[0]?.state === 'down');
    assert.equal(p.health()[0]?.healthy, false);
    assert.equal(p.health()[0]?.lastError, 'connection refused (ECONNREFUSED)');
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 1);

    await flaky.setMode('ok');
    await waitFor(() => p.health()[0]?.healthy === true);
    assert.equal(p.health()[0]?.lastError, undefined);
    assert.equal(p.health()[0]?.head, 100);
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
  });

  test('close() returns promptly while a probe is stalled', async () => {
    const [stalled] = await fakes('stall');
    const p = pool([stalled], { requestTimeoutMs: 10_000, healthIntervalMs: 5_000 });
    p.start();
    await waitFor(() => stalled.callCount('eth_blockNumber') === 1);
    const t0 = Date.now();
    await p.close();
    assert.ok(Date.now() - t0 < 1_000);
  });
});

describe('UpstreamPool with eth_sendRawTransaction', () => {
  const tx = call('eth_sendRawTransaction', ['0x02f8']);

  test('is not sent to a second upstream after a stall', async () => {
    const [stalled, other] = await fakes('stall', 'ok');
    const p = pool([stalled, other], { requestTimeoutMs: 500 });
    const err = await p.forward(tx, ['eth_sendRawTransaction']).catch((e: unknown) => e);
    assert.ok(err instanceof NoUpstreamError);
    assert.equal(err.maybeSent, true);
    // It ended with the stalled attempt, not after the rest of the total.
    assert.deepEqual(
      err.attempts.map((x) => x.reason),
      ['timeout after 500 ms'],
    );
    assert.equal(stalled.callCount('eth_sendRawTransaction'), 1);
    assert.equal(other.callCount('eth_sendRawTransaction'), 0);
  });

  test('a batch holding it is not sent to a second upstream after a 500', async () => {
    const [broken, other] = await fakes('status500', 'ok');
    const batch = JSON.stringify([
      { jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] },
      { jsonrpc: '2.0', id: 2, method: 'eth_sendRawTransaction', params: ['0x02f8'] },
    ]);
    await assert.rejects(pool([broken, other]).forward(batch, ['eth_chainId', 'eth_sendRawTransaction']), {
      name: 'NoUpstreamError',
      maybeSent: true,
    });
    assert.equal(other.callCount('eth_sendRawTransaction'), 0);
    assert.equal(other.callCount('eth_chainId'), 0);
  });

  test('moves on to the next upstream after connection refused', async () => {
    const [down, other] = await fakes('refuse', 'ok');
    const res = await pool([down, other]).forward(tx, ['eth_sendRawTransaction']);
    assert.equal(res.upstream, 1);
    assert.equal(other.callCount('eth_sendRawTransaction'), 1);
  });
});

describe('UpstreamPool.request', () => {
  test('returns the parsed result', async () => {
    const [a] = await fakes('ok');
    a.setHead(0x1234);
    assert.equal(await pool([a]).request<string>('eth_blockNumber', []), '0x1234');
  });

  test('throws the node JSON-RPC error as UpstreamRpcError without failing over', async () => {
    const [a, b] = await fakes('ok', 'ok');
    a.setRaw('eth_call', '{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0","data":"x"}}');
    await assert.rejects(pool([a, b]).request('eth_call', [{}]), (err: unknown) => {
      assert.ok(err instanceof UpstreamRpcError);
      assert.deepEqual([err.code, err.message, err.details, err.upstream], [-32602, 'invalid argument 0', 'x', 0]);
      return true;
    });
    assert.equal(b.callCount('eth_call'), 0);
  });

  test('fails over from a bracketed body that is not JSON', async () => {
    const [a, b] = await fakes('ok', 'ok');
    a.setRaw('eth_chainId', '{ not json }');
    assert.deepEqual(await pool([a, b]).request('eth_chainId', []), { method: 'eth_chainId', params: [] });
  });
});

describe('UpstreamPool secrecy', () => {
  test('no upstream URL, credential or path shows in errors, health or logs', async () => {
    const [secret, other] = await fakes('ok', 'ok');
    const secretUrl = `http://user:secret@127.0.0.1:${secret.port}/secretkey?apikey=secret`;
    const lines: string[] = [];
    const capture = (level: string) => (obj: object, msg: string) => lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
    const logger: PoolLogger = { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') };
    const p = pool([secretUrl, other], { logger, requestTimeoutMs: 400, totalTimeoutMs: 2_000 });

    // The credentials and path are used, as Basic auth and the request path.
    await p.forward(call('eth_chainId'), ['eth_chainId']);
    assert.equal(secret.last?.path, '/secretkey?apikey=secret');
    assert.equal(secret.last?.headers.authorization, `Basic ${Buffer.from('user:secret').toString('base64')}`);

    const errors: unknown[] = [];
    for (const mode of ['stall', 'status500', 'garbage', 'refuse'] as const) {
      await secret.setMode(mode);
      await other.setMode('refuse');
      errors.push(await p.forward(call('eth_chainId'), ['eth_chainId']).catch((e: unknown) => e));
      errors.push(await p.forward(call('eth_sendRawTransaction', ['0x']), ['eth_sendRawTransaction']).catch((e: unknown) => e));
      errors.push(await p.request('eth_chainId', []).catch((e: unknown) => e));
      await p.checkHealth();
      await other.setMode('ok');
      await p.checkHealth();
    }
    assert.ok(lines.some((l) => l.startsWith('warn testnet: 1 of 2 upstreams answer')));
    assert.ok(errors.every((e) => e instanceof NoUpstreamError));
    let ctorError: unknown;
    try {
      new UpstreamPool({ network: 'x', upstreams: [{ http: 'http://user:secret@[bad/secretkey' }] });
    } catch (e) {
      ctorError = e;
    }
    assert.ok(ctorError instanceof Error);

    const seen = [
      ...lines,
      ...[...errors, ctorError].map((e) => `${String(e)} ${e.stack} ${JSON.stringify(e)}`),
      JSON.stringify(p.health()),
    ].join('\n');
    for (const leak of ['secret', 'user:', '127.0.0.1', String(secret.port)]) {
      assert.ok(!seen.includes(leak), `"${leak}" leaked`);
    }
  });
});

describe('UpstreamPool in front of anvil', () => {
  let anvil: BareAnvil | undefined;
  let anvilUrl = '';

  before(async () => {
    anvil = await startAnvil({ timeoutMs: 15_000 });
    anvilUrl = anvil.url;
  });

  after(async () => {
    await anvil?.stop();
  });

  test('request(eth_chainId) succeeds through the pool while the first upstream refuses', async () => {
    const [down] = await fakes('refuse');
    const p = pool([down, anvilUrl]);
    assert.equal(await p.request<string>('eth_chainId', []), '0x7a69');
    await p.checkHealth();
    const [h0, h1] = p.health();
    assert.equal(h0?.healthy, false);
    assert.equal(h1?.healthy, true);
    assert.equal(typeof h1?.head, 'number');
  });
});
