// C26, C44: through the gateway, a lying node neither sets the head the cache
// judges safe blocks by nor takes the reads. Fake nodes: a real one cannot lie about its head.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { type FakeWsNode, startFakeWsNode } from '../support/ws.ts';

const NET = 'avalanche-fuji';
const LIAR = 1_000_000_000;
const hex = (n: number) => `0x${n.toString(16)}`;

interface Report {
  head: number | null;
  upstreams: Array<{ name: string; state: string; head: number | null; lag: number | null; outlier?: true }>;
}

describe('a lying node behind the gateway (C26, C44)', () => {
  let t: TestApp;
  let liar: FakeNode;
  let low: FakeNode;
  let high: FakeNode;
  /** The liar's WebSocket side: its newHeads lie too. */
  let liarWs: FakeWsNode;
  let rpcUrl: string;

  const post = async (method: string, params: unknown[]): Promise<{ cache: string | null; body: { result?: unknown } }> => {
    const res = await fetch(rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    return { cache: res.headers.get('x-cache'), body: (await res.json()) as { result?: unknown } };
  };
  const ready = async (): Promise<Report | undefined> =>
    (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, Report> }>().networks[NET];
  const asked = (method: string): number => [liar, low, high].reduce((n, f) => n + f.callCount(method), 0);

  before(async () => {
    [liar, low, high] = await Promise.all([startFakeNode({ head: LIAR }), startFakeNode({ head: 5_000 }), startFakeNode({ head: 5_011 })]);
    liarWs = await startFakeWsNode();
    t = await startTestApp({
      listen: true,
      // The liar first: config order would give it the reads were it in line.
      env: { UPSTREAM_AVALANCHE_FUJI: `${liar.url},${low.url},${high.url}`, UPSTREAM_WS_AVALANCHE_FUJI: `${liarWs.url},,` },
      overrides: { rpc: { healthIntervalMs: 200, maxLagBlocks: 5, hedge: { enabled: false } }, cache: { enabled: true, safeDepth: 64 } },
    });
    rpcUrl = `${t.url}/v1/${NET}/${(await createKey(t.app, { networks: [NET] })).key}`;
    await post('eth_chainId', []);
    await waitFor(async () => ((await ready())?.upstreams.every((u) => u.state === 'up') ? true : undefined), { what: 'all three upstreams probed' });
  });
  after(async () => {
    await t?.close();
    await Promise.all([liar, low, high, liarWs].map((f) => f?.close()));
  });

  test('the head is the honest one, the liar is the outlier and no honest node lags', async () => {
    const r = await ready();
    assert.equal(r?.head, 5_011);
    assert.deepEqual(
      r?.upstreams.map((u) => [u.head, u.lag, u.outlier ?? false]),
      [
        [LIAR, 0, true],
        [5_000, 11, false],
        [5_011, 0, false],
      ],
    );
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, new RegExp(`junction_upstream_outlier\\{network="${NET}",upstream="${NET}-0"\\} 1`));
    assert.match(metrics, new RegExp(`junction_upstream_outlier\\{network="${NET}",upstream="${NET}-2"\\} 0`));
  });

  test('block 5000 is not safe when the head is 5011: asked twice, the nodes answer twice', async () => {
    const before = asked('eth_getBlockByNumber');
    const first = await post('eth_getBlockByNumber', [hex(5_000), false]);
    const second = await post('eth_getBlockByNumber', [hex(5_000), false]);
    assert.deepEqual([first.cache, second.cache], ['MISS', 'MISS']);
    assert.equal(asked('eth_getBlockByNumber'), before + 2);
    // A block safeDepth (64) below the agreed head is kept, as C44 says.
    await post('eth_getBlockByNumber', [hex(5_011 - 64), false]);
    assert.equal((await post('eth_getBlockByNumber', [hex(5_011 - 64), false])).cache, 'HIT');
  });

  test('reads go to the honest nodes, never to the liar while they answer', async () => {
    const before = liar.callCount('eth_getBalance');
    for (let i = 0; i < 6; i++) await post('eth_getBalance', ['0x00000000000000000000000000000000000000aa', 'latest']);
    assert.equal(liar.callCount('eth_getBalance'), before);
    assert.equal(low.callCount('eth_getBalance') + high.callCount('eth_getBalance'), 6);
  });

  test('the liar is named once at warn, with the head it claims', () => {
    const warned = t.logs.filter((l) => {
      const o = JSON.parse(l) as { level?: number; msg?: string; upstream?: string };
      return o.level === 40 && o.upstream === `${NET}-0` && /far above/.test(o.msg ?? '');
    });
    assert.equal(warned.length, 1);
    assert.match(warned[0] ?? '', /1000000000/);
  });

  test('the liar’s newHeads reach no background feature, and the honest heads after them still do', async () => {
    const seen: number[] = [];
    const off = t.app.parts.upstreams.onHead(NET, (h) => seen.push(h.number));
    try {
      await waitFor(() => liarWs.live('newHeads') === 1, { what: 'the newHeads subscription on the liar' });
      liarWs.emit('newHeads', { number: hex(LIAR + 1), hash: `0x${'ab'.repeat(32)}` });
      // Before this rule the feed took the liar's number, and dropped every lower one after it.
      high.setHead(5_012);
      await waitFor(() => seen.includes(5_012), { what: 'the next honest head on the feed' });
      assert.ok(seen.every((n) => n < LIAR), `seen: ${seen.join(', ')}`);
    } finally {
      off();
    }
  });
});
