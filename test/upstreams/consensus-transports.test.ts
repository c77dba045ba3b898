// C49: a consensus read is judged the same way whatever carries it: a single HTTP call, a call of
// a batch, a WebSocket message (alone or in a batch). Fake nodes: a real node cannot lie on demand.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { connect, wsAddress } from '../support/ws.ts';

const NET = 'avalanche-fuji'; // consensus on eth_getBalance
const ADDRESS = '0x0000000000000000000000000000000000000001';
/** A node's answer with id 1: the consensus read of each message below has id 1. */
const answer = (result: string): string => `{"jsonrpc":"2.0","id":1,"result":${result}}`;

type Answer = { id?: unknown; result?: unknown; error?: { code: number; data?: { reason?: string } } };

describe('consensus reads in batches and over WebSocket (C49)', () => {
  let t: TestApp;
  let nodes: FakeNode[];
  let key: string;

  const balanceCalls = (): number => nodes.reduce((n, f) => n + f.callCount('eth_getBalance'), 0);
  const setAnswers = (...results: string[]): void => nodes.forEach((f, i) => f.setRaw('eth_getBalance', answer(results[i] as string)));
  const batch = [
    { jsonrpc: '2.0', id: 1, method: 'eth_getBalance', params: [ADDRESS, 'latest'] },
    { jsonrpc: '2.0', id: 2, method: 'eth_chainId', params: [] },
  ];
  const postBatch = async (): Promise<Answer[]> => {
    const res = await fetch(`${t.url}/v1/${NET}/${key}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(batch) });
    return (await res.json()) as Answer[];
  };

  before(async () => {
    nodes = await Promise.all([startFakeNode(), startFakeNode(), startFakeNode()]);
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-consensus-'));
    const file = path.join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ networks: [{ slug: NET, consensus: { methods: ['eth_getBalance'], penaltySeconds: 1 } }] }));
    t = await startTestApp({
      listen: true,
      env: { GATEWAY_CONFIG: file, UPSTREAM_AVALANCHE_FUJI: nodes.map((n) => n.url).join(',') },
      overrides: { rpc: { healthIntervalMs: 200, hedge: { enabled: false } }, cache: { enabled: false } },
    });
    key = (await createKey(t.app, { networks: [NET] })).key;
    // A network's pool starts on its first call.
    await postBatch();
    await waitFor(
      async () => {
        const r = (await t.app.inject({ method: 'GET', url: '/health/ready' })).json<{ networks: Record<string, { upstreams: Array<{ state: string }> }> }>().networks[NET];
        return r?.upstreams.every((u) => u.state === 'up') ? true : undefined;
      },
      { what: 'the three upstreams probed' },
    );
  });
  after(async () => {
    await t?.close();
    await Promise.all(nodes.map((f) => f.close()));
  });

  test('in an HTTP batch: the read goes to several nodes and the majority is answered in place', async () => {
    // However the nodes are ordered, two of three say 0x1.
    setAnswers('"0x1"', '"0x1"', '"0x1"');
    const before = balanceCalls();
    const answers = await postBatch();
    assert.deepEqual(
      answers.map((a) => [a.id, 'result' in a]),
      [
        [1, true],
        [2, true],
      ],
    );
    assert.equal(answers[0]?.result, '0x1');
    // Two nodes agreeing is enough; a forwarded batch would have asked one.
    assert.equal(balanceCalls() - before, 2);
  });

  test('in an HTTP batch: no majority is -32000 no_consensus for that call only', async () => {
    setAnswers('"0x1"', '"0x2"', '"0x3"');
    const answers = await postBatch();
    assert.equal(answers[0]?.error?.code, -32000);
    assert.equal(answers[0]?.error?.data?.reason, 'no_consensus');
    assert.deepEqual([answers[1]?.id, answers[1] && 'result' in answers[1]], [2, true], 'the batch call that is no consensus read is answered');
  });

  test('over WebSocket, alone and in a batch: judged as over HTTP', async () => {
    const client = await connect(wsAddress(t, `/ws/${NET}?apiKey=${key}`));
    try {
      setAnswers('"0x1"', '"0x2"', '"0x3"');
      const alone = await client.send(JSON.stringify(batch[0]));
      assert.equal(alone.error?.code, -32000);
      assert.equal((alone.error as { data?: { reason?: string } } | undefined)?.data?.reason, 'no_consensus');

      setAnswers('"0x1"', '"0x1"', '"0x1"');
      const before = balanceCalls();
      const inBatch = (await client.send(JSON.stringify(batch))) as unknown as Answer[];
      assert.equal(inBatch[0]?.result, '0x1');
      assert.equal(balanceCalls() - before, 2);
    } finally {
      await client.close();
    }
  });
});
