// Settled once: each call of a message carries its outcome through the pipeline's stages, and the
// metrics, the C46 analytics and the log lines record it once when the message is answered
// (src/rpc/outcome.ts). A batch that meets every stage's refusal and every kind of answer is
// counted exactly once per call, under the right outcome.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Analytics } from '../../src/analytics/store.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';

const NETWORK = 'native-testnet';
const ADDRESS = '0x1111111111111111111111111111111111111111';
const ADMIN_TOKEN = 'settled-once-admin-token-0123456789';

let t: TestApp;
let fake: FakeNode;

before(async () => {
  fake = await startFakeNode();
  // eth_sendRawTransaction is answered with a node's error object.
  fake.refuse.add('eth_sendRawTransaction');
  t = await startTestApp({ listen: true, env: { LOG_LEVEL: 'debug', UPSTREAM_NATIVE_TESTNET: fake.url, ADMIN_TOKEN } });
});

/** A key of an account on the pro plan (its analytics can be read). */
async function proKey() {
  const user = await registerUser(t.app);
  await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
  return createKey(t.app, { networks: [NETWORK] }, user);
}
after(async () => {
  await t?.close();
  await fake?.close();
});

/** `junction_rpc_requests_total` of the network, as `method outcome code` -> count. */
async function counts(): Promise<Map<string, number>> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^junction_rpc_requests_total\{(.*)\} (\d+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[1] as string).matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.network !== NETWORK) continue;
    out.set(`${labels.method} ${labels.outcome} ${labels.code}`, Number(m[2]));
  }
  return out;
}

function delta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const d: Record<string, number> = {};
  for (const [k, v] of after) {
    const n = v - (before.get(k) ?? 0);
    if (n !== 0) d[k] = n;
  }
  return d;
}

describe('settled once: one record per call, at the end (src/rpc/outcome.ts)', () => {
  test('a batch meeting the split, judge and dispatch stages: each call once in the metrics, the analytics and the log', async () => {
    const k = await proKey();
    const before = await counts();
    const fromLog = t.logs.length;
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [ADDRESS, 'latest'] }, // a node's result
      { jsonrpc: '2.0', id: 2, method: 'eth_sendRawTransaction', params: ['0x02'] }, // a node's error object
      { jsonrpc: '2.0', id: 3, method: 'eth_sign', params: [ADDRESS, '0x00'] }, // judge: refused by the catalogue
      { jsonrpc: '2.0', id: 4, method: 'eth_getBalance', params: [ADDRESS, '0xzz'] }, // judge: -32602
      { jsonrpc: '2.0', id: 5 }, // split: no method
      { jsonrpc: '2.0', id: 6, method: 'eth_chainId', params: [] }, // a node's result
    ];
    const res = await fetch(`${t.url}/v1/${NETWORK}/${k.key}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'settled-1' }, body: JSON.stringify(batch) });
    const answers = (await res.json()) as Array<{ id: number; result?: unknown; error?: { code: number } }>;
    assert.deepEqual(
      answers.map((a) => [a.id, a.error?.code ?? 'result']),
      [
        [1, 'result'],
        [2, -32000],
        [3, -32601],
        [4, -32602],
        [5, -32600],
        [6, 'result'],
      ],
    );

    // Metrics: six calls, six counts, each under its outcome.
    assert.deepEqual(delta(before, await counts()), {
      'eth_getBalance ok ': 1,
      'eth_sendRawTransaction node_error -32000': 1,
      // A method that is not the gateway's counts as `other` (a bounded label set).
      'other refused_method -32601': 1,
      'eth_getBalance invalid -32602': 1,
      'other invalid -32600': 1,
      'eth_chainId ok ': 1,
    });

    // Analytics (C46): the three dispatched calls are requests, one a node error; the catalogue's refusal counts under `method`.
    await t.app.parts.usage.flush();
    const stats = await t.app.inject({ method: 'GET', url: `/api/v1/usage/analytics?apiKeyId=${k.id}`, headers: k.user.auth });
    assert.equal(stats.statusCode, 200, stats.body);
    const day = (stats.json().data as Analytics).series.at(-1)!;
    assert.equal(day.requests, 3);
    assert.equal(day.errors.node, 1);
    assert.equal(day.errors.upstream, 0);
    assert.deepEqual(day.refused, { rate: 0, quota: 0, key: 0, network: 0, method: 1, access: 0 });

    // The log: one debug line for the batch's refusals (how many, and the first given: the split's), nothing per call.
    const lines = t.logs.slice(fromLog).map((l) => JSON.parse(l) as { reqId?: string; msg: string; calls?: number; code?: number });
    const mine = lines.filter((l) => l.reqId === 'settled-1' && l.msg.startsWith('rpc call'));
    assert.deepEqual(
      mine.map((l) => [l.msg, l.calls, l.code]),
      [['rpc calls refused', 3, -32600]],
    );
  });

  test('a message refused whole at admission is one count in the metrics and one line, under the first stage that refused it', async () => {
    const before = await counts();
    const fromLog = t.logs.length;
    const res = await fetch(`${t.url}/v1/${NETWORK}/jk_live_00000000nosuchkeynosuchkeynosuchkeynosuchkey0000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'settled-2' },
      body: JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'eth_chainId' }, { jsonrpc: '2.0', id: 2, method: 'eth_chainId' }]),
    });
    assert.equal(res.status, 401);
    await res.arrayBuffer();
    assert.deepEqual(delta(before, await counts()), { 'other refused_key -32001': 1 });
    const mine = t.logs
      .slice(fromLog)
      .map((l) => JSON.parse(l) as { reqId?: string; msg: string; method?: string })
      .filter((l) => l.reqId === 'settled-2' && l.msg.startsWith('rpc call'));
    assert.deepEqual(
      mine.map((l) => [l.msg, l.method]),
      [['rpc call refused', 'other']],
    );
  });

  test('an upstream failure: the call counted once as upstream_error, one warn line with the cause', async () => {
    const k = await proKey();
    await fake.setMode('status500');
    try {
      const before = await counts();
      const fromLog = t.logs.length;
      const res = await fetch(`${t.url}/v1/${NETWORK}/${k.key}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': 'settled-3' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [ADDRESS, 'latest'] }),
      });
      assert.equal(res.status, 502);
      await res.arrayBuffer();
      assert.deepEqual(delta(before, await counts()), { 'eth_getBalance upstream_error -32000': 1 });
      const mine = t.logs
        .slice(fromLog)
        .map((l) => JSON.parse(l) as { reqId?: string; msg: string; level: number })
        .filter((l) => l.reqId === 'settled-3' && l.msg.startsWith('upstream call failed'));
      assert.equal(mine.length, 1);
      await t.app.parts.usage.flush();
      const stats = await t.app.inject({ method: 'GET', url: `/api/v1/usage/analytics?apiKeyId=${k.id}`, headers: k.user.auth });
      const day = (stats.json().data as Analytics).series.at(-1)!;
      assert.deepEqual([day.requests, day.errors.upstream, day.errors.node], [1, 1, 0]);
    } finally {
      await fake.setMode('ok');
    }
  });
});
