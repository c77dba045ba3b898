// C49: consensus reads through the gateway. Fake nodes: a real node cannot lie on demand. (What
// consensus compares, and its config checks: test/upstreams/consensus.test.ts.)
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';

const NET = 'avalanche-fuji'; // consensus on eth_getBalance
const PLAIN = 'base-sepolia'; // the same nodes, no consensus config

interface Report {
  upstreams: Array<{ name: string; state: string; latencyMs: number | null }>;
}

const answer = (result: string, spaced = false): string =>
  spaced ? `{ "jsonrpc": "2.0", "id": 1,\n  "result" : ${result} }` : `{"jsonrpc":"2.0","id":1,"result":${result}}`;

describe('consensus reads (C49)', () => {
  let t: TestApp;
  /** a: the first asked (the liar when one lies); b: the second; c: slow, so it is asked last. */
  let a: FakeNode;
  let b: FakeNode;
  let c: FakeNode;
  let key: string;

  const post = async (net: string, method: string, params: unknown[] = []): Promise<{ status: number; body: { result?: unknown; error?: { code: number; data?: { reason?: string } } } }> => {
    const res = await fetch(`${t.url}/v1/${net}/${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return { status: res.status, body: (await res.json()) as never };
  };
  const counts = (method: string): number[] => [a, b, c].map((f) => f.callCount(method));
  const total = (method: string): number => counts(method).reduce((x, y) => x + y, 0);
  const setAll = (ra: string, rb: string, rc: string): void => {
    a.setRaw('eth_getBalance', ra);
    b.setRaw('eth_getBalance', rb);
    c.setRaw('eth_getBalance', rc);
  };

  before(async () => {
    // c answers slowly: its latency class puts it behind a and b, so it is the third node asked.
    [a, b, c] = await Promise.all([startFakeNode(), startFakeNode(), startFakeNode({ delayMs: 200 })]);
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-consensus-'));
    const file = path.join(dir, 'config.json');
    // A replacement delay far above these nodes' answers: which nodes are asked stays as the test says.
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, hedgeDelayMs: 2_000, consensus: { methods: ['eth_getBalance'], penaltySeconds: 1 } }] }));
    const urls = `${a.url},${b.url},${c.url}`;
    t = await startTestApp({
      listen: true,
      env: { GATEWAY_CONFIG: file, UPSTREAM_AVALANCHE_FUJI: urls, UPSTREAM_BASE_SEPOLIA: urls },
      overrides: { rpc: { healthIntervalMs: 200, hedge: { enabled: false } }, cache: { enabled: false } },
    });
    key = (await createKey(t.app, { networks: [NET, PLAIN] })).key;
    await post(NET, 'eth_chainId');
    await post(PLAIN, 'eth_chainId');
    await waitFor(
      async () => {
        const r = (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, Report> }>().networks[NET];
        const [ua, ub, uc] = r?.upstreams ?? [];
        return ua?.state === 'up' && ub?.state === 'up' && (uc?.latencyMs ?? 0) >= 100 ? true : undefined;
      },
      { what: 'all three upstreams probed, the third one slow' },
    );
  });
  after(async () => {
    await t?.close();
    await Promise.all([a, b, c].map((f) => f?.close()));
  });

  test('all agree (blanks aside): answered, exactly 2 nodes asked', async () => {
    setAll(answer('"0x1"'), answer('"0x1"', true), answer('"0x1"'));
    const before = total('eth_getBalance');
    const res = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    assert.equal(res.body.result, '0x1');
    assert.equal(total('eth_getBalance'), before + 2);
  });

  test('three different answers: -32000 with data.reason no_consensus, HTTP 502', async () => {
    setAll(answer('"0x1"'), answer('"0x2"'), answer('"0x3"'));
    const before = total('eth_getBalance');
    const res = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    assert.equal(res.status, 502);
    assert.equal(res.body.error?.code, -32000);
    assert.equal(res.body.error?.data?.reason, 'no_consensus');
    assert.equal(total('eth_getBalance'), before + 3);
  });

  test('an answer with a repeated or escaped result member is no vote (C54): the caller gets what the honest nodes agree on', async () => {
    const firstUp = async () =>
      waitFor(
        async () => ((await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, Report> }>().networks[NET]?.upstreams[0]?.state === 'up' ? true : undefined),
        { what: 'the first upstream up again' },
      );
    for (const sly of ['{"jsonrpc":"2.0","id":1,"result":"0x1","result":"0xdead"}', '{"jsonrpc":"2.0","id":1,"r\\u0065sult":"0xdead","result":"0x1"}', '{"jsonrpc":"2.0","id":1,"result":"0x1","Result":"0xdead"}']) {
      // A failed answer puts the node behind the others for a while; the probes bring it back first.
      await firstUp();
      setAll(sly, answer('"0x1"'), answer('"0x1"'));
      const before = counts('eth_getBalance');
      const res = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
      assert.equal(res.status, 200, sly);
      assert.equal(res.body.result, '0x1', sly);
      // The caller's parser keeps the last member: what it received is what was compared.
      const raw = JSON.stringify(res.body);
      assert.doesNotMatch(raw, /dead/, sly);
      assert.deepEqual(counts('eth_getBalance').map((n, i) => n - (before[i] ?? 0)), [1, 1, 1], sly);
    }
    setAll(answer('"0x1"'), answer('"0x1"'), answer('"0x1"'));
    await firstUp();
  });

  test('a method not configured goes to one node', async () => {
    const before = total('eth_getCode');
    const res = await post(NET, 'eth_getCode', ['0x0000000000000000000000000000000000000001', 'latest']);
    assert.ok(res.body.result !== undefined);
    assert.equal(total('eth_getCode'), before + 1);
  });

  test('a network without consensus config asks one node', async () => {
    setAll(answer('"0x1"'), answer('"0x2"'), answer('"0x3"'));
    const before = total('eth_getBalance');
    const res = await post(PLAIN, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    assert.ok(res.body.result !== undefined);
    assert.equal(total('eth_getBalance'), before + 1);
  });

  test('one node lies: the third decides, the liar is left out for the penalty, logged and counted, then asked again', async (ctx) => {
    setAll(answer('"0xbad"'), answer('"0x1"', true), answer('"0x1"'));
    const [a0, b0, c0] = counts('eth_getBalance');
    const res = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    assert.equal(res.body.result, '0x1');
    assert.deepEqual(counts('eth_getBalance'), [(a0 ?? 0) + 1, (b0 ?? 0) + 1, (c0 ?? 0) + 1]);

    // Left out: the next reads go to b and c only, and agree.
    for (let i = 0; i < 2; i++) {
      const next = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
      assert.equal(next.body.result, '0x1');
    }
    assert.deepEqual(counts('eth_getBalance'), [(a0 ?? 0) + 1, (b0 ?? 0) + 3, (c0 ?? 0) + 3]);

    const line = t.logs.find((l) => l.includes('disagreed with the consensus majority'));
    assert.ok(line, 'a warn line names the liar');
    const logged = JSON.parse(line) as { level: number; network: string; name: string; method: string };
    assert.equal(logged.level, 40);
    assert.deepEqual([logged.network, logged.name, logged.method], [NET, `${NET}-0`, 'eth_getBalance']);
    assert.ok(!line.includes(String(a.port)), 'never the URL');
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, new RegExp(`junction_upstream_misbehaving_total\\{network="${NET}",upstream="${NET}-0",method="eth_getBalance"\\} 1\\b`));
    assert.doesNotMatch(metrics, new RegExp(`junction_upstream_misbehaving_total\\{network="${NET}",upstream="${NET}-1"`));
    // C49, C55: shown in readiness while it is left out.
    const ready = (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, { upstreams: Array<{ misbehaving?: unknown }> }> }>();
    assert.deepEqual(ready.networks[NET]?.upstreams[0]?.misbehaving, { disagreements: 1, outOfRotation: true });
    assert.equal(ready.networks[NET]?.upstreams[1]?.misbehaving, undefined);

    // After the penalty (1 s) it is asked again: the gateway's clock (Date) is moved past it.
    a.setRaw('eth_getBalance', answer('"0x1"'));
    ctx.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    ctx.mock.timers.tick(1_100);
    const again = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
    ctx.mock.timers.reset();
    assert.equal(again.body.result, '0x1');
    assert.equal(counts('eth_getBalance')[0], (a0 ?? 0) + 2);
  });

  test('two nodes failing and one answering, no candidate left: never the lone answer; -32000 too_few_nodes, HTTP 502, one warn line, counted in junction_consensus_reads_total', async () => {
    // a and b answer a body that is not JSON-RPC (a failure, no vote); c alone answers.
    setAll('<html>502</html>', '<html>502</html>', answer('"0x1"'));
    for (let i = 0; i < 2; i++) {
      const res = await post(NET, 'eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest']);
      assert.equal(res.status, 502);
      assert.equal(res.body.error?.code, -32000);
      assert.deepEqual(res.body.error?.data, { reason: 'too_few_nodes', network: NET, method: 'eth_getBalance', needed: 2, answered: 1 });
      assert.equal(res.body.result, undefined);
    }
    const refused = t.logs.filter((l) => l.includes('consensus reads refused'));
    assert.equal(refused.length, 1, 'one warn line a minute per network');
    const logged = JSON.parse(refused[0] as string) as { level: number; network: string; method: string; needed: number; answered: number };
    assert.deepEqual([logged.level, logged.network, logged.method, logged.needed, logged.answered], [40, NET, 'eth_getBalance', 2, 1]);
    assert.ok(![a, b, c].some((f) => (refused[0] as string).includes(String(f.port))), 'never the URL');
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, new RegExp(`junction_consensus_reads_total\\{network="${NET}",method="eth_getBalance",outcome="too_few_nodes"\\} 2\\b`));
    assert.match(metrics, new RegExp(`junction_consensus_reads_total\\{network="${NET}",method="eth_getBalance",outcome="no_consensus"\\} 1\\b`));
    assert.match(metrics, new RegExp(`junction_consensus_reads_total\\{network="${NET}",method="eth_getBalance",outcome="majority"\\} 1\\b`));
    assert.match(metrics, new RegExp(`junction_consensus_reads_total\\{network="${NET}",method="eth_getBalance",outcome="agreed"\\} \\d+`));
    setAll(answer('"0x1"'), answer('"0x1"'), answer('"0x1"'));
  });
});
