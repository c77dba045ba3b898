import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';

// C3: /health/ready stays 200 whatever the upstreams do, and says per network how many answer,
// their head, lag and last error; a network whose upstreams are all known down fails calls at
// once (-32000) while the probes go on. Fake nodes only: they are what can fail on demand.

interface NetworkReport {
  status: string;
  summary: string;
  answering: number;
  total: number;
  head: number | null;
  upstreams: Array<{ index: number; name: string; state: string; healthy: boolean; head: number | null; lag: number | null; lastError?: string }>;
}

async function ready(t: TestApp): Promise<{ status: number; networks: Record<string, NetworkReport> }> {
  const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
  return { status: res.statusCode, networks: res.json<{ networks: Record<string, NetworkReport> }>().networks };
}

const call = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: 7, method, params });

async function post(url: string, body: unknown): Promise<{ status: number; json: { result?: unknown; error?: { code: number; message: string } } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { result?: unknown; error?: { code: number; message: string } } };
}

describe('readiness that tells the truth (C3)', () => {
  let t: TestApp;
  let node: FakeNode;
  let a: FakeNode;
  let b: FakeNode;
  let rpcUrl: string;

  before(async () => {
    [node, a, b] = await Promise.all([startFakeNode(), startFakeNode({ head: 100 }), startFakeNode({ head: 90 })]);
    await node.setMode('status500');
    t = await startTestApp({
      listen: true,
      env: { UPSTREAM_AVALANCHE_FUJI: node.url, UPSTREAM_NATIVE_MAINNET: `${a.url},${b.url}` },
      // A call sent to a stalled node would be held 20 s; a probe gives up after 1 s.
      overrides: { rpc: { requestTimeoutMs: 20_000, totalTimeoutMs: 30_000, healthIntervalMs: 200, maxLagBlocks: 5 }, cache: { enabled: false } },
    });
    // A network no background feature uses, so it stays idle until the first call.
    rpcUrl = `${t.url}/v1/avalanche-fuji/${(await createKey(t.app, { networks: ['avalanche-fuji'] })).key}`;
  });
  after(async () => {
    await t?.close();
    await Promise.all([node, a, b].map((f) => f?.close()));
  });

  test('before its first use a network is idle: nothing was asked, nothing is claimed', async () => {
    const r = await ready(t);
    assert.equal(r.status, 200);
    assert.equal(r.networks['avalanche-fuji']?.status, 'idle');
    assert.equal(r.networks['avalanche-fuji']?.answering, 0);
    assert.equal(r.networks['avalanche-fuji']?.upstreams[0]?.healthy, false, 'not healthy before it answered');
    assert.equal(r.networks['avalanche-fuji']?.upstreams[0]?.state, 'unknown');
  });

  test('the first call on an idle network is tried (unknown is not down); then the report says 0 of 1 and why, still 200', async () => {
    const res = await post(rpcUrl, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']));
    assert.equal(res.status, 502);
    assert.equal(res.json.error?.code, -32000);
    // The error says why no node answered, node by node, never with its URL.
    assert.deepEqual((res.json.error as { data?: { reasons?: unknown } }).data?.reasons, [{ upstream: 0, reason: 'the node answered HTTP 500' }]);
    assert.equal(node.callCount('eth_getBalance'), 1, 'the call reached the node');
    const report = await waitFor(async () => {
      const r = await ready(t);
      return r.networks['avalanche-fuji']?.status === 'down' ? r : undefined;
    }, { what: 'the network reported down' });
    assert.equal(report.status, 200, 'upstreams never make the gateway unready (C3)');
    const n = report.networks['avalanche-fuji'];
    assert.equal(n?.summary, '0 of 1 upstreams answer');
    assert.deepEqual([n?.answering, n?.total, n?.head], [0, 1, null]);
    assert.deepEqual(
      n?.upstreams.map((u) => [u.name, u.state, u.healthy, u.lastError]),
      [['avalanche-fuji-0', 'down', false, 'the node answered HTTP 500']],
    );
    assert.ok(
      t.logs.some((l) => JSON.parse(l).msg === 'avalanche-fuji: 0 of 1 upstreams answer'),
      'a line says the network has no upstream answering',
    );
  });

  test('known down: a call fails at once with -32000 instead of waiting on a node that would hold it', async () => {
    // The node now takes calls and never answers them; its probes keep timing out (still down).
    await node.setMode('stall');
    let timer: NodeJS.Timeout | undefined;
    const held = new Promise<'held'>((resolve) => (timer = setTimeout(() => resolve('held'), 15_000)));
    const started = performance.now();
    const res = await Promise.race([post(rpcUrl, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'])), held]);
    const ms = performance.now() - started;
    clearTimeout(timer);
    assert.notEqual(res, 'held', 'the call waited on the stalled node');
    if (res === 'held') return;
    assert.equal(res.status, 502);
    assert.equal(res.json.error?.code, -32000);
    const reasons = (res.json.error as { data?: { reasons?: Array<{ upstream: number; reason: string }> } }).data?.reasons;
    assert.equal(reasons?.length, 1);
    assert.match(reasons?.[0]?.reason ?? '', /HTTP 500|no answer within/, 'a known-down network names the last failure of each node');
    assert.equal(node.callCount('eth_getBalance'), 1, 'the second call never reached the node');
    // The aim is under 50 ms; the bound leaves room for a busy test machine, far below any timeout.
    assert.ok(ms < 1000, `answered in ${Math.round(ms)} ms`);
    // Meanwhile the probes keep asking the node.
    const probes = node.callCount('eth_blockNumber');
    await waitFor(() => node.callCount('eth_blockNumber') >= probes + 2, { what: 'probes while the network is down' });
    assert.equal((await ready(t)).networks['avalanche-fuji']?.status, 'down');
  });

  test('the first good probe brings it back: the report and a line say 1 of 1, calls reach the node again', async () => {
    await node.setMode('ok');
    const r = await waitFor(async () => {
      const x = await ready(t);
      return x.networks['avalanche-fuji']?.status === 'up' ? x : undefined;
    }, { what: 'the network back up' });
    const n = r.networks['avalanche-fuji'];
    assert.deepEqual([n?.summary, n?.answering, n?.head], ['1 of 1 upstreams answer', 1, 100]);
    assert.deepEqual(
      n?.upstreams.map((u) => [u.state, u.healthy, u.head, u.lag, u.lastError]),
      [['up', true, 100, 0, undefined]],
    );
    const res = await post(rpcUrl, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']));
    assert.equal(res.status, 200);
    assert.equal(node.callCount('eth_getBalance'), 2);
    assert.ok(t.logs.some((l) => JSON.parse(l).msg === 'avalanche-fuji: 1 of 1 upstreams answer'));
  });

  test('two upstreams: heads and lag of each, then one refusing makes the network degraded, named with its reason', async () => {
    assert.equal((await post(`${t.url}/public/main`, call('eth_chainId'))).status, 200);
    const up = await waitFor(async () => {
      const x = await ready(t);
      return x.networks['native-mainnet']?.status === 'up' ? x.networks['native-mainnet'] : undefined;
    }, { what: 'both mainnet upstreams answering' });
    assert.deepEqual([up.summary, up.head], ['2 of 2 upstreams answer', 100]);
    assert.deepEqual(
      up.upstreams.map((u) => [u.name, u.head, u.lag]),
      [
        ['native-mainnet-0', 100, 0],
        ['native-mainnet-1', 90, 10],
      ],
    );
    await b.setMode('refuse');
    // A probe caught on a kept-alive connection as the node stops is reset (ECONNRESET); the next
    // one, on a new connection, is refused: the reason awaited is the one that stays.
    const degraded = await waitFor(async () => {
      const x = await ready(t);
      const n = x.networks['native-mainnet'];
      return n?.status === 'degraded' && n.upstreams[1]?.lastError === 'connection refused (ECONNREFUSED)' ? n : undefined;
    }, { what: 'one mainnet upstream down, refusing connections' });
    assert.equal(degraded.summary, '1 of 2 upstreams answer');
    assert.equal(degraded.upstreams[1]?.lastError, 'connection refused (ECONNREFUSED)');
    // The one that answers still serves.
    assert.equal((await post(`${t.url}/public/main`, call('eth_chainId'))).status, 200);
  });
});

// The rule itself, network by network: test/ops/health.test.ts.
describe('what readiness waits for: health.readyWhen (C3)', () => {
  test('through the route: every-network turns 503 once a used network is down, naming it, and 200 when it answers again', async () => {
    const [node, native] = await Promise.all([startFakeNode({ mode: 'status500' }), startFakeNode()]);
    const t = await startTestApp({
      listen: true,
      // The native networks, which background features use, answer; avalanche-fuji does not.
      env: { UPSTREAM_AVALANCHE_FUJI: node.url, UPSTREAM_NATIVE_MAINNET: native.url, UPSTREAM_NATIVE_TESTNET: native.url, READY_WHEN: 'every-network' },
      overrides: { rpc: { healthIntervalMs: 200 }, cache: { enabled: false } },
    });
    try {
      assert.equal(t.config.health.readyWhen, 'every-network', 'READY_WHEN sets it');
      const url = `${t.url}/v1/avalanche-fuji/${(await createKey(t.app, { networks: ['avalanche-fuji'] })).key}`;
      assert.equal((await post(url, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']))).status, 502);
      const res = await waitFor(async () => {
        const r = await t.app.inject({ method: 'GET', url: '/health/ready' });
        return r.statusCode === 503 ? r : undefined;
      }, { what: 'unready with a network down' });
      const body = res.json<{ status: string; checks: Record<string, { ok: boolean; error?: string }> }>();
      assert.equal(body.status, 'unready');
      assert.equal(body.checks.networks?.ok, false);
      assert.match(body.checks.networks?.error ?? '', /^1 of 16 networks have no upstream answering: avalanche-fuji$/);
      assert.equal(body.checks.storage?.ok, true);
      await node.setMode('ok');
      await waitFor(async () => (await t.app.inject({ method: 'GET', url: '/health/ready' })).statusCode === 200, { what: 'ready again once it answers' });
    } finally {
      await t.close();
      await Promise.all([node.close(), native.close()]);
    }
  });
});
