// C55: answer sampling on a moving chain: balances at latest that change with every block mark no
// node, since a check compares the answers at one block. Three scripted nodes in front of one
// anvil chain, a pool of their own. Scripted lying nodes: test/upstreams/sampling.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SamplingOptions } from '../../src/upstreams/http/types.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { startFakeNode } from '../support/fake-node.ts';
import { call, closeAfter, pool } from './helpers.ts';

const EVERY: SamplingOptions = { rate: 1 };

describe('answer sampling on a moving chain (C55)', () => {
  let anvil: BareAnvil;
  before(async () => {
    anvil = await startAnvil();
  });
  after(async () => {
    await anvil?.stop();
  });

  test('balances at latest changing with every block (anvil, one transfer after the other, each mined at once): no node is marked, the checks agree', async () => {
    const target = '0x00000000000000000000000000000000000000aa';
    // Three nodes in front of one chain, answering after different delays: a check that compared
    // the caller's answer at latest with another node's a moment later would see new blocks.
    const nodes = await Promise.all([0, 40, 80].map((delayMs) => startFakeNode({ forwardTo: anvil.url, delayMs })));
    for (const n of nodes) closeAfter(n);
    const p = pool(nodes, { sampling: EVERY, healthIntervalMs: 200 });
    p.start();
    await p.firstRound();
    let sending = true;
    const rpc = async (method: string, params: unknown[]) =>
      (await (await fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })).json()) as { result: unknown };
    const [from] = (await rpc('eth_accounts', [])).result as string[];
    const sender = (async () => {
      while (sending) {
        await rpc('eth_sendTransaction', [{ from, to: target, value: '0x1' }]);
      }
    })();
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 40; i++) {
        const res = await p.forward(call('eth_getBalance', [target, 'latest'], i), ['eth_getBalance']);
        seen.add(JSON.parse(res.body.toString()).result as string);
        await p.samplesSettled();
      }
    } finally {
      sending = false;
      await sender;
    }
    assert.ok(seen.size > 5, `the balance moved while the test ran (${seen.size} values)`);
    const stats = p.samplingStats();
    assert.equal(stats.disagreed, 0);
    assert.ok(stats.agreed >= 30, `checks agreed: ${JSON.stringify(stats)}`);
    assert.ok(p.health().every((h) => h.misbehaving === undefined));
  });
});
