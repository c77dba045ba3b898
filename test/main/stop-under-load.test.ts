// C57: a stop under steady keep-alive traffic, on the real gateway process.
// slow: the real gateway process under load
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { Client } from 'undici';
import WebSocket from 'ws';
import { startFakeNode } from '../support/fake-node.ts';
import { keepAliveCall, keepAliveLoad } from '../support/keep-alive-load.ts';
import { type GatewayProcess, killLeft, postJson, spawnGateway, usageTotal } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

const GRACE_MS = 10_000;
const CLIENTS = 6;

const running: GatewayProcess[] = [];
after(() => killLeft(running));

test('a stop under steady keep-alive traffic drains by itself: answers carry Connection: close, a new call on an open connection gets 503, no answered call is reset, usage counts exactly the answered calls, a WebSocket call in flight is answered before its 1001 (C57)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-stop-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  // No rate limit in the way of the traffic.
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } }, server: { shutdownGraceMs: GRACE_MS } }));
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, GATEWAY_CONFIG: configFile };
  try {
    let gw = await spawnGateway({ env, detached: true, seeded: true });
    running.push(gw);
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'stop@example.com', password: 'long enough pw', name: 'S' })) as { tokens: { accessToken: string } };
    const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
    const { key } = (await postJson(`${gw.url}/api/v1/api-keys`, { name: 'stop' }, auth)) as { key: string };

    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${key}`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const wsMessages: Array<{ id?: number; result?: unknown; error?: unknown }> = [];
    ws.on('message', (data: Buffer) => wsMessages.push(JSON.parse(data.toString()) as { id?: number }));
    const wsClosed = new Promise<{ code: number; at: number; answered: boolean }>((resolve) =>
      ws.once('close', (code) => resolve({ code, at: performance.now(), answered: wsMessages.some((m) => m.id === 7) })),
    );

    // Steady traffic: each client one kept-alive connection, one call after another until refused.
    const load = keepAliveLoad(gw.url, key, CLIENTS);
    const { outcomes } = load;
    await load.steady(20, 20_000);
    // A connection kept alive and idle when the stop comes: its next call is a new one on an open connection.
    const idle = new Client(gw.url, { pipelining: 1 });
    const before = await keepAliveCall(idle, key, 1_000_000, `0x${'f'.repeat(40)}`);
    assert.equal(before.status, 200);
    // Every client's next call waits at the node when the stop comes: calls in flight.
    const atNode = upstream.callCount('eth_getBalance');
    upstream.setDelay(400);
    // And a WebSocket call too: it is answered before its connection gets its 1001.
    ws.send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_getBalance', params: [`0x${'e'.repeat(40)}`, 'latest'] }));
    await waitFor(() => upstream.callCount('eth_getBalance') >= atNode + CLIENTS + 1, { what: 'a call of every client in flight' });
    const inFlight = outcomes.map((o) => o.length);

    // A stop sent to the whole process group, then a second signal (a terminal's Ctrl-C): it must not cut the drain short.
    const group = -(gw.child.pid as number);
    const stopAt = performance.now();
    process.kill(group, 'SIGTERM');
    await waitFor(() => gw.output().includes('"msg":"stopping"'), { what: 'the stop to begin' });
    process.kill(group, 'SIGINT');
    const turnedAway = await keepAliveCall(idle, key, 1_000_001, `0x${'f'.repeat(40)}`);
    const exit = await gw.exited;
    const stopMs = performance.now() - stopAt;
    await load.finish();
    await idle.close().catch(() => {});

    assert.equal(exit.code, 0, `a clean stop:\n${gw.output().slice(-3000)}`);
    assert.ok(stopMs < GRACE_MS / 2, `the stop ended well before the drain limit: ${Math.round(stopMs)} ms\n${gw.output().split("\n").filter((l) => /stop|drain|closing|1001/.test(l)).join("\n")}`);
    assert.doesNotMatch(gw.output(), /requests still running after the drain|graceful stop took too long/);
    // Calls in flight finish, and their answers close their connections.
    for (const [c, list] of outcomes.entries()) {
      const o = list[(inFlight[c] as number)] ?? list.at(-1);
      assert.equal(o?.status, 200, `client ${c}: the call in flight was answered (${JSON.stringify(o)})`);
      assert.equal(o?.connection, 'close', `client ${c}: the answer during the stop carries Connection: close`);
    }
    // A new call on a connection still open is turned away at once, and told when to come back.
    assert.equal(turnedAway.status, 503, JSON.stringify(turnedAway));
    assert.ok(Number(turnedAway.retryAfter) > 0, 'Retry-After');
    assert.equal(turnedAway.connection, 'close');
    assert.equal((JSON.parse(turnedAway.body as string) as { error: { code: number } }).error.code, -32603);
    // No call was reset: after its answer, a client's next connection finds the port closed, nothing else.
    const all = outcomes.flat();
    const errors = all.filter((o) => o.error !== undefined).map((o) => o.error);
    assert.deepEqual(errors.filter((e) => e !== 'ECONNREFUSED'), [], 'no reset or dropped call');
    for (const o of all) if (o.status !== undefined) assert.ok(o.status === 200 || o.status === 503, `status ${o.status}`);
    // WebSocket clients are told with a 1001 before the process exits, once their calls in flight are answered.
    const closed = await wsClosed;
    assert.equal(closed.code, 1001);
    assert.ok(closed.answered, `the WebSocket call in flight was answered before the 1001: ${JSON.stringify(wsMessages)}`);
    assert.ok(wsMessages.find((m) => m.id === 7)?.result !== undefined, JSON.stringify(wsMessages));
    const answered = all.filter((o) => o.status === 200).length + 1 + 1; // and the idle client's first call, and the WebSocket call

    gw = await spawnGateway({ env, seeded: true });
    running.push(gw);
    try {
      assert.equal(await usageTotal(gw.url, auth), answered, 'usage counts exactly the calls answered, none turned away');
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  } finally {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
