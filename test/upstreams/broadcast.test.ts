// C26: eth_sendRawTransaction goes to every healthy upstream at once, each exactly
// once; the first hash wins, "already known" and "nonce too low" for this very transaction are
// success, and nothing is sent twice (C26, maybeSent).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { keccak256, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { NoUpstreamError } from '../../src/upstreams/http/pool.ts';
import { type BareAnvil, startAnvil } from '../support/anvil.ts';
import { waitFor } from '../support/wait.ts';
import { call, fakes, pool, rpcError } from './helpers.ts';

const RAW = '0x02f86b0180843b9aca00843b9aca0082520894000000000000000000000000000000000000000180c001a0';
const HASH = keccak256(RAW);
const send = (id: number | string = 1) => call('eth_sendRawTransaction', [RAW], id);
const M = ['eth_sendRawTransaction'];
/** What the pipeline hands the pool with a judged transaction (C53): the signed bytes and the caller's id text. */
const judged = (id: number | string = 1, raw: string = RAW) => ({ transaction: { raw, id: JSON.stringify(id) } });

describe('transactions broadcast (C26)', () => {
  test('every healthy upstream gets the transaction once, and the first hash is the answer', async () => {
    const list = await fakes(3);
    list[0]?.setDelay(300); // the first listed is slower: the answer is not its to give
    const p = pool(list, { broadcastTransactions: true });
    await p.checkHealth();
    list[0]?.setDelay(300);
    const res = await p.forward(send(7), M, judged(7));
    assert.notEqual(res.upstream, 0);
    assert.equal(JSON.parse(res.body.toString()).result.method, 'eth_sendRawTransaction');
    await waitFor(() => list.every((f) => f.callCount('eth_sendRawTransaction') === 1), { what: 'every node to receive it once' });
  });

  test('"already known" is success: the transaction hash under the caller id, without waiting for a stalled node', async () => {
    const [known, stalled] = await fakes(2);
    const p = pool([stalled!, known!], { broadcastTransactions: true, requestTimeoutMs: 10_000, totalTimeoutMs: 15_000 });
    await p.checkHealth();
    await stalled?.setMode('stall');
    known?.setRaw('eth_sendRawTransaction', rpcError(-32000, 'already known'));
    const t0 = Date.now();
    const res = await p.forward(send('12345678901234567890'), M, judged('12345678901234567890'));
    assert.ok(Date.now() - t0 < 5_000, 'not held for the stalled node');
    assert.equal(res.upstream, 1);
    assert.equal(res.body.toString(), `{"jsonrpc":"2.0","id":"12345678901234567890","result":"${HASH}"}`);
    assert.equal(stalled?.callCount('eth_sendRawTransaction'), 1);
  });

  for (const message of ['known transaction: 0xabc', 'ALREADY_EXISTS: already known']) {
    test(`"${message}" from every node is success too`, async () => {
      const [a, b] = await fakes(2);
      for (const f of [a, b]) f?.setRaw('eth_sendRawTransaction', rpcError(-32000, message));
      const p = pool([a!, b!], { broadcastTransactions: true });
      await p.checkHealth();
      assert.equal(JSON.parse((await p.forward(send(), M, judged())).body.toString()).result, HASH);
    });
  }

  test('"nonce too low" is success when the chain has this very transaction', async () => {
    const [a, b] = await fakes(2);
    for (const f of [a, b]) f?.setRaw('eth_sendRawTransaction', rpcError(-32000, 'nonce too low: next nonce 5, tx nonce 4'));
    // The fake answers eth_getTransactionByHash with an object: the transaction is known.
    const p = pool([a!, b!], { broadcastTransactions: true });
    await p.checkHealth();
    const res = await p.forward(send(3), M, judged(3));
    assert.equal(res.body.toString(), `{"jsonrpc":"2.0","id":3,"result":"${HASH}"}`);
    assert.equal((a?.callCount('eth_getTransactionByHash') ?? 0) + (b?.callCount('eth_getTransactionByHash') ?? 0), 1);
  });

  test('"nonce too low" for another transaction holding the nonce is the node refusal', async () => {
    const [a, b] = await fakes(2);
    const low = rpcError(-32000, 'nonce too low');
    for (const f of [a, b]) {
      f?.setRaw('eth_sendRawTransaction', low);
      f?.setRaw('eth_getTransactionByHash', '{"jsonrpc":"2.0","id":1,"result":null}');
    }
    const p = pool([a!, b!], { broadcastTransactions: true });
    await p.checkHealth();
    assert.equal((await p.forward(send(), M, judged())).body.toString(), low);
  });

  test('a refusal by every node (insufficient funds) is passed on, each node asked once', async () => {
    const [a, b] = await fakes(2);
    const poor = rpcError(-32000, 'insufficient funds for gas * price + value');
    for (const f of [a, b]) f?.setRaw('eth_sendRawTransaction', poor);
    const p = pool([a!, b!], { broadcastTransactions: true });
    await p.checkHealth();
    assert.equal((await p.forward(send(), M, judged())).body.toString(), poor);
    assert.deepEqual([a, b].map((f) => f?.callCount('eth_sendRawTransaction')), [1, 1]);
  });

  test('all nodes stall: -32000 with maybeSent, and no node gets it twice', async () => {
    const [a, b] = await fakes(2);
    const p = pool([a!, b!], { broadcastTransactions: true, requestTimeoutMs: 500, totalTimeoutMs: 3_000 });
    await p.checkHealth();
    await Promise.all([a?.setMode('stall'), b?.setMode('stall')]);
    const err = await p.forward(send(), M, judged()).catch((e: unknown) => e);
    assert.ok(err instanceof NoUpstreamError);
    assert.equal(err.maybeSent, true);
    assert.deepEqual([a, b].map((f) => f?.callCount('eth_sendRawTransaction')), [1, 1]);
  });

  test('a node known down is left out of the broadcast', async () => {
    const [a, b, c] = await fakes(3);
    await c?.setMode('refuse');
    const p = pool([a!, b!, c!], { broadcastTransactions: true });
    await p.checkHealth();
    await p.forward(send(), M, judged());
    await waitFor(() => a?.callCount('eth_sendRawTransaction') === 1 && b?.callCount('eth_sendRawTransaction') === 1);
    assert.equal(p.health()[2]?.state, 'down');
    assert.equal(c?.callCount('eth_sendRawTransaction'), 0);
  });

  test('request() (faucet, solver) gets the hash from a broadcast as well', async () => {
    const [a, b] = await fakes(2);
    a?.setRaw('eth_sendRawTransaction', rpcError(-32000, 'already known'));
    b?.setRaw('eth_sendRawTransaction', rpcError(-32000, 'already known'));
    const p = pool([a!, b!], { broadcastTransactions: true });
    await p.checkHealth();
    assert.equal(await p.request('eth_sendRawTransaction', [RAW]), HASH);
  });
});

describe('transactions broadcast on a devnet chain (two upstreams of one anvil)', () => {
  let anvil: BareAnvil | undefined;
  let anvilUrl = '';

  before(async () => {
    anvil = await startAnvil({ timeoutMs: 20_000 });
    anvilUrl = anvil.url;
  });

  after(async () => {
    await anvil?.stop();
  });

  async function rpc<T>(method: string, params: unknown[]): Promise<T> {
    const res = await fetch(anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: call(method, params) });
    return ((await res.json()) as { result: T }).result;
  }

  test('a signed transfer reaches both nodes once, is answered with its hash, and is mined once', async () => {
    // Two counting upstreams in front of one chain: the second to arrive finds it known or mined.
    const [a, b] = await fakes(2, { forwardTo: anvilUrl });
    const p = pool([a!, b!], { broadcastTransactions: true });
    await p.checkHealth();
    const account = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
    const nonce = Number.parseInt(await rpc<string>('eth_getTransactionCount', [account.address, 'pending']), 16);
    const gasPrice = BigInt(await rpc<string>('eth_gasPrice', []));
    const raw = await account.signTransaction({
      chainId: 31337,
      nonce,
      to: '0xa0Ee7A142d267C1f36714E4a8F75612F20a79720',
      value: parseEther('0.01'),
      gas: 21_000n,
      maxFeePerGas: gasPrice * 2n,
      maxPriorityFeePerGas: 1n,
    });
    const res = await p.forward(call('eth_sendRawTransaction', [raw], 42), M, judged(42, raw));
    const answer = JSON.parse(res.body.toString()) as { id: number; result: string };
    assert.equal(answer.id, 42);
    assert.equal(answer.result, keccak256(raw));
    await waitFor(() => a?.callCount('eth_sendRawTransaction') === 1 && b?.callCount('eth_sendRawTransaction') === 1, { what: 'both nodes to receive it' });
    const receipt = await waitFor(() => rpc<{ status: string } | null>('eth_getTransactionReceipt', [keccak256(raw)]), { what: 'the receipt' });
    assert.equal(receipt.status, '0x1');
    assert.equal(Number.parseInt(await rpc<string>('eth_getTransactionCount', [account.address, 'latest']), 16), nonce + 1);
    // Sent again (a client retry): the nodes say known or nonce too low, and the answer is still the hash.
    const again = JSON.parse((await p.forward(call('eth_sendRawTransaction', [raw], 43), M, judged(43, raw))).body.toString()) as { result?: string; error?: unknown };
    assert.equal(again.result, keccak256(raw), JSON.stringify(again));
  });
});
