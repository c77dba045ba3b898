// C40: one network's read of the unified balance, one batch answered by one node, all at one
// block. A node scripted here does what a real one cannot on demand: mine a block in the middle
// of a batch, or refuse batches.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { encodeAbiParameters, getAddress } from 'viem';
import { parseBalanceAddress, sumUnits } from '../../src/balance/service.ts';
import { readNetwork } from '../../src/balance/read.ts';
import { BalanceReadError } from '../../src/errors/node.ts';
import type { TokenConfig } from '../../src/config/schema.ts';
import { HttpError } from '../../src/errors/http.ts';
import { UpstreamPool } from '../../src/upstreams/http/pool.ts';

interface Item {
  id: number;
  method: string;
  params: unknown[];
}

/** A node answering each JSON-RPC batch with `answer(items, n)` (n: the batch's number, from 0); it keeps every batch. */
async function scriptedNode(answer: (items: Item[], n: number) => unknown) {
  const batches: Item[][] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as Item | Item[];
      res.writeHead(200, { 'content-type': 'application/json' });
      if (!Array.isArray(body)) {
        // The pool's health probe.
        res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: '0x1' }));
        return;
      }
      batches.push(body);
      res.end(JSON.stringify(answer(body, batches.length - 1)));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, batches, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const word = (n: bigint) => encodeAbiParameters([{ type: 'uint256' }], [n]);
const hex = (n: bigint | number) => `0x${n.toString(16)}`;

const OWNER = getAddress('0x1111111111111111111111111111111111111111');
const TOKENS: TokenConfig[] = [
  { symbol: 'AAA', address: '0x2222222222222222222222222222222222222222', decimals: 6 },
  { symbol: 'BBB', address: '0x3333333333333333333333333333333333333333', decimals: 18 },
];

describe('reading one network in one batch at one block (C40)', () => {
  const pools: UpstreamPool[] = [];
  const closers: Array<() => Promise<void>> = [];
  const poolFor = (url: string) => {
    const pool = new UpstreamPool({ network: 'test', upstreams: [{ http: url }] });
    pools.push(pool);
    return pool;
  };
  after(async () => {
    await Promise.all(pools.map((p) => p.close()));
    await Promise.all(closers.map((c) => c()));
  });

  test('one batch: the native balance and each balanceOf between two equal block numbers', async () => {
    const node = await scriptedNode((items) =>
      items.map((it) => {
        if (it.method === 'eth_blockNumber') return { jsonrpc: '2.0', id: it.id, result: '0x10' };
        if (it.method === 'eth_getBalance') return { jsonrpc: '2.0', id: it.id, result: hex(10n ** 30n + 7n) };
        const to = (it.params[0] as { to: string }).to;
        // The second token has no contract at its address: eth_call answers 0x.
        return { jsonrpc: '2.0', id: it.id, result: to === TOKENS[0]?.address ? word(123_456_789n) : '0x' };
      }),
    );
    closers.push(node.close);
    const read = await readNetwork(poolFor(node.url), OWNER, TOKENS);
    assert.equal(node.batches.length, 1, 'one batch');
    assert.deepEqual(
      node.batches[0]?.map((i) => i.method),
      ['eth_blockNumber', 'eth_getBalance', 'eth_call', 'eth_call', 'eth_blockNumber'],
    );
    assert.equal(read.blockNumber, 16);
    assert.equal(read.native, 10n ** 30n + 7n, 'exact beyond 2^53');
    assert.deepEqual(read.tokens[0], { token: TOKENS[0], raw: 123_456_789n });
    assert.deepEqual(read.tokens[1], { token: TOKENS[1], error: 'no contract at the address' });
  });

  test('a block mined during the batch: the reads are asked again, pinned to the later block', async () => {
    const node = await scriptedNode((items, n) =>
      items.map((it) => {
        if (it.method === 'eth_blockNumber') return { jsonrpc: '2.0', id: it.id, result: it.id === 0 ? '0x10' : '0x11' };
        // First batch: 1 wei; the pinned one: the balance at block 0x11.
        if (it.method === 'eth_getBalance') return { jsonrpc: '2.0', id: it.id, result: n === 0 ? '0x1' : '0x2a' };
        return { jsonrpc: '2.0', id: it.id, result: word(n === 0 ? 1n : 5n) };
      }),
    );
    closers.push(node.close);
    const read = await readNetwork(poolFor(node.url), OWNER, TOKENS.slice(0, 1));
    assert.equal(node.batches.length, 2);
    const pinned = node.batches[1] ?? [];
    assert.deepEqual(
      pinned.map((i) => [i.method, i.params.at(-1)]),
      [
        ['eth_getBalance', '0x11'],
        ['eth_call', '0x11'],
      ],
    );
    assert.equal(read.blockNumber, 17);
    assert.equal(read.native, 42n);
    assert.deepEqual(read.tokens[0], { token: TOKENS[0], raw: 5n });
  });

  test('a node that refuses batches, or fails the balance, gives a BalanceReadError naming why', async () => {
    const refusing = await scriptedNode(() => ({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'batch requests are not supported' } }));
    closers.push(refusing.close);
    await assert.rejects(readNetwork(poolFor(refusing.url), OWNER, []), (err: unknown) => {
      assert.ok(err instanceof BalanceReadError);
      assert.match(err.message, /batch requests are not supported/);
      return true;
    });
    const failing = await scriptedNode((items) =>
      items.map((it) =>
        it.method === 'eth_getBalance'
          ? { jsonrpc: '2.0', id: it.id, error: { code: -32000, message: 'header not found' } }
          : { jsonrpc: '2.0', id: it.id, result: '0x5' },
      ),
    );
    closers.push(failing.close);
    await assert.rejects(readNetwork(poolFor(failing.url), OWNER, []), /eth_getBalance: header not found/);
  });
});

describe('the address and the amounts of the unified balance (C40)', () => {
  test('0x and xdc addresses in one case or with a valid EIP-55 checksum; the zero address too', () => {
    const checksummed = getAddress('0x52908400098527886e0f7030069857d2e4169ee7');
    assert.equal(parseBalanceAddress(checksummed), checksummed);
    assert.equal(parseBalanceAddress(checksummed.toLowerCase()), checksummed);
    assert.equal(parseBalanceAddress(`xdc${checksummed.slice(2).toLowerCase()}`), checksummed);
    assert.equal(parseBalanceAddress(`XDC${checksummed.slice(2).toUpperCase()}`), checksummed);
    assert.equal(parseBalanceAddress(`0x${'0'.repeat(40)}`), `0x${'0'.repeat(40)}`);
    for (const bad of ['0x1234', 'hello', `0x${'g'.repeat(40)}`, `xdc${'1'.repeat(39)}`, `${checksummed}00`]) {
      assert.throws(() => parseBalanceAddress(bad), (err: unknown) => err instanceof HttpError && err.code === 'VALIDATION_ERROR', bad);
    }
    // A mixed-case address whose case does not match the checksum (one letter's case changed).
    const letter = [...checksummed].findIndex((c, i) => i > 1 && /[a-fA-F]/.test(c));
    const c = checksummed[letter] as string;
    const wrong = `${checksummed.slice(0, letter)}${c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()}${checksummed.slice(letter + 1)}`;
    assert.notEqual(wrong, checksummed);
    assert.throws(() => parseBalanceAddress(wrong), /EIP-55/);
  });

  test('amounts of one symbol with different decimals add up exactly', () => {
    // 1.5 USDC with 6 decimals and 2.000000000000000001 with 18 (as on BNB Chain).
    assert.equal(sumUnits([{ raw: 1_500_000n, decimals: 6 }, { raw: 2_000_000_000_000_000_001n, decimals: 18 }]), '3.500000000000000001');
    assert.equal(sumUnits([{ raw: 0n, decimals: 18 }]), '0');
    assert.equal(sumUnits([{ raw: 10n ** 40n, decimals: 18 }, { raw: 1n, decimals: 0 }]), '10000000000000000000001');
  });
});
