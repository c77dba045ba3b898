import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { ROOT } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

// Metrics worth a dashboard (C3): calls by network, method, outcome and JSON-RPC code; upstream
// durations, failures and health by upstream name; cache counters; /metrics behind a token or on
// its own port; the shipped Grafana dashboard uses only names /metrics exports.

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[k as string] = v as string;
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

/** The value of the one sample of `name` whose labels include `labels`; 0 when there is none. */
function value(samples: Sample[], name: string, labels: Record<string, string>): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
  return found[0]?.value ?? 0;
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

const call = (method: string, params: unknown[] = [], id: number = 1) => ({ jsonrpc: '2.0', id, method, params });
const RPC = 'junction_rpc_requests_total';
const ADMIN_TOKEN = 'admin-token-for-metrics-tests';

describe('/metrics: JSON-RPC calls, upstreams and the cache', () => {
  let t: TestApp;
  let fake: FakeNode;
  let samples: Sample[];
  let text: string;
  let nodeErrorCode: number;
  const NET = 'native-testnet';
  const DOWN = 'avalanche-fuji';

  before(async () => {
    fake = await startFakeNode();
    await fake.setMode('status500');
    t = await startTestApp({ devnet: true, devnetNetworks: [NET], listen: true, env: { UPSTREAM_AVALANCHE_FUJI: fake.url, ADMIN_TOKEN } });
    const { key } = await createKey(t.app, { networks: [NET] });
    const url = `${t.url}/v1/${NET}/${key}`;
    for (let i = 0; i < 3; i++) assert.equal((await post(url, call('eth_blockNumber'))).status, 200);
    // The node's own error: a malformed address.
    const bad = (await post(url, call('eth_getBalance', ['0xnot-an-address', 'latest']))).json as { error: { code: number } };
    nodeErrorCode = bad.error.code;
    // Refused by the method policy, one listed name and one unknown (counted as `other`).
    await post(url, call('eth_sign', ['0x0', '0x0']));
    await post(url, call('eth_no_such_method'));
    // A batch: counted item by item.
    await post(url, [call('eth_chainId', [], 1), call('eth_no_such_method', [], 2)]);
    // Served from the cache the second time.
    await post(url, call('eth_chainId'));
    // Refused: an unknown key, a network the key does not hold, the key's rate.
    await post(`${t.url}/v1/${NET}/jk_live_00000000nosuchkeynosuchkeynosuchkeynosuchkey0000`, call('eth_blockNumber'));
    await post(`${t.url}/v1/${DOWN}/${key}`, call('eth_blockNumber'));
    const slow = await createKey(t.app, { networks: [NET], rateLimit: 1 });
    await post(`${t.url}/v1/${NET}/${slow.key}`, call('eth_blockNumber'));
    assert.equal((await post(`${t.url}/v1/${NET}/${slow.key}`, call('eth_blockNumber'))).status, 429);
    // Refused: the account's daily quota (one request a day), spent by its first call.
    const capped = await createKey(t.app, { networks: [NET] });
    const limits = await t.app.inject({ method: 'PATCH', url: `/api/v1/admin/users/${capped.user.id}`, headers: { 'x-admin-token': ADMIN_TOKEN }, payload: { limits: { dailyLimit: 1 } } });
    assert.equal(limits.statusCode, 200, limits.body);
    assert.equal((await post(`${t.url}/v1/${NET}/${capped.key}`, call('eth_chainId'))).status, 200);
    const overQuota = await post(`${t.url}/v1/${NET}/${capped.key}`, call('eth_blockNumber'));
    assert.equal(overQuota.status, 429);
    assert.equal((overQuota.json as { error: { code: number } }).error.code, -32006);
    // No node answers on this network.
    const down = await createKey(t.app, { networks: [DOWN] });
    assert.equal((await post(`${t.url}/v1/${DOWN}/${down.key}`, call('eth_blockNumber'))).status, 502);
    // The devnet chain's head seen by a probe.
    await waitFor(async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
      return (res.json<{ networks: Record<string, { upstreams: Array<{ head: number | null }> }> }>().networks[NET]?.upstreams[0]?.head ?? null) !== null;
    }, { what: 'a probe of the devnet chain' });
    const res = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.statusCode, 200);
    text = res.body;
    samples = parse(text);
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  test('calls by network, method, outcome and code', () => {
    const rpc = (labels: Record<string, string>) => value(samples, RPC, labels);
    assert.equal(rpc({ network: NET, method: 'eth_blockNumber', outcome: 'ok', code: '' }), 4, 'three calls and the rate-limited key’s first');
    assert.equal(rpc({ network: NET, method: 'eth_getBalance', outcome: 'node_error', code: String(nodeErrorCode) }), 1);
    assert.equal(rpc({ network: NET, method: 'eth_chainId', outcome: 'ok', code: '' }), 3, 'the batch item, the single call and the capped key’s first');
    assert.equal(rpc({ network: NET, method: 'other', outcome: 'refused_method', code: '-32601' }), 3, 'eth_sign, and eth_no_such_method alone and in the batch');
    assert.equal(rpc({ network: NET, method: 'eth_blockNumber', outcome: 'refused_key', code: '-32001' }), 1);
    assert.equal(rpc({ network: DOWN, method: 'eth_blockNumber', outcome: 'refused_network', code: '-32003' }), 1);
    assert.equal(rpc({ network: NET, method: 'eth_blockNumber', outcome: 'refused_rate', code: '-32005' }), 1);
    assert.equal(rpc({ network: NET, method: 'eth_blockNumber', outcome: 'refused_quota', code: '-32006' }), 1);
    assert.equal(rpc({ network: DOWN, method: 'eth_blockNumber', outcome: 'upstream_error', code: '-32000' }), 1);
    assert.ok(!samples.some((s) => s.name === RPC && s.labels.method === 'eth_no_such_method'), 'unknown names never become labels');
  });

  test('upstreams by network and name, never by URL: durations, failures, up, head, lag', () => {
    const u = { network: NET, upstream: `${NET}-0` };
    assert.ok(value(samples, 'junction_upstream_request_duration_seconds_count', u) >= 4);
    assert.ok(value(samples, 'junction_upstream_request_duration_seconds_bucket', { ...u, le: '+Inf' }) >= 4);
    assert.equal(value(samples, 'junction_upstream_up', u), 1);
    assert.ok(value(samples, 'junction_upstream_head', u) > 0);
    assert.equal(value(samples, 'junction_upstream_lag_blocks', u), 0);
    assert.equal(value(samples, 'junction_network_upstreams_answering', { network: NET }), 1);
    assert.equal(value(samples, 'junction_upstream_errors_total', { network: DOWN, upstream: `${DOWN}-0`, kind: 'http_5xx' }), 1);
    assert.equal(value(samples, 'junction_upstream_up', { network: DOWN, upstream: `${DOWN}-0` }), 0);
    assert.equal(value(samples, 'junction_network_upstreams_answering', { network: DOWN }), 0);
    assert.ok(!text.includes(String(fake.port)), 'no upstream address in /metrics');
  });

  test('the response cache counts its hits', () => {
    assert.ok(value(samples, 'junction_rpc_cache_hits_total', { network: NET }) >= 1);
    assert.ok(value(samples, 'junction_rpc_cache_misses_total', { network: NET }) >= 1);
  });

  test('the Grafana dashboard uses only metric names /metrics exports', () => {
    const dashboard = JSON.parse(readFileSync(`${ROOT}/grafana/junction.json`, 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }>; templating: { list: Array<{ definition?: string }> } };
    const exprs = [...dashboard.panels.flatMap((p) => (p.targets ?? []).map((x) => x.expr)), ...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : []))];
    const names = new Set(exprs.flatMap((e) => [...e.matchAll(/\bjunction_[a-z0-9_]+/g)].map((m) => m[0])));
    assert.ok(names.size >= 15, `the dashboard uses ${names.size} names`);
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] as string, m[2] as string]));
    for (const n of names) {
      const base = n.replace(/_(bucket|sum|count)$/, '');
      const ok = types.has(n) || (base !== n && types.get(base) === 'histogram');
      assert.ok(ok, `the dashboard uses ${n}, which /metrics does not export`);
    }
    // And the names it relies on most are among them.
    for (const n of [RPC, 'junction_upstream_request_duration_seconds_bucket', 'junction_upstream_errors_total', 'junction_upstream_up', 'junction_upstream_lag_blocks', 'junction_rpc_cache_hits_total', 'junction_follower_lag_blocks', 'junction_follower_lease_held', 'junction_webhook_deliveries_total']) assert.ok(names.has(n), n);
  });
});

describe('/metrics access: METRICS_TOKEN and METRICS_PORT', () => {
  const TOKEN = 'metrics-token-0123456789';

  test('with METRICS_TOKEN, /metrics asks for the bearer token (401 in the error envelope otherwise)', async () => {
    const t = await startTestApp({ env: { METRICS_TOKEN: TOKEN } });
    try {
      const none = await t.app.inject({ method: 'GET', url: '/metrics' });
      assert.equal(none.statusCode, 401);
      assert.equal(none.json().error.code, 'UNAUTHORIZED');
      assert.ok(!none.body.includes(TOKEN));
      assert.equal((await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-token-0123456789' } })).statusCode, 401);
      const ok = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(ok.statusCode, 200);
      assert.match(ok.body, /# TYPE junction_rpc_requests_total counter/);
    } finally {
      await t.close();
    }
  });

  test('with METRICS_PORT, a client that asks for scrapes and never reads them is cut within server.writeTimeoutMs, and counted (C60)', async () => {
    const t = await startTestApp({ listen: true, env: { METRICS_PORT: '0' }, overrides: { server: { writeTimeoutMs: 1_000 } } });
    const socket = new net.Socket();
    try {
      const address = new URL(t.app.parts.metrics.address as string);
      const size = (await (await fetch(address)).arrayBuffer()).byteLength;
      // More than the kernel's buffers on both ends of a loopback connection hold (about 4 MiB).
      const times = Math.ceil((16 * 1024 * 1024) / size);
      socket.on('error', () => {});
      socket.pause(); // never reads
      socket.connect(Number(address.port), address.hostname);
      await once(socket, 'connect');
      socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(times));
      const { outbound } = t.app.parts;
      await waitFor(() => outbound.cuts.writeTimeout === 1, { what: 'the client cut', timeoutMs: 20_000 });
      assert.match(t.logs.join('\n'), /client took not its answer within the write timeout; connection cut/);
      // The port goes on serving a client that reads.
      assert.match(await (await fetch(address)).text(), /^junction_connections_cut_total\{reason="write_timeout"\} 1$/m);
    } finally {
      socket.destroy();
      await t.close();
    }
  });

  test('with METRICS_PORT, /metrics is served on that port only (token still asked when set)', async () => {
    const t = await startTestApp({ listen: true, env: { METRICS_PORT: '0', METRICS_TOKEN: TOKEN } });
    try {
      const address = t.app.parts.metrics.address;
      assert.ok(address, 'the metrics port listens');
      assert.equal((await fetch(`${t.url}/metrics`)).status, 404, 'not on the main port');
      assert.equal((await fetch(address)).status, 401);
      const ok = await fetch(address, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(ok.status, 200);
      assert.match(await ok.text(), /# TYPE junction_upstream_up gauge/);
      assert.equal((await fetch(address.replace('/metrics', '/health/live'))).status, 404, 'only /metrics there');
    } finally {
      await t.close();
    }
  });
});
