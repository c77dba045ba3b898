import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { toRpcError } from '../../src/errors/rpc.ts';
import { nextProbeDelay } from '../../src/upstreams/http/health.ts';
import { inWords, NetworkDownError, NoUpstreamError, type PoolLogger, type PoolOptions, UpstreamPool } from '../../src/upstreams/http/pool.ts';
import { type FakeMode, type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';

// Readiness that tells the truth (C3, C26): an upstream is healthy only once it answered; a
// network whose upstreams are all known down fails calls at once while its probes go on.

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function fake(mode: FakeMode = 'ok'): Promise<FakeNode> {
  const f = await startFakeNode();
  opened.push(f);
  await f.setMode(mode);
  return f;
}

/** A pool logging into `lines` as `level msg json`. */
function pool(upstreams: Array<{ name?: string; http: string }>, opts: Partial<PoolOptions> = {}): { p: UpstreamPool; lines: string[] } {
  const lines: string[] = [];
  const capture = (level: string) => (obj: object, msg: string) => lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
  const logger: PoolLogger = { debug: capture('debug'), info: capture('info'), warn: capture('warn'), error: capture('error') };
  const p = new UpstreamPool({ network: 'testnet', upstreams, requestTimeoutMs: 1_000, totalTimeoutMs: 3_000, logger, ...opts });
  opened.push(p);
  return { p, lines };
}

const call = (method: string) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] });

describe('upstream states', () => {
  test('an upstream is unknown, not healthy, until it answered; named from the config or <network>-<index>, never by URL', async () => {
    const [a, b] = await Promise.all([fake(), fake()]);
    const { p } = pool([{ name: 'primary', http: a.url }, { http: b.url }]);
    assert.deepEqual(
      p.health().map((h) => [h.name, h.state, h.healthy]),
      [
        ['primary', 'unknown', false],
        ['testnet-1', 'unknown', false],
      ],
    );
    await p.forward(call('eth_chainId'), ['eth_chainId']);
    assert.deepEqual(
      p.health().map((h) => [h.state, h.healthy]),
      [
        ['up', true],
        ['unknown', false],
      ],
    );
    assert.ok(!JSON.stringify(p.health()).includes(String(a.port)));
  });

  test('the last error is told in words', () => {
    assert.equal(inWords('ECONNREFUSED'), 'connection refused (ECONNREFUSED)');
    assert.equal(inWords('timeout after 5000 ms'), 'no answer within 5000 ms');
    assert.equal(inWords('HTTP 502'), 'the node answered HTTP 502');
    assert.equal(inWords('HTTP 429'), 'the node answered HTTP 429 (too many requests)');
    assert.equal(inWords('invalid body (HTTP 200)'), 'the answer is not JSON-RPC (HTTP 200)');
    assert.equal(inWords('invalid body (HTTP 200) to eth_blockNumber'), 'the answer to eth_blockNumber is not a block number (HTTP 200)');
    assert.equal(inWords('EWHATEVER'), 'request failed (EWHATEVER)');
  });
});

describe('a network known to be down', () => {
  test('with probes running and every upstream down, a call is not sent: it fails at once with -32000, even to a node that would hold it', async () => {
    const node = await fake('refuse');
    const { p } = pool([{ http: node.url }], { requestTimeoutMs: 30_000, totalTimeoutMs: 60_000, healthIntervalMs: 100 });
    p.start();
    await waitFor(() => p.isDown(), { what: 'the probe to find the node down' });
    // The node now takes calls and never answers: a call sent to it would be held for 30 s.
    await node.setMode('stall');
    let timer: NodeJS.Timeout | undefined;
    const held = new Promise<'held'>((resolve) => (timer = setTimeout(() => resolve('held'), 20_000)));
    const outcome = await Promise.race([p.forward(call('eth_getBalance'), ['eth_getBalance']).catch((e: unknown) => e), held]);
    clearTimeout(timer);
    assert.ok(outcome instanceof NetworkDownError, `got ${String(outcome)}`);
    assert.ok(outcome instanceof NoUpstreamError);
    assert.equal(toRpcError(outcome).code, -32000);
    assert.equal(outcome.attempts[0]?.reason, 'ECONNREFUSED', 'the error carries the last reason');
    assert.equal(node.callCount('eth_getBalance'), 0, 'the call never reached the node');
    // Internal callers (faucet, follower) fail as fast.
    await assert.rejects(p.request('eth_chainId', []), NetworkDownError);
    assert.equal(node.callCount('eth_chainId'), 0);
  });

  test('the first good probe brings it back', async () => {
    const node = await fake('status500');
    const { p, lines } = pool([{ http: node.url }], { healthIntervalMs: 100 });
    p.start();
    await waitFor(() => p.isDown(), { what: 'down' });
    await node.setMode('ok');
    await waitFor(() => !p.isDown(), { what: 'a good probe' });
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'])).upstream, 0);
    assert.ok(lines.some((l) => l.startsWith('warn testnet: 0 of 1 upstreams answer') && l.includes('the node answered HTTP 500')), lines.join('\n'));
    assert.ok(lines.some((l) => l.startsWith('info testnet: 1 of 1 upstreams answer')));
  });

  test('without probes (an idle pool) nothing is "known": every call is tried', async () => {
    const node = await fake('status500');
    const { p } = pool([{ http: node.url }]);
    await assert.rejects(p.forward(call('eth_chainId'), ['eth_chainId']), NoUpstreamError);
    assert.equal(p.health()[0]?.state, 'down');
    assert.equal(p.isDown(), false);
    await assert.rejects(p.forward(call('eth_chainId'), ['eth_chainId']), (e: unknown) => e instanceof NoUpstreamError && !(e instanceof NetworkDownError));
    assert.equal(node.callCount('eth_chainId'), 2);
  });

  test('a call that takes the last answering upstream down makes the pool probe at once, not at the next tick', async () => {
    const node = await fake('ok');
    const { p } = pool([{ http: node.url }], { healthIntervalMs: 60_000 });
    p.start();
    await waitFor(() => p.health()[0]?.state === 'up', { what: 'the first probe' });
    const probes = node.callCount('eth_blockNumber');
    await node.setMode('status500');
    await assert.rejects(p.forward(call('eth_chainId'), ['eth_chainId']), NoUpstreamError);
    await waitFor(() => node.callCount('eth_blockNumber') > probes, { what: 'a probe right after the failure' });
  });
});

/** A node answering `eth_blockNumber` that notes when each probe arrived (ms, monotonic). */
async function probeClock(): Promise<{ url: string; at: number[] }> {
  const at: number[] = [];
  const server = http.createServer((req, res) => {
    at.push(performance.now());
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":"0x10"}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, at };
}

describe('probe rounds (C26, docs/scaling.md)', () => {
  test('a round comes at most the interval after the last, up to a fifth early', () => {
    assert.equal(nextProbeDelay(5_000, () => 0), 5_000);
    assert.equal(nextProbeDelay(5_000, () => 0.5), 4_500);
    assert.equal(nextProbeDelay(5_000, () => 0.999_999), 4_000);
  });

  test('the pools of two networks started together drift apart instead of probing in the same turn every round', async () => {
    const [a, b] = await Promise.all([probeClock(), probeClock()]);
    const pa = new UpstreamPool({ network: 'net-a', upstreams: [{ http: a.url }], requestTimeoutMs: 1_000, totalTimeoutMs: 3_000, healthIntervalMs: 100 });
    const pb = new UpstreamPool({ network: 'net-b', upstreams: [{ http: b.url }], requestTimeoutMs: 1_000, totalTimeoutMs: 3_000, healthIntervalMs: 100 });
    opened.push(pa, pb);
    pa.start();
    pb.start();
    await waitFor(() => a.at.length >= 30 && b.at.length >= 30, { what: '30 probe rounds of each', timeoutMs: 15_000 });
    // Each pool still probes every 100 ms at most, 80 at least; a busy machine's timers can fire late
    // (a single gap of 144 ms was seen while other suites ran; 30 rounds give more chances), so late
    // ones get room, early ones none.
    for (const at of [a.at, b.at]) {
      const gaps = at.slice(1, 30).map((t, i) => t - (at[i] as number));
      assert.ok(gaps.every((g) => g >= 75 && g <= 500), gaps.map((g) => g.toFixed(0)).join(' '));
    }
    // Started in the same turn, with the same interval: without the jitter the rounds of the two
    // stay within a millisecond or two of each other for good. With it, the distance is a random
    // walk (steps of +-20 ms): within 10 ms from the 8th to the 16th round in about 2% of runs,
    // from the 10th to the 30th in about 0.01% (simulated), so 30 rounds are looked at.
    const apart = a.at.slice(0, 30).map((t, i) => Math.abs(t - (b.at[i] as number)));
    assert.ok(Math.max(...apart.slice(10)) > 10, apart.map((d) => d.toFixed(1)).join(' '));
  });
});

describe('the per-network line', () => {
  test('said once after the first probe round and then only when something changes, naming what fails', async () => {
    const [a, b] = await Promise.all([fake(), fake()]);
    const { p, lines } = pool([{ name: 'a', http: a.url }, { name: 'b', http: b.url }], { healthIntervalMs: 50 });
    p.start();
    await waitFor(() => a.callCount('eth_blockNumber') >= 4, { what: 'four probe rounds' });
    const said = () => lines.filter((l) => / testnet: \d of 2 upstreams answer/.test(l));
    assert.equal(said().length, 1, said().join('\n'));
    assert.match(said()[0] ?? '', /^info testnet: 2 of 2 upstreams answer/);
    await b.setMode('refuse');
    await waitFor(() => said().length === 2, { what: 'the change' });
    const line = said()[1] ?? '';
    assert.match(line, /^warn testnet: 1 of 2 upstreams answer/);
    assert.deepEqual(JSON.parse(line.slice(line.indexOf('{'))).failing, { b: 'connection refused (ECONNREFUSED)' });
    const rounds = b.callCount('eth_blockNumber');
    await waitFor(() => a.callCount('eth_blockNumber') >= rounds + 4, { what: 'more rounds' });
    assert.equal(said().length, 2, 'no repeat while nothing changes');
  });

  test('a change seen by a call is said at once, with the request id', async () => {
    const [a, b] = await Promise.all([fake(), fake()]);
    const { p, lines } = pool([{ http: a.url }, { http: b.url }], { healthIntervalMs: 60_000 });
    p.start();
    await waitFor(() => p.health().every((h) => h.state === 'up'), { what: 'both up' });
    await a.setMode('status500');
    assert.equal((await p.forward(call('eth_chainId'), ['eth_chainId'], { reqId: 'req-42' })).upstream, 1);
    const line = lines.find((l) => l.includes('testnet: 1 of 2 upstreams answer'));
    assert.ok(line);
    assert.equal(JSON.parse(line.slice(line.indexOf('{'))).reqId, 'req-42');
    const attempt = lines.find((l) => l.startsWith('debug upstream attempt failed'));
    assert.equal(JSON.parse((attempt ?? '').slice((attempt ?? '').indexOf('{'))).reqId, 'req-42');
  });
});

describe('call figures per upstream', () => {
  test('durations and failures by kind are counted for calls, not for probes', async () => {
    const [bad, good] = await Promise.all([fake('status500'), fake()]);
    const { p } = pool([{ name: 'bad', http: bad.url }, { name: 'good', http: good.url }]);
    await p.checkHealth();
    await p.forward(call('eth_chainId'), ['eth_chainId']);
    await p.forward(call('eth_chainId'), ['eth_chainId']);
    const [s0, s1] = p.callStats();
    // The probe found `bad` down: both calls went to `good` only.
    assert.equal(s0?.count, 0);
    assert.equal(s1?.count, 2);
    assert.equal([...(s1?.buckets ?? [])].reduce((x, y) => x + y, 0), 2);
    assert.ok((s1?.sum ?? 0) > 0);
    await good.setMode('refuse');
    await assert.rejects(p.forward(call('eth_chainId'), ['eth_chainId']));
    const [t0, t1] = p.callStats();
    assert.deepEqual([...(t0?.errors ?? [])], [['http_5xx', 1]]);
    // Refused on a new connection, or reset on the kept-alive one: a connection failure either way.
    const [[kind, n] = []] = [...(t1?.errors ?? [])];
    assert.ok(kind === 'connect' || kind === 'connection', `kind ${String(kind)}`);
    assert.equal(n, 1);
  });
});
