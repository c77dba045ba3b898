// The answer size cap of rpc.maxResponseBytes, on both ways a node can send an answer: with a
// Content-Length over the cap (refused on the headers) and chunked without end (cut as it
// arrives). Either way the attempt is final (no other node is asked) and the pool goes on serving.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { NoUpstreamError } from '../../src/errors/upstream.ts';
import { call, closeAfter, pool } from './helpers.ts';

const CAP = 16 * 1024;

/** A node that answers `eth_getLogs` as `mode` says and everything else with a small result. */
async function node(mode: 'declared' | 'endless'): Promise<{ url: string; written: () => number; close(): Promise<void> }> {
  let written = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const { id, method } = JSON.parse(body) as { id: number; method: string };
      if (method !== 'eth_getLogs') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ jsonrpc: '2.0', id, result: '0x10' }));
        return;
      }
      if (mode === 'declared') {
        const big = `{"jsonrpc":"2.0","id":${id},"result":"0x${'0'.repeat(4 * CAP)}"}`;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) });
        res.end(big);
        return;
      }
      // Chunked, and never done: 1 KiB every millisecond until the gateway hangs up.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`{"jsonrpc":"2.0","id":${id},"result":"0x`);
      const timer = setInterval(() => {
        written += 1024;
        res.write('0'.repeat(1024));
      }, 1);
      res.on('close', () => clearInterval(timer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return closeAfter({
    url,
    written: () => written,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}

for (const mode of ['declared', 'endless'] as const) {
  test(`an answer over rpc.maxResponseBytes (${mode === 'declared' ? 'Content-Length' : 'chunked, endless'}) is a final failure; the next call is served`, async () => {
    const n = await node(mode);
    const p = pool([n.url], { maxResponseBytes: CAP });
    await assert.rejects(
      p.forward(call('eth_getLogs', [{}]), ['eth_getLogs']),
      (err: unknown) => err instanceof NoUpstreamError && /larger than 16384 bytes/.test(JSON.stringify(err.attempts ?? err.message)),
    );
    if (mode === 'endless') assert.ok(n.written() < 64 * CAP, `cut early (${n.written()} bytes written)`);
    const ok = await p.forward(call('eth_chainId'), ['eth_chainId']);
    assert.match(ok.body.toString(), /"result":"0x10"/);
  });
}
