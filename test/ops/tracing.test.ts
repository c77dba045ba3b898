import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { spawnGateway } from '../support/process.ts';
import { freePort, waitFor } from '../support/wait.ts';

// C58: with an OTLP endpoint set, RPC calls (HTTP and WebSocket) and REST requests are traces sent
// to a collector (here a receiver the test runs), continuing the caller's W3C traceparent and
// handing one to the nodes; log lines of a traced request carry its trace id. Off by default.
// (Its settings, and that tracing off loads no OpenTelemetry: test/ops/tracing-sdk.test.ts.)

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const traceparent = (traceId: string, spanId: string, sampled = true) => `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
const call = (method: string, params: unknown[]) => ({ jsonrpc: '2.0', id: 1, method, params });
const blockHash = () => `0x${hex(32)}`;
const address = '0x1111111111111111111111111111111111111111';

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: { result?: unknown; error?: unknown } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { result?: unknown; error?: unknown } };
}

/** The spans of a trace once its root (the span without a parent in it) and `names` under it have arrived. */
async function traceOf(receiver: OtlpReceiver, traceId: string, rootName: string, names: string[]): Promise<{ root: ReceivedSpan; spans: ReceivedSpan[] }> {
  return waitFor(
    () => {
      const spans = receiver.trace(traceId);
      const root = spans.find((s) => s.name === rootName);
      if (!root) return undefined;
      const children = spans.filter((s) => s.parentSpanId === root.spanId).map((s) => s.name);
      const left = [...children];
      for (const n of names) {
        const i = left.indexOf(n);
        if (i === -1) return undefined;
        left.splice(i, 1);
      }
      return { root, spans };
    },
    { what: `the spans ${rootName} > ${names.join(', ')} of trace ${traceId}` },
  );
}

const attempts = (spans: ReceivedSpan[], root: ReceivedSpan) =>
  spans.filter((s) => s.name === 'upstream attempt' && s.parentSpanId === root.spanId).sort((a, b) => Number(a.attributes['junction.attempt']) - Number(b.attributes['junction.attempt']));

/** What a node received for a call of `method`: its headers. */
function received(node: FakeNode, method: string, param: string): Record<string, string | string[] | undefined> {
  const r = node.requests.filter((q) => q.body.includes(`"${method}"`) && q.body.includes(param)).at(-1);
  assert.ok(r, `${method} reached the node`);
  return r.headers;
}

describe('tracing on: OTEL_EXPORTER_OTLP_ENDPOINT set (C58)', () => {
  let receiver: OtlpReceiver;
  let flaky: FakeNode;
  let steady: FakeNode;
  let slow: FakeNode;
  let quick: FakeNode;
  let t: TestApp;
  let key: string;
  let rpcUrl: string;

  before(async () => {
    receiver = await startOtlpReceiver();
    // The second node answers 100 ms late: its probes make it the slower, so the first is always asked first.
    [flaky, steady, slow, quick] = await Promise.all([startFakeNode(), startFakeNode({ delayMs: 100 }), startFakeNode(), startFakeNode()]);
    t = await startTestApp({
      listen: true,
      env: {
        LOG_LEVEL: 'debug',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'junction-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        UPSTREAM_AVALANCHE_FUJI: `${flaky.url},${steady.url}`,
        UPSTREAM_BSC_TESTNET: `${slow.url},${quick.url}`,
      },
      // A read not answered in 300 ms goes to the next node as well (hedged).
      overrides: { rpc: { hedge: { enabled: true, delayMs: 300 } } },
    });
    key = (await createKey(t.app, { networks: ['avalanche-fuji', 'bsc-testnet'] })).key;
    rpcUrl = `${t.url}/v1/avalanche-fuji/${key}`;
  });
  after(async () => {
    await t?.close();
    await Promise.all([flaky, steady, slow, quick, receiver].map((x) => x?.close()));
  });

  test('an RPC call continues the caller\'s traceparent, with spans for admission, limits, the cache and the upstream attempt', async () => {
    const traceId = hex(16);
    const parent = hex(8);
    const hash = blockHash();
    const res = await post(rpcUrl, call('eth_getBlockByHash', [hash, false]), { traceparent: traceparent(traceId, parent) });
    assert.equal(res.status, 200);
    const { root, spans } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['admission', 'limits', 'cache', 'upstream attempt']);
    assert.equal(root.parentSpanId, parent, "the call's span is a child of the caller's");
    assert.equal(root.kind, 2, 'a server span');
    assert.equal(root.service, 'junction-test');
    assert.equal(root.attributes['http.route'], '/v1/:network/:apiKey');
    assert.equal(root.attributes['rpc.method'], 'eth_getBlockByHash');
    assert.equal(root.attributes['junction.network'], 'avalanche-fuji');
    assert.equal(root.attributes['http.response.status_code'], 200);
    assert.equal(spans.find((s) => s.name === 'cache')?.attributes['junction.cache'], 'miss');
    const [only, ...more] = attempts(spans, root);
    assert.equal(more.length, 0, 'one attempt');
    assert.equal(only?.kind, 3, 'a client span');
    assert.deepEqual(
      { index: only?.attributes['junction.upstream.index'], name: only?.attributes['junction.upstream.name'], attempt: only?.attributes['junction.attempt'], outcome: only?.attributes['junction.outcome'], hedge: only?.attributes['junction.hedge'] },
      { index: 0, name: 'avalanche-fuji-0', attempt: 1, outcome: 'ok', hedge: undefined },
    );
    // The API key in the path is in no span.
    for (const s of spans) assert.ok(!JSON.stringify(s).includes(key), `no key in ${s.name}`);
  });

  test('the node receives a traceparent of the same trace, naming the attempt\'s span', async () => {
    const traceId = hex(16);
    const hash = blockHash();
    await post(rpcUrl, call('eth_getBlockByHash', [hash, false]), { traceparent: traceparent(traceId, hex(8)) });
    const { root, spans } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['upstream attempt']);
    const [attempt] = attempts(spans, root);
    assert.equal(received(flaky, 'eth_getBlockByHash', hash).traceparent, traceparent(traceId, attempt?.spanId ?? ''));
  });

  test('an answer from the cache has a cache span saying hit and no upstream attempt', async () => {
    const hash = blockHash();
    await post(rpcUrl, call('eth_getBlockByHash', [hash, false]));
    const traceId = hex(16);
    await post(rpcUrl, call('eth_getBlockByHash', [hash, false]), { traceparent: traceparent(traceId, hex(8)) });
    const { root, spans } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['admission', 'limits', 'cache']);
    assert.equal(spans.find((s) => s.name === 'cache')?.attributes['junction.cache'], 'hit');
    assert.equal(attempts(spans, root).length, 0);
  });

  test('a failover shows both attempts: the failed one marked an error, then the next node\'s', async () => {
    flaky.setRaw('eth_getBalance', 'not json at all');
    const traceId = hex(16);
    const res = await post(rpcUrl, call('eth_getBalance', [address, 'latest']), { traceparent: traceparent(traceId, hex(8)) });
    assert.equal(res.status, 200);
    assert.ok(res.json.result, 'the second node answered');
    const { root, spans } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['upstream attempt', 'upstream attempt']);
    const [first, second, ...more] = attempts(spans, root);
    assert.equal(more.length, 0);
    assert.equal(first?.attributes['junction.upstream.index'], 0);
    assert.equal(first?.attributes['junction.outcome'], 'invalid_answer');
    assert.equal(first?.status.code, 2, 'the failed attempt is an error');
    assert.equal(second?.attributes['junction.upstream.index'], 1);
    assert.equal(second?.attributes['junction.attempt'], 2);
    assert.equal(second?.attributes['junction.outcome'], 'ok');
    assert.equal(second?.attributes['junction.hedge'], undefined, 'a failover, not a hedge');
    assert.equal(received(flaky, 'eth_getBalance', address).traceparent, traceparent(traceId, first?.spanId ?? ''));
    assert.equal(received(steady, 'eth_getBalance', address).traceparent, traceparent(traceId, second?.spanId ?? ''));
  });

  test('a log line written for a traced call carries its trace id and span id', async () => {
    // Both nodes fail it (whichever is asked first after the failover above): lines about each attempt.
    for (const node of [flaky, steady]) node.setRaw('eth_getTransactionCount', 'not json either');
    const traceId = hex(16);
    const res = await post(rpcUrl, call('eth_getTransactionCount', [address, 'latest']), { traceparent: traceparent(traceId, hex(8)) });
    for (const node of [flaky, steady]) node.setRaw('eth_getTransactionCount', null);
    await t.app.parts.upstreams.pool('avalanche-fuji').checkHealth(); // both answer again for the tests after
    assert.ok(res.status >= 500);
    const { root } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['upstream attempt', 'upstream attempt']);
    assert.equal(root.status.code, 2, 'a call no node answered is an error');
    const lines = t.logs.map((l) => JSON.parse(l) as { msg: string; trace_id?: string; span_id?: string; methods?: string[] });
    const failed = lines.find((l) => l.msg === 'upstream attempt failed' && l.methods?.includes('eth_getTransactionCount'));
    assert.ok(failed, 'the failed attempt was logged');
    assert.equal(failed.trace_id, traceId);
    assert.equal(failed.span_id, root.spanId);
    // Lines outside any request carry none.
    assert.ok(lines.some((l) => l.msg === 'tracing on: spans go to the OTLP collector' && l.trace_id === undefined));
  });

  test('a hedged read shows the hedge (hedge: true) and the slow attempt it cancelled', async () => {
    const pool = t.app.parts.upstreams.pool('bsc-testnet');
    await pool.checkHealth(); // both nodes answer, equally fast: the first listed is asked first
    slow.setDelay(3_000);
    try {
      const traceId = hex(16);
      const res = await post(`${t.url}/v1/bsc-testnet/${key}`, call('eth_getBalance', [address, 'latest']), { traceparent: traceparent(traceId, hex(8)) });
      assert.equal(res.status, 200);
      const { root, spans } = await traceOf(receiver, traceId, 'POST /v1/:network/:apiKey', ['upstream attempt', 'upstream attempt']);
      const [first, hedge] = attempts(spans, root);
      assert.equal(first?.attributes['junction.upstream.index'], 0);
      assert.equal(first?.attributes['junction.outcome'], 'cancelled');
      assert.notEqual(first?.status.code, 2, 'the hedge\'s loser is no error');
      assert.equal(hedge?.attributes['junction.upstream.index'], 1);
      assert.equal(hedge?.attributes['junction.hedge'], true);
      assert.equal(hedge?.attributes['junction.outcome'], 'ok');
    } finally {
      slow.setDelay(0);
    }
  });

  test('a REST request is a server span named by its route, continuing the traceparent', async () => {
    const traceId = hex(16);
    const parent = hex(8);
    const res = await fetch(`${t.url}/api/v1/networks`, { headers: { traceparent: traceparent(traceId, parent) } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const { root } = await traceOf(receiver, traceId, 'GET /api/v1/networks', []);
    assert.equal(root.parentSpanId, parent);
    assert.equal(root.kind, 2);
    assert.equal(root.attributes['http.route'], '/api/v1/networks');
    assert.equal(root.attributes['http.response.status_code'], 200);
    const lines = t.logs.map((l) => JSON.parse(l) as { msg: string; trace_id?: string; span_id?: string });
    const done = lines.filter((l) => l.msg === 'request completed' && l.trace_id === traceId);
    assert.equal(done.length, 1, 'the request\'s debug line carries its trace id');
    assert.equal(done[0]?.span_id, root.spanId);
  });

  test('a malformed traceparent is ignored: the call is answered and starts a trace of its own', async () => {
    const hash = blockHash();
    const res = await post(rpcUrl, call('eth_getBlockByHash', [hash, false]), { traceparent: '00-not-a-trace-01' });
    assert.equal(res.status, 200);
    const header = received(steady.requests.some((r) => r.body.includes(hash)) ? steady : flaky, 'eth_getBlockByHash', hash).traceparent as string;
    assert.match(header, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const { root } = await traceOf(receiver, header.split('-')[1] as string, 'POST /v1/:network/:apiKey', ['upstream attempt']);
    assert.equal(root.parentSpanId, '', 'a root span');
  });

  test('each WebSocket message is a trace of its own, linked to the traceparent of the upgrade', async () => {
    const upgradeTrace = hex(16);
    const upgradeSpan = hex(8);
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws/avalanche-fuji?apiKey=${key}`, { headers: { traceparent: traceparent(upgradeTrace, upgradeSpan) } });
    try {
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      const hash = blockHash();
      const answered = new Promise((resolve) => ws.once('message', resolve));
      ws.send(JSON.stringify(call('eth_getBlockByHash', [hash, false])));
      await answered;
      const header = received(steady.requests.some((r) => r.body.includes(hash)) ? steady : flaky, 'eth_getBlockByHash', hash).traceparent as string;
      const traceId = header.split('-')[1] as string;
      assert.notEqual(traceId, upgradeTrace, 'not the upgrade\'s trace');
      const { root } = await traceOf(receiver, traceId, 'websocket message', ['admission', 'limits', 'cache', 'upstream attempt']);
      assert.equal(root.parentSpanId, '');
      assert.deepEqual(root.links, [{ traceId: upgradeTrace, spanId: upgradeSpan }]);
    } finally {
      ws.close();
    }
  });

  test('a traceparent not sampled is honoured: no span is exported, and the node gets the trace, not sampled', async () => {
    const traceId = hex(16);
    const hash = blockHash();
    await post(rpcUrl, call('eth_getBlockByHash', [hash, false]), { traceparent: traceparent(traceId, hex(8), false) });
    const header = received(steady.requests.some((r) => r.body.includes(hash)) ? steady : flaky, 'eth_getBlockByHash', hash).traceparent as string;
    assert.match(header, new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    // A sampled call made after it has arrived: anything of the first would have too.
    const later = hex(16);
    await post(rpcUrl, call('eth_chainId', []), { traceparent: traceparent(later, hex(8)) });
    await traceOf(receiver, later, 'POST /v1/:network/:apiKey', ['limits']);
    assert.equal(receiver.trace(traceId).length, 0);
  });

  test('health probes are never traced: every upstream attempt has a parent', () => {
    const orphans = receiver.spans.filter((s) => s.name === 'upstream attempt' && s.parentSpanId === '');
    assert.equal(orphans.length, 0);
  });
});

describe('tracing off: no OTLP endpoint (the default)', () => {
  let node: FakeNode;
  let t: TestApp;

  before(async () => {
    node = await startFakeNode();
    t = await startTestApp({ listen: true, env: { LOG_LEVEL: 'debug', UPSTREAM_AVALANCHE_FUJI: node.url } });
  });
  after(async () => {
    await t?.close();
    await node?.close();
  });

  test('the node gets no traceparent (not even the caller\'s), and no log line carries a trace id', async () => {
    const key = (await createKey(t.app, { networks: ['avalanche-fuji'] })).key;
    node.setRaw('eth_getBalance', 'not json'); // a failed attempt: a debug line during the call
    const incoming = traceparent(hex(16), hex(8));
    const res = await post(`${t.url}/v1/avalanche-fuji/${key}`, call('eth_getBalance', [address, 'latest']), { traceparent: incoming });
    assert.ok(res.status >= 500, 'the only node failed');
    assert.equal(received(node, 'eth_getBalance', address).traceparent, undefined);
    const rest = await fetch(`${t.url}/api/v1/networks`, { headers: { traceparent: incoming } });
    assert.equal(rest.status, 200);
    assert.equal(rest.headers.get('traceparent'), null);
    const lines = t.logs.map((l) => JSON.parse(l) as { msg: string; trace_id?: string });
    assert.ok(lines.some((l) => l.msg === 'upstream attempt failed'));
    assert.ok(lines.every((l) => l.trace_id === undefined && !l.msg.startsWith('tracing')));
  });
});

describe('tracing with a collector that does not answer', () => {
  test('calls are answered as usual and the failed export is a warning line', async () => {
    const node = await startFakeNode();
    const port = await freePort(); // nothing listens there
    const t = await startTestApp({ listen: true, env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_BSP_SCHEDULE_DELAY: '50', UPSTREAM_AVALANCHE_FUJI: node.url } });
    try {
      const key = (await createKey(t.app, { networks: ['avalanche-fuji'] })).key;
      const res = await post(`${t.url}/v1/avalanche-fuji/${key}`, call('eth_getBalance', [address, 'latest']), { traceparent: traceparent(hex(16), hex(8)) });
      assert.equal(res.status, 200);
      assert.ok(res.json.result);
      const warning = await waitFor(() => t.logs.map((l) => JSON.parse(l) as { level: number; msg: string; tracing?: string }).find((l) => l.msg === 'tracing: could not export spans'), { what: 'a warning about the export', timeoutMs: 60_000 });
      assert.equal(warning.level, 40);
      assert.match(warning.tracing ?? '', /ECONNREFUSED/);
      assert.doesNotMatch(warning.tracing ?? '', /\n|at TCPConnectWrap/, 'one line, no stack');
    } finally {
      await t.close();
      await node.close();
    }
  });
});

describe('tracing and the stop', () => {
  test('spans still waiting for their batch are exported on SIGTERM before the process exits', async () => {
    const receiver = await startOtlpReceiver();
    const node = await startFakeNode();
    // A batch delay of ten minutes: only the stop can send them.
    const gw = await spawnGateway({ env: { DATA_DIR: 'memory', LOG_FORMAT: 'json', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '600000', UPSTREAM_NATIVE_MAINNET: node.url } });
    try {
      const traceId = hex(16);
      const res = await post(`${gw.url}/public/main`, call('eth_getBalance', [address, 'latest']), { traceparent: traceparent(traceId, hex(8)) });
      assert.equal(res.status, 200);
      await sleep(300);
      assert.equal(receiver.trace(traceId).length, 0, 'nothing exported before the stop');
      gw.child.kill('SIGTERM');
      const { code } = await gw.exited;
      assert.equal(code, 0, gw.output());
      const names = receiver.trace(traceId).map((s) => s.name).sort();
      assert.deepEqual(names, ['POST /public/main', 'cache', 'limits', 'upstream attempt'].sort());
    } finally {
      if (gw.child.exitCode === null) gw.child.kill('SIGKILL');
      await node.close();
      await receiver.close();
    }
  });
});
