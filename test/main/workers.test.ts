// C56 (WORKERS: every core of one machine) and C57 (a stop keeps all usage), on real processes: a
// primary and its workers started as `node dist/main.js` is, in front of a scripted node.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { get } from 'node:http';
import path from 'node:path';
import { after, test } from 'node:test';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { V8_POOL_FLAG } from '../../src/ops/runtime.ts';
import { createTestDatabase } from '../support/storage.ts';
import { startFakeNode } from '../support/fake-node.ts';
import { keepAliveLoad } from '../support/keep-alive-load.ts';
import { alive, type GatewayProcess, killLeft, launchGateway, postJson, spawnGateway, usageTotal } from '../support/process.ts';
import { REDIS_URL, serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const running: GatewayProcess[] = [];
after(() => killLeft(running));

interface Answer {
  status?: number;
  code?: number;
  error?: string;
}

/** One call on a connection of its own (closed after): spread over the workers. */
async function call(url: string, key: string, id: number): Promise<Answer> {
  const own = new Agent({ pipelining: 0 });
  try {
    const res = await request(`${url}/rpc/main/evm/50`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'eth_getBalance', params: [`0x${(id % 1000).toString(16).padStart(40, '0')}`, 'latest'] }),
      dispatcher: own,
    });
    const body = (await res.body.json()) as { error?: { code: number } };
    return { status: res.statusCode, ...(body.error ? { code: body.error.code } : {}) };
  } catch (err) {
    const e = err as { code?: string; cause?: { code?: string } };
    return { error: e.cause?.code ?? e.code ?? String(err) };
  } finally {
    await own.close();
  }
}

/** The worker processes that said they listen: their number and pid, in the order they said it. */
function listening(output: string): Array<{ worker: number; pid: number }> {
  const out: Array<{ worker: number; pid: number }> = [];
  for (const line of output.split('\n')) {
    if (!line.includes('"msg":"Junction is listening"')) continue;
    const l = JSON.parse(line) as { pid: number; worker?: number };
    if (l.worker !== undefined) out.push({ worker: l.worker, pid: l.pid });
  }
  return out;
}

/**
 * The processes whose access log lines (`rpc.accessLog`) say they answered a call, with 200 or 429:
 * a burst spread over the workers has answers from more than one. Refusals alone do not tell it:
 * a worker handed only the first connections of a burst may answer every one of them with 200.
 */
function answeredBy(output: string): Set<string> {
  const by = new Set<string>();
  for (const line of output.split('\n')) if (line.includes('"msg":"rpc request"')) by.add(String((JSON.parse(line) as { process?: string }).process));
  return by;
}

test('WORKERS=4 on the embedded store: a key limited to 10 a minute gets exactly 10 of 30 calls spread over the workers, a killed worker is replaced while the others answer, and a stop sent twice to the process group under keep-alive load exits cleanly with every answered call counted (C56, C57, C12)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const configFile = path.join(dir, 'config.json');
  // The plan sets no limit: the key's own 10 a minute is the one tested; the other key is unlimited.
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } }, server: { shutdownGraceMs: 10_000 }, rpc: { accessLog: true } }));
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, GATEWAY_CONFIG: configFile };
  try {
    let gw = await spawnGateway({ env: { ...env, WORKERS: '4', LOG_LEVEL: 'debug' }, detached: true, seeded: true, timeoutMs: 180_000 });
    running.push(gw);
    await waitFor(() => listening(gw.output()).length === 4, { timeoutMs: 120_000, what: 'four workers listening' });
    // The primary, started as `node dist/main.js` alone, gives its workers V8's pool of one helper thread (src/ops/runtime.ts).
    for (const { pid } of listening(gw.output())) {
      assert.ok(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(V8_POOL_FLAG), `worker ${pid} runs with ${V8_POOL_FLAG}`);
    }
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
    const limited = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'ten', rateLimit: 10 }, auth)) as { key: string }).key;
    const open = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'open' }, auth)) as { key: string }).key;

    // C12 across workers: 30 at once, each on a connection of its own (spread over the workers).
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => call(gw.url, limited, i)));
    assert.equal(burst.filter((a) => a.status === 200 && a.code === undefined).length, 10, JSON.stringify(burst));
    const refused = burst.filter((a) => a.status === 429 && a.code === -32005);
    assert.equal(refused.length, 20, `the other 20 refused with -32005 (HTTP 429): ${JSON.stringify(burst)}`);
    await waitFor(() => answeredBy(gw.output()).size >= 2, { timeoutMs: 10_000, what: 'answers logged by two workers or more' });
    let answered = 10;

    const some = async (n: number, from: number) => {
      const list = await Promise.all(Array.from({ length: n }, (_, i) => call(gw.url, open, from + i)));
      assert.deepEqual(list.filter((a) => a.status !== 200), [], 'every call answered');
      answered += n;
    };
    await some(40, 100);

    // A worker killed outright: the others go on answering, the primary replaces it, no answered call loses its usage.
    const victim = listening(gw.output()).find((l) => l.worker === 2) as { worker: number; pid: number };
    process.kill(victim.pid, 'SIGKILL');
    await waitFor(() => !alive(victim.pid), { what: 'the worker to die' });
    // Once the primary has seen it gone: a connection it hands over in the instant a worker dies is
    // lost with it (node:cluster does not take it back; docs/scaling.md "Workers").
    await waitFor(() => /"msg":"worker 2 exited \(SIGKILL\); replacing it/.test(gw.output()), { what: 'the primary to see worker 2 gone' });
    await some(20, 200);
    await waitFor(() => listening(gw.output()).filter((l) => l.worker === 2).length === 2, { timeoutMs: 120_000, what: 'worker 2 replaced' });
    assert.notEqual(listening(gw.output()).filter((l) => l.worker === 2)[1]?.pid, victim.pid);
    await some(20, 300);

    // Steady keep-alive traffic, then SIGTERM to the whole process group twice (systemd, Ctrl-C after it).
    const load = keepAliveLoad(gw.url, open, 6);
    const { outcomes } = load;
    await load.steady(10, 30_000);
    const group = -(gw.child.pid as number);
    process.kill(group, 'SIGTERM');
    await waitFor(() => gw.output().includes('"process":"primary","signal":"SIGTERM","msg":"stopping"'), { what: 'the primary to begin its stop' });
    process.kill(group, 'SIGTERM');
    const exit = await gw.exited;
    await load.finish();
    assert.equal(exit.code, 0, `a clean stop:\n${gw.output().split('\n').filter((l) => !l.includes('"level":20')).slice(-40).join('\n')}`);
    // No call cut by the drain limit: a call read is a call answered.
    assert.doesNotMatch(gw.output(), /graceful stop took too long|did not stop in time|requests still running after the drain/);
    const all = outcomes.flat();
    for (const list of outcomes) {
      for (const [i, a] of list.entries()) {
        if (a.status === 200 || a.status === 503 || a.error === 'ECONNREFUSED') continue;
        // The port is the primary's until the last worker lets go of it: a connection opened in that
        // last instant is closed unread rather than refused: reset if the call's bytes had reached it,
        // ended (undici: UND_ERR_SOCKET, "other side closed") with nothing sent back if not. Never one
        // a call was read on: only a new connection, after an answer that closed the last one (and
        // usage is checked below).
        const closedUnread = a.error === 'ECONNRESET' || (a.error === 'UND_ERR_SOCKET' && a.bytesRead === 0);
        assert.ok(closedUnread && list[i - 1]?.connection === 'close', `answered, turned away, or refused at the port: ${JSON.stringify(a)} after ${JSON.stringify(list[i - 1])}`);
      }
    }
    answered += all.filter((a) => a.status === 200).length;
    // The store's owner wrote last: after every worker had stopped.
    const lines = gw.output().split('\n').filter((l) => l.includes('"msg":"stopped"'));
    assert.equal(lines.length, 5, 'four workers and the primary stopped');
    assert.match(lines.at(-1) as string, /"process":"primary"/);

    gw = await spawnGateway({ env, seeded: true, timeoutMs: 120_000 });
    running.push(gw);
    try {
      assert.equal(await usageTotal(gw.url, auth), answered, 'usage counts exactly the calls answered, across workers, the killed one and the stop');
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  } finally {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('WORKERS=2 on PostgreSQL and Redis: the workers answer, a key limited to 10 a minute gets exactly 10 of 30, and usage counts the answered calls (C56, C12)', { skip: (await serviceSkip('PostgreSQL')) || (await serviceSkip('Redis')) }, async () => {
  const db = await createTestDatabase();
  const upstream = await startFakeNode({ head: 0x1234 });
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-pg-'));
  // Redis is shared with every other run on this machine: the REST limits of its address (C17),
  // registrations per hour among them, are lifted so that earlier runs' counts do not refuse this one.
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ limits: { restPerMinute: 100_000, failedLoginsPerMinute: 1_000, failedAuthPerMinute: 100_000, registrationsPerHour: 100_000 }, rpc: { accessLog: true } }));
  const env = {
    GATEWAY_CONFIG: configFile,
    DATABASE_URL: db.url,
    REDIS_URL,
    JWT_SECRET: randomBytes(24).toString('hex'),
    KEY_ENCRYPTION_SECRET: randomBytes(24).toString('hex'),
    DATA_DIR: path.join(dir, 'data'),
    UPSTREAM_NATIVE_MAINNET: upstream.url,
  };
  try {
    let gw = await spawnGateway({ env: { ...env, WORKERS: '2', LOG_LEVEL: 'debug' }, detached: true, timeoutMs: 180_000 });
    running.push(gw);
    await waitFor(() => listening(gw.output()).length === 2, { timeoutMs: 120_000, what: 'two workers listening' });
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers-pg@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
    const limited = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'ten', rateLimit: 10 }, auth)) as { key: string }).key;
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => call(gw.url, limited, i)));
    assert.equal(burst.filter((a) => a.status === 200 && a.code === undefined).length, 10, JSON.stringify(burst));
    assert.equal(burst.filter((a) => a.status === 429 && a.code === -32005).length, 20, JSON.stringify(burst));
    await waitFor(() => answeredBy(gw.output()).size >= 2, { timeoutMs: 10_000, what: 'answers logged by both workers' });
    process.kill(-(gw.child.pid as number), 'SIGTERM');
    assert.equal((await gw.exited).code, 0, gw.output().slice(-3000));

    gw = await spawnGateway({ env, timeoutMs: 120_000 });
    running.push(gw);
    try {
      assert.equal(await usageTotal(gw.url, auth), 10);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  } finally {
    await upstream.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** One GET on a connection of its own: its status and body, or the connection's error code. */
function probe(url: string): Promise<{ status?: number; body?: string; error?: string }> {
  return new Promise((resolve) => {
    const req = get(url, { agent: false, timeout: 2_000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
      res.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? String(err) }));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? String(err) }));
  });
}

/** The port the primary names once storage is open, right before it forks the workers. */
function workersForked(gw: Pick<GatewayProcess, 'output'>): Promise<number> {
  return waitFor(
    () => {
      const line = gw.output().split('\n').find((l) => l.includes('"msg":"storage ready'));
      return line ? (JSON.parse(line) as { port: number }).port : undefined;
    },
    { timeoutMs: 120_000, what: 'the primary opening storage' },
  );
}

test('WORKERS=2: while the workers start, the port bound first answers "starting" and is handed over when the first worker is about to listen, not left closed (or free for another process) for the whole start; a stop sent twice to the process group during the workers\' start exits 0 and frees the port (C3, C56, C57)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-start-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, WORKERS: '2' };
  try {
    const gw = await launchGateway({ env, detached: true, seeded: true });
    running.push({ ...gw, url: '' });
    const port = await workersForked(gw);
    const seen: Array<{ status?: number; body?: string; error?: string }> = [];
    while (listening(gw.output()).length === 0) {
      assert.equal(gw.child.exitCode, null, gw.output());
      seen.push(await probe(`http://127.0.0.1:${port}/health/ready`));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const starting = seen.filter((a) => a.status === 503 && a.body?.includes('Junction is starting'));
    // Once the workers were forked the port went on answering "starting" (a worker's start takes
    // hundreds of milliseconds at least): before, the primary let go of it first and every probe
    // here was refused. (A refusal may still fall in the moment of the hand-over itself.)
    assert.ok(starting.length >= 1, JSON.stringify(seen));
    assert.equal((await probe(`http://127.0.0.1:${port}/health/live`)).status, 200);
    process.kill(-(gw.child.pid as number), 'SIGTERM');
    assert.equal((await gw.exited).code, 0, gw.output().slice(-3000));

    // Stopped as systemd and a terminal do, twice, while the workers are still starting.
    const early = await launchGateway({ env, detached: true });
    running.push({ ...early, url: '' });
    const earlyPort = await workersForked(early);
    process.kill(-(early.child.pid as number), 'SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 50));
    process.kill(-(early.child.pid as number), 'SIGTERM');
    const ended = await early.exited;
    assert.equal(ended.code, 0, early.output().slice(-3000));
    assert.equal(listening(early.output()).length, 0, 'stopped before a worker listened');
    assert.equal((await probe(`http://127.0.0.1:${earlyPort}/health/live`)).error, 'ECONNREFUSED');
  } finally {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('WORKERS=2 with BENCH_GC=1: SIGUSR2 sent to a worker prints that worker\'s memory and its own WebSocket connections, which add up to the clients connected (bench/scenarios/ws.ts)', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-gc-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, WORKERS: '2', LOG_LEVEL: 'info', BENCH_GC: '1', NODE_OPTIONS: '--expose-gc' };
  const clients: WebSocket[] = [];
  try {
    const gw = await spawnGateway({ env, detached: true, seeded: true, timeoutMs: 180_000 });
    running.push(gw);
    await waitFor(() => listening(gw.output()).length === 2, { timeoutMs: 120_000, what: 'two workers listening' });
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers-gc@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const key = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'ws' }, { authorization: `Bearer ${reg.tokens.accessToken}` })) as { key: string }).key;
    for (let i = 0; i < 3; i++) {
      const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/ws/native-mainnet?apiKey=${key}`);
      clients.push(ws);
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    }
    const memory: Array<{ worker: number; rss: number; connections: number }> = [];
    for (const { worker, pid } of listening(gw.output())) {
      const seen = gw.output().split('bench-memory ').length;
      process.kill(pid, 'SIGUSR2');
      await waitFor(() => gw.output().split('bench-memory ').length > seen, { what: `worker ${worker}'s memory line` });
      const line = gw.output().split('bench-memory ').at(-1) as string;
      memory.push(JSON.parse(line.slice(0, line.indexOf('\n'))) as { worker: number; rss: number; connections: number });
    }
    assert.deepEqual(memory.map((m) => m.worker).sort(), [1, 2], 'each line names the worker that wrote it');
    assert.ok(memory.every((m) => m.rss > 0), JSON.stringify(memory));
    assert.equal(memory.reduce((a, m) => a + m.connections, 0), 3, `the workers' connections add up to the clients: ${JSON.stringify(memory)}`);
    for (const ws of clients) ws.terminate();
    process.kill(-(gw.child.pid as number), 'SIGTERM');
    assert.equal((await gw.exited).code, 0, gw.output().slice(-3000));
  } finally {
    for (const ws of clients) ws.terminate();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
