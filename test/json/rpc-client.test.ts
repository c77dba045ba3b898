import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { NodeCallError, NodeHttpError, ReceiptTimeoutError, TransactionRevertedError } from '../../src/errors/node.ts';
import { rpc, sendRawTransaction, waitForReceipt } from '../../src/json/rpc-client.ts';

/** A node whose answers the test scripts per call: a status and a body, counted. */
let answers: { status: number; body: unknown }[] = [];
let calls = 0;
let url = '';
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    calls += 1;
    const next = answers.length > 1 ? answers.shift() : answers[0];
    res.writeHead(next?.status ?? 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(next?.body ?? null));
  });
});
const result = (r: unknown) => ({ status: 200, body: { jsonrpc: '2.0', id: 1, result: r } });
const error = (message: string) => ({ status: 200, body: { jsonrpc: '2.0', id: 1, error: { code: -32000, message } } });

before(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => server.close());

describe('the plain JSON-RPC client (devnet and settler deployment)', () => {
  test('a relay 5xx is tried again up to the attempts given, then thrown as NodeHttpError', async () => {
    answers = [{ status: 502, body: 'bad gateway' }, result('0x1')];
    calls = 0;
    assert.equal(await rpc(url, 'eth_chainId', [], { attempts: 3 }), '0x1');
    assert.equal(calls, 2);
    answers = [{ status: 503, body: 'down' }];
    calls = 0;
    await assert.rejects(rpc(url, 'eth_chainId', [], { attempts: 2 }), NodeHttpError);
    assert.equal(calls, 2);
  });

  test("a node's JSON-RPC error is its answer: thrown as NodeCallError at once, never tried again", async () => {
    answers = [error('execution reverted')];
    calls = 0;
    await assert.rejects(rpc(url, 'eth_call', [], { attempts: 3 }), (err: unknown) => {
      assert.ok(err instanceof NodeCallError);
      assert.equal(err.message, 'eth_call: execution reverted');
      assert.equal(err.rpcCode, -32000);
      assert.equal(NodeCallError.code, 'NODE_CALL_ERROR');
      return true;
    });
    assert.equal(calls, 1);
  });

  test('a signed transaction the node already knows is no error; another refusal is', async () => {
    answers = [error('already known')];
    await sendRawTransaction(url, '0x00');
    answers = [error('insufficient funds')];
    await assert.rejects(sendRawTransaction(url, '0x00'), NodeCallError);
  });

  test('a receipt is polled until it comes; a reverted one and none in time throw their own errors', async () => {
    const receipt = { status: '0x1', contractAddress: null, blockNumber: '0x2' };
    answers = [result(null), result(null), result(receipt)];
    calls = 0;
    assert.deepEqual(await waitForReceipt(url, '0xab', { pollMs: 1 }), receipt);
    assert.equal(calls, 3);
    answers = [result({ ...receipt, status: '0x0' })];
    await assert.rejects(waitForReceipt(url, '0xab'), TransactionRevertedError);
    answers = [result(null)];
    await assert.rejects(waitForReceipt(url, '0xab', { timeoutMs: 20, pollMs: 5 }), ReceiptTimeoutError);
  });
});
