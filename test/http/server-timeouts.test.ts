// applyServerTimeouts (src/http/server-timeouts.ts) on a plain node:http server: the three
// timeouts and their check interval, the shipped defaults, and that only receiving a request is
// timed. The gateway cutting slow and idle clients with them: test/ops/timeouts.test.ts.
import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { applyServerTimeouts, type CheckedServer } from '../../src/http/server-timeouts.ts';

// Small values, so a late answer is seen within seconds; the shipped ones are 10 s, 30 s and 65 s.
// Not smaller: on a loaded machine (the unit tier runs files in parallel) a request sent at once
// could take longer than 400 ms to be received, and was then rightly answered 408.
const HEADERS_MS = 1_000;
const REQUEST_MS = 1_500;
const KEEP_ALIVE_MS = 1_000;

describe('applyServerTimeouts on a plain node:http server', () => {
  const config = loadConfig({
    env: { HEADERS_TIMEOUT_MS: String(HEADERS_MS), REQUEST_TIMEOUT_MS: String(REQUEST_MS), KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_MS) },
  });

  test('an answer that takes longer than the request timeout is not cut: only receiving the request is timed', async () => {
    const server = http.createServer((_req, res) => {
      setTimeout(() => res.end('late but whole'), REQUEST_MS * 2);
    });
    applyServerTimeouts(server, config.server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as net.AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'small body' });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'late but whole');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('it sets the three timeouts and a check interval that is a fraction of the shortest', () => {
    const server = http.createServer() as CheckedServer;
    applyServerTimeouts(server, config.server);
    assert.equal(server.headersTimeout, HEADERS_MS);
    assert.equal(server.requestTimeout, REQUEST_MS);
    assert.equal(server.keepAliveTimeout, KEEP_ALIVE_MS);
    assert.ok(server.connectionsCheckingInterval <= HEADERS_MS / 4);
  });

  test('the shipped defaults: headers 10 s, whole request 30 s, idle keep-alive 65 s, checked every second', () => {
    const server = http.createServer() as CheckedServer;
    applyServerTimeouts(server, loadConfig({ env: {} }).server);
    assert.deepEqual(
      [server.headersTimeout, server.requestTimeout, server.keepAliveTimeout, server.connectionsCheckingInterval],
      [10_000, 30_000, 65_000, 1000],
    );
  });

  test('a header timeout longer than the request timeout stops the start, naming both settings', () => {
    assert.throws(() => loadConfig({ env: { HEADERS_TIMEOUT_MS: '40000' } }), /server\.headersTimeoutMs .* server\.requestTimeoutMs/);
    assert.throws(() => loadConfig({ env: { REQUEST_TIMEOUT_MS: 'soon' } }), /REQUEST_TIMEOUT_MS/);
  });
});
