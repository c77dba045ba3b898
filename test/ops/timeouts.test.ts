import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';

// The server timeouts on the running gateway, set through the environment (applyServerTimeouts on
// its own: test/http/server-timeouts.test.ts).
// Small values so each case takes about a second; the shipped ones are 10 s, 30 s and 65 s.
const HEADERS_MS = 600;
const REQUEST_MS = 1500;
const KEEP_ALIVE_MS = 600;
/** Far above every timeout plus Node's check interval, far below the defaults (60 s, none, 72 s). */
const BOUND_MS = 8000;

interface RawClient {
  socket: net.Socket;
  /** Everything the server sent. */
  received: () => string;
  /** Resolves when the server closes the connection: milliseconds since connect, or `undefined` past BOUND_MS. */
  closed: Promise<number | undefined>;
}

async function connect(url: string): Promise<RawClient> {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const started = Date.now();
  let data = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => {
    data += d;
  });
  socket.on('error', () => {}); // a reset is a close too
  const closed = new Promise<number | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), BOUND_MS);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
  return { socket, received: () => data, closed };
}

/** Writes `chunks` one every `everyMs` while the socket is open (a slow client). */
function trickle(socket: net.Socket, chunks: string[], everyMs: number): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || i >= chunks.length) return;
    socket.write(chunks[i++] as string);
  }, everyMs);
  return () => clearInterval(timer);
}

function assertCutWith408OrClose(received: string): void {
  assert.ok(received === '' || received.startsWith('HTTP/1.1 408'), `a 408 or a bare close, got: ${received.slice(0, 80)}`);
}

describe('server timeouts: slow and idle clients are cut (server.headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs)', () => {
  let t: TestApp;
  before(async () => {
    // Set through the environment, as a deployment would.
    t = await startTestApp({
      listen: true,
      env: { HEADERS_TIMEOUT_MS: String(HEADERS_MS), REQUEST_TIMEOUT_MS: String(REQUEST_MS), KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_MS) },
    });
  });
  after(() => t.close());

  test('a client that sends its headers one line at a time is cut after the header timeout, though it keeps sending', async () => {
    const c = await connect(t.url);
    const lines = ['GET /health/live HTTP/1.1\r\n', 'Host: x\r\n', ...Array.from({ length: 100 }, (_, i) => `X-Slow-${i}: y\r\n`)];
    const stop = trickle(c.socket, lines, 100);
    const ms = await c.closed;
    stop();
    assert.ok(ms !== undefined, `the connection is still open after ${BOUND_MS} ms`);
    assert.ok(ms >= HEADERS_MS / 2, `not cut before its time (${ms} ms)`);
    assertCutWith408OrClose(c.received());
  });

  test('a client that never reads and keeps trickling header lines loses its socket on the server within the header timeout + 2 s', async () => {
    // Seen from the server: end() alone only half-closed, and a client that neither reads nor
    // closes held the server's socket (FIN-WAIT-2, fd open) for as long as it kept sending.
    const serverClosed = new Promise<number>((resolve) => {
      t.app.server.once('connection', (s: net.Socket) => {
        const opened = Date.now();
        s.once('close', () => resolve(Date.now() - opened));
      });
    });
    const { hostname, port } = new URL(t.url);
    const socket = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.pause(); // never reads: the 408 sits unread and the client never answers the FIN
    const lines = ['GET /health/live HTTP/1.1\r\n', 'Host: x\r\n', ...Array.from({ length: 200 }, (_, i) => `X-Slow-${i}: y\r\n`)];
    const stop = trickle(socket, lines, 50);
    const bound = HEADERS_MS + 2000;
    const ms = await Promise.race([serverClosed, new Promise<undefined>((r) => setTimeout(r, bound + 3000))]);
    stop();
    socket.destroy();
    assert.ok(ms !== undefined, `the server still holds the socket ${bound + 3000} ms after connect`);
    assert.ok(ms <= bound, `the server held the socket ${ms} ms (bound ${bound} ms)`);
  });

  test('a connection that never sends a byte is closed after the header timeout', async () => {
    const c = await connect(t.url);
    const ms = await c.closed;
    assert.ok(ms !== undefined, `the connection is still open after ${BOUND_MS} ms`);
    assertCutWith408OrClose(c.received());
  });

  test('a body that stalls halfway is cut after the request timeout', async () => {
    const c = await connect(t.url);
    const body = '{"email":"someone@example.com","password":"long enough pw"}';
    c.socket.write(
      `POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    const ms = await c.closed;
    assert.ok(ms !== undefined, `the connection is still open after ${BOUND_MS} ms`);
    assertCutWith408OrClose(c.received());
  });

  test('a body trickled a byte at a time is cut after the request timeout, though bytes keep coming', async () => {
    const c = await connect(t.url);
    const body = JSON.stringify({ email: 'someone@example.com', password: 'x'.repeat(200) });
    c.socket.write(`POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    const stop = trickle(c.socket, [...body], 50);
    const ms = await c.closed;
    stop();
    assert.ok(ms !== undefined, `the connection is still open after ${BOUND_MS} ms`);
    assert.ok(ms >= REQUEST_MS / 2, `not cut before its time (${ms} ms)`);
    assertCutWith408OrClose(c.received());
  });

  test('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const c = await connect(t.url);
    c.socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    const ms = await c.closed;
    assert.ok(ms !== undefined, `the idle connection is still open after ${BOUND_MS} ms`);
    assert.match(c.received(), /^HTTP\/1\.1 200/, 'the request itself was answered');
  });

  test('a WebSocket stays open past all three timeouts: they bound receiving requests, not upgraded connections', async () => {
    const { key } = await createKey(t.app);
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?apiKey=${key}`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    let closed = false;
    ws.once('close', () => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, REQUEST_MS * 2));
    assert.equal(closed, false);
    ws.ping();
    await new Promise((resolve) => ws.once('pong', resolve));
    ws.close();
  });

  test('a request sent at a normal pace is answered and its connection reused', async () => {
    const c = await connect(t.url);
    c.socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((r) => setTimeout(r, KEEP_ALIVE_MS / 3));
    c.socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    await c.closed;
    assert.equal(c.received().match(/HTTP\/1\.1 200/g)?.length, 2);
  });
});
