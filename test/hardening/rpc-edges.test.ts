// Edges of the RPC addresses found by the hardening review: upstream answers past the size cap,
// HTTP the parser refuses (431), clients that hang up, and keys in odd places (C7, C22).
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';
import { connect, wsAddress } from '../support/ws.ts';
import { MAX_NESTING } from '../../src/rpc/message.ts';

let t: TestApp;
let node: FakeNode;
let key: string;

before(async () => {
  node = await startFakeNode();
  t = await startTestApp({
    listen: true,
    env: { UPSTREAM_NATIVE_MAINNET: node.url, LOG_LEVEL: 'debug' },
    overrides: { rpc: { maxResponseBytes: 64 * 1024 } },
  });
  key = (await createKey(t.app)).key;
});
after(async () => {
  await t?.close();
  await node?.close();
});

const rpc = (body: unknown, signal?: AbortSignal) =>
  fetch(`${t.url}/v1/native-mainnet/${key}`, { method: 'POST', body: JSON.stringify(body), ...(signal ? { signal } : {}) });

/** Raw bytes over a socket, and everything the server sent back until it closed. */
function raw(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const u = new URL(t.url);
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(text));
    let got = '';
    socket.on('data', (d) => (got += String(d)));
    socket.on('end', () => resolve(got));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => {
      socket.destroy();
      resolve(got);
    });
  });
}

describe('the RPC addresses at their edges', () => {
  test('an upstream answer larger than rpc.maxResponseBytes is -32000 "Response too large" with 502, naming the limit, and no other node is asked (C60)', async () => {
    const big = `{"jsonrpc":"2.0","id":1,"result":"0x${'0'.repeat(100 * 1024)}"}`;
    node.setRaw('eth_getLogs', big);
    try {
      const before = node.callCount('eth_getLogs');
      const res = await rpc({ jsonrpc: '2.0', id: 7, method: 'eth_getLogs', params: [{}] });
      assert.equal(res.status, 502);
      const body = (await res.json()) as { id: number; error: { code: number; message: string; data: unknown } };
      assert.equal(body.id, 7);
      assert.equal(body.error.code, -32000);
      assert.match(body.error.message, /^Response too large: the answer is larger than 65536 bytes \(rpc\.maxResponseBytes\)/);
      assert.deepEqual(body.error.data, { reason: 'response_too_large', maxBytes: 65536 });
      assert.equal(node.callCount('eth_getLogs') - before, 1);
      // Under the cap the same call passes.
      node.setRaw('eth_getLogs', `{"jsonrpc":"2.0","id":1,"result":[]}`);
      assert.equal((await rpc({ jsonrpc: '2.0', id: 8, method: 'eth_getLogs', params: [{}] })).status, 200);
    } finally {
      node.setRaw('eth_getLogs', null);
    }
  });

  test('headers too large are 431 in the C7 envelope', async () => {
    const answer = await raw(`POST /v1/native-mainnet/${key} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\nContent-Length: 2\r\n\r\n{}`);
    assert.match(answer, /^HTTP\/1\.1 431 /);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { success: boolean; error: { code: string } };
    assert.deepEqual([body.success, body.error.code], [false, 'HEADERS_TOO_LARGE']);
  });

  test('malformed HTTP is 400 in the C7 envelope', async () => {
    const answer = await raw('POST /v1 HTTP/9.9 nonsense\r\n\r\n');
    assert.match(answer, /^HTTP\/1\.1 400 /);
    assert.equal((JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { code: string } }).error.code, 'BAD_REQUEST');
  });

  test('answers written together after a round: pipelined requests on one connection come back in order, many connections at once each get their own', async () => {
    // Three requests in one TCP write, the last asking the server to close: three answers, in order.
    const req = (id: number, last = false) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_chainId', params: [] });
      return `POST /v1/native-mainnet/${key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${last ? 'Connection: close\r\n' : ''}\r\n${body}`;
    };
    const answer = await raw(req(1) + req(2) + req(3, true));
    const ids = [...answer.matchAll(/"id":(\d+)/g)].map((m) => Number(m[1]));
    assert.deepEqual(ids, [1, 2, 3], answer);
    assert.equal(answer.match(/HTTP\/1\.1 200 /g)?.length, 3);
    // 50 connections at once (undici opens one per request in flight): every answer under its own id.
    const answers = await Promise.all(Array.from({ length: 50 }, async (_, i) => (await rpc({ jsonrpc: '2.0', id: 1000 + i, method: 'eth_blockNumber', params: [] })).json()));
    assert.deepEqual(
      answers.map((a) => (a as { id: number }).id),
      Array.from({ length: 50 }, (_, i) => 1000 + i),
    );
    assert.ok(answers.every((a) => typeof (a as { result?: unknown }).result === 'string'));
  });

  test('a client that hangs up before its answer is no error of ours: nothing is logged at error level', async () => {
    node.setDelay(500);
    const mark = t.logs.length;
    try {
      const abort = new AbortController();
      const pending = rpc({ jsonrpc: '2.0', id: 1, method: 'eth_gasPrice', params: [] }, abort.signal).catch(() => undefined);
      await waitFor(() => node.callCount('eth_gasPrice') > 0, { timeoutMs: 5_000 });
      abort.abort();
      await pending;
      await waitFor(() => t.logs.slice(mark).some((l) => l.includes('client closed the connection before the answer')), { timeoutMs: 5_000 });
      const errors = t.logs.slice(mark).filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
      assert.deepEqual(errors, []);
    } finally {
      node.setDelay(0);
    }
  });

  test('C23: a message nested more than 128 levels deep is -32600 with 400 over HTTP and WebSocket, never forwarded or an internal error', async () => {
    assert.equal(MAX_NESTING, 128);
    const arrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    const call = (method: string, params: string) => `{"jsonrpc":"2.0","id":7,"method":"${method}","params":${params}}`;
    const post = (body: string) => fetch(`${t.url}/v1/native-mainnet/${key}`, { method: 'POST', body });
    const mark = t.logs.length;

    // At the limit (the call object and 127 arrays): forwarded as it came.
    // The pool's own health probe may land in between on a busy machine: only the test's calls count.
    const probe = (b: unknown) => /"method":"(eth_blockNumber|eth_chainId|eth_getBlockByNumber|net_version)"/.test(String(b)) && !/\[\[\[|\{"a/.test(String(b));
    const before = node.bodies.length;
    const atLimit = call('eth_call', arrays(MAX_NESTING - 1));
    const ok = await post(atLimit);
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { id: number }).id, 7);
    assert.equal(node.bodies.slice(before).filter((b) => !probe(b)).length, 1);

    // One level more, or far more; in params (the cache key and the log planner read those), the
    // id, or a batch: refused whole before the key is looked at, and nothing reaches the node.
    const deep = [
      call('eth_call', arrays(MAX_NESTING)),
      call('eth_getBlockByHash', `[${objects(100_000)},false]`),
      call('eth_getLogs', `[{"topics":${arrays(100_000)}}]`),
      `{"jsonrpc":"2.0","id":${arrays(MAX_NESTING)},"method":"eth_chainId","params":[]}`,
      `[${call('eth_call', arrays(MAX_NESTING - 1))}]`,
      arrays(200_000),
    ];
    const sent = node.bodies.length;
    for (const body of deep) {
      const res = await post(body);
      const text = await res.text();
      assert.equal(res.status, 400, `${body.slice(0, 60)}: ${text.slice(0, 200)}`);
      assert.deepEqual(JSON.parse(text), { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid request: JSON nested more than 128 levels deep' } });
    }
    const ws = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${key}`));
    try {
      for (const body of deep.slice(0, 3)) {
        const answer = await ws.send(body);
        assert.equal(answer.error?.code, -32600, JSON.stringify(answer).slice(0, 200));
      }
      assert.equal((await ws.send(atLimit)).id, 7, 'the connection still serves');
    } finally {
      await ws.close();
    }
    assert.equal(node.bodies.slice(sent).filter((b) => !probe(b)).length, 1, 'only the call at the limit reached the node');
    assert.ok(!t.logs.slice(mark).some((l) => /"level":(50|60)/.test(l) || l.includes('Maximum call stack')), 'no error logged');
  });

  test('a key in the network slot of /v1 is never repeated in the answer or the logs', async () => {
    const mark = t.logs.length;
    const res = await fetch(`${t.url}/v1/${key}`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
    const text = await res.text();
    const secret = key.slice(8);
    assert.ok(!text.includes(secret), `answer repeats the key: ${text}`);
    assert.ok(!t.logs.slice(mark).join('\n').includes(secret), 'a log line repeats the key');
  });
});

describe('an HTTP/1.1 request without Host (C7, C22)', () => {
  const split = (answer: string) => {
    const end = answer.indexOf('\r\n\r\n');
    return { head: answer.slice(0, end), body: JSON.parse(answer.slice(end + 4)) as Record<string, unknown> };
  };
  const call = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}';
  const post = (path: string, version: string, extra = '') =>
    raw(`POST ${path} HTTP/${version}\r\n${extra}Content-Type: application/json\r\nContent-Length: ${call.length}\r\nConnection: close\r\n\r\n${call}`);

  test('at an RPC address is a JSON-RPC -32600 with 400 (not an empty 400 from the HTTP parser), and the connection closes', async () => {
    const chainId = t.app.parts.networks.bySlug('native-mainnet')?.chainId;
    for (const answer of [await post(`/v1/native-mainnet/${key}`, '1.1'), await post(`/rpc/main/evm/${chainId}`, '1.1', `X-API-Key: ${key}\r\n`)]) {
      assert.match(answer, /^HTTP\/1\.1 400 /);
      const { head, body } = split(answer);
      assert.match(head, /\r\ncontent-type: application\/json/i);
      assert.match(head, /\r\nconnection: close/i);
      assert.equal(body.jsonrpc, '2.0');
      assert.equal(body.id, null);
      const error = body.error as { code: number; message: string };
      assert.equal(error.code, -32600);
      assert.match(error.message, /Host/);
    }
    // A CORS preflight is no exception.
    assert.match(await raw(`OPTIONS /v1/native-mainnet HTTP/1.1\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n`), /^HTTP\/1\.1 400 /);
  });

  test('at a REST address is 400 BAD_REQUEST in the C7 envelope', async () => {
    const answer = await raw('GET /api/v1/networks HTTP/1.1\r\nConnection: close\r\n\r\n');
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const { head, body } = split(answer);
    assert.match(head, /\r\nx-request-id: /i);
    assert.equal(body.success, false);
    const error = body.error as { code: string; message: string };
    assert.equal(error.code, 'BAD_REQUEST');
    assert.match(error.message, /Host/);
  });

  test('a WebSocket upgrade without Host is refused 400 with a JSON-RPC -32600, never 101', async () => {
    const upgrade = (host: string) =>
      raw(`GET /ws/native-mainnet?apiKey=${key} HTTP/1.1\r\n${host}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    const answer = await upgrade('');
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const { head, body } = split(answer);
    assert.match(head, /\r\nconnection: close/i);
    const error = body.error as { code: number; message: string };
    assert.equal(error.code, -32600);
    assert.match(error.message, /Host/);
    // The same upgrade with Host is taken: the refusal is about Host alone.
    const u = new URL(t.url);
    const socket = net.connect(Number(u.port), u.hostname);
    const status = await new Promise<string>((resolve, reject) => {
      socket.on('connect', () =>
        socket.write(`GET /ws/native-mainnet?apiKey=${key} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`),
      );
      socket.once('data', (d) => resolve(String(d).split('\r\n', 1)[0] ?? ''));
      socket.on('error', reject);
    });
    socket.destroy();
    assert.equal(status, 'HTTP/1.1 101 Switching Protocols');
  });

  test('HTTP/1.0 needs no Host: REST and RPC answer as usual', async () => {
    assert.match(await raw('GET /api/v1/networks HTTP/1.0\r\n\r\n'), /^HTTP\/1\.1 200 /);
    const answer = await post(`/v1/native-mainnet/${key}`, '1.0');
    assert.match(answer, /^HTTP\/1\.1 200 /);
    const { body } = split(answer);
    assert.equal(body.id, 1);
    assert.ok('result' in body, JSON.stringify(body));
  });
});

describe('answers before metering carry the C13 headers, read and not consumed', () => {
  /** The four headers of a raw answer's head, by lower-case name. */
  const limitsOf = (answer: string): Record<string, string> => {
    const out: Record<string, string> = {};
    for (const line of answer.slice(0, answer.indexOf('\r\n\r\n')).split('\r\n')) {
      const [name, value] = [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()];
      if (name.startsWith('x-ratelimit-') || name === 'x-cu-remaining') out[name] = value;
    }
    return out;
  };
  const upgrade = (path: string, extra = 'Host: x\r\n') =>
    raw(`GET ${path} HTTP/1.1\r\n${extra}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);

  test("a body over the limit (413) and a request or upgrade without Host (400) carry the key's limits; an upgrade to an unknown network (404) too", async () => {
    const call = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}';
    const answered = await rpc(JSON.parse(call));
    assert.equal(answered.status, 200);
    const limit = answered.headers.get('x-ratelimit-limit');
    const remaining = answered.headers.get('x-ratelimit-remaining');
    assert.ok(Number(limit) > 0 && Number(remaining) >= 0);

    const big = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":["${'0'.repeat(1_100_000)}"]}`;
    const tooLarge = await raw(`POST /v1/native-mainnet/${key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`);
    const noHost = await raw(`POST /v1/native-mainnet/${key} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${call.length}\r\nConnection: close\r\n\r\n${call}`);
    const wsNoHost = await upgrade(`/ws/native-mainnet?apiKey=${key}`, '');
    const wsUnknown = await upgrade(`/ws/no-such-network?apiKey=${key}`);
    for (const [what, answer, status] of [['413', tooLarge, 413], ['no Host', noHost, 400], ['upgrade without Host', wsNoHost, 400], ['upgrade to an unknown network', wsUnknown, 404]] as const) {
      assert.match(answer, new RegExp(`^HTTP/1\\.1 ${status} `), what);
      const h = limitsOf(answer);
      assert.equal(h['x-ratelimit-limit'], limit, what);
      assert.equal(h['x-ratelimit-remaining'], remaining, `${what}: nothing consumed`);
      assert.match(h['x-ratelimit-reset'] ?? '', /^\d+$/, what);
      assert.match(h['x-cu-remaining'] ?? '', /^-?\d+$/, what);
    }
    // A key that is no key: the address's failed-key-lookup window (C17), read.
    const h = limitsOf(await upgrade('/ws/native-mainnet?apiKey=nope'));
    assert.equal(h['x-ratelimit-limit'], String(t.config.limits.failedAuthPerMinute));
    assert.equal(h['x-cu-remaining'], '-1');
  });

  test('an upgrade from an Origin not allowed (403) carries them', async () => {
    const other = await startTestApp({ listen: true, env: { UPSTREAM_NATIVE_MAINNET: node.url }, overrides: { rpc: { corsOrigins: ['https://app.example'] } } });
    try {
      const { key: k } = await createKey(other.app, { rateLimit: 7 });
      const u = new URL(other.url);
      // One call puts the key in memory (and uses one of its 7).
      const first = await fetch(`${other.url}/v1/native-mainnet/${k}`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
      assert.equal(first.headers.get('x-ratelimit-remaining'), '6');
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(u.port), u.hostname, () =>
          socket.write(`GET /ws/native-mainnet?apiKey=${k} HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`),
        );
        let got = '';
        socket.on('data', (d) => (got += String(d)));
        socket.on('end', () => resolve(got));
        socket.on('error', reject);
      });
      assert.match(answer, /^HTTP\/1\.1 403 /);
      // Its own limit, nothing more used.
      assert.equal(limitsOf(answer)['x-ratelimit-limit'], '7');
      assert.equal(limitsOf(answer)['x-ratelimit-remaining'], '6');
    } finally {
      await other.close();
    }
  });
});
