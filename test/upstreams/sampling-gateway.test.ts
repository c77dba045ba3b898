// C55: answer sampling through the gateway: a lying node is shown in /health/ready, counted in
// /metrics and named in a warn line, and the callers are answered by the others. The sampling
// itself, on pools of scripted nodes: test/upstreams/sampling.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { call } from './helpers.ts';

const ADDRESS = '0x0000000000000000000000000000000000000001';
const LIE = '"0xbad"';

describe('answer sampling through the gateway (C55)', () => {
  const NET = 'avalanche-fuji';
  let t: TestApp;
  let nodes: FakeNode[];
  let key: string;

  before(async () => {
    nodes = await Promise.all([startFakeNode(), startFakeNode(), startFakeNode()]);
    nodes[0]!.setScript('eth_getBalance', () => LIE);
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-sampling-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, sampling: { rate: 1 } }] }));
    t = await startTestApp({
      listen: true,
      env: { GATEWAY_CONFIG: file, UPSTREAM_AVALANCHE_FUJI: nodes.map((n) => n.url).join(',') },
      overrides: { cache: { enabled: false } },
    });
    key = (await createKey(t.app, { networks: [NET] })).key;
  });
  after(async () => {
    await t?.close();
    await Promise.all((nodes ?? []).map((n) => n.close()));
  });

  test('a lying node is shown in /health/ready and counted in /metrics by method; the callers are answered by the others', async () => {
    const post = async (id: number) =>
      (await (await fetch(`${t.url}/v1/${NET}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: call('eth_getBalance', [ADDRESS, 'latest'], id) })).json()) as { result: unknown };
    const ready = async () => (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, { upstreams: Array<{ misbehaving?: { disagreements: number; outOfRotation: boolean } }> }> }>().networks[NET];
    // The first answers may be the liar's, before a check has marked it; none once it is marked.
    const results: unknown[] = [];
    await waitFor(async () => ((await ready())?.upstreams[0]?.misbehaving?.outOfRotation ? true : (results.push((await post(results.length)).result), undefined)), {
      what: 'the liar out of rotation',
      timeoutMs: 15_000,
      intervalMs: 20,
    });
    for (let i = 0; i < 5; i++) results.push((await post(1_000 + i)).result);
    assert.ok(results.slice(-5).every((r) => r !== '0xbad'), JSON.stringify(results));
    assert.ok(results.filter((r) => r === '0xbad').length <= 3, JSON.stringify(results));
    const report = await ready();
    assert.equal(report?.upstreams[0]?.misbehaving?.outOfRotation, true);
    assert.equal(report?.upstreams[1]?.misbehaving, undefined);
    const metrics = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, new RegExp(`junction_upstream_misbehaving_total\\{network="${NET}",upstream="${NET}-0",method="eth_getBalance"\\} [3-9]`));
    assert.match(metrics, new RegExp(`junction_upstream_marked\\{network="${NET}",upstream="${NET}-0"\\} 2`));
    assert.match(metrics, new RegExp(`junction_upstream_samples_total\\{network="${NET}",outcome="disagreed"\\} [3-9]`));
    const line = t.logs.find((l) => l.includes('out of rotation until a sampled check'));
    assert.ok(line, 'a warn line names it');
    assert.ok(!line.includes(String(nodes[0]!.port)), 'never the URL');
  });
});
