// C56: with WORKERS, a worker whose event loop stops (here: the process stopped with SIGSTOP) is
// still handed connections by the primary, which would hang there for good. The primary pings each
// worker and kills one that leaves a ping unanswered for server.workerHangMs; it is replaced as a
// worker that dies is, and every call is answered again (src/cluster/primary.ts `watchHangs`).
// slow: a real primary and its workers, started as `node dist/main.js` is
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startFakeNode } from '../support/fake-node.ts';
import { alive, callAlone, type GatewayProcess, killLeft, logLines, postJson, spawnGateway } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

const HANG_MS = 2_000;

const running: GatewayProcess[] = [];
after(() => killLeft(running));

test(`WORKERS=2: a worker stopped (SIGSTOP) is killed once it has not answered the primary for server.workerHangMs (${HANG_MS} ms), and replaced; calls are answered again (C56)`, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-hang-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } } }));
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, GATEWAY_CONFIG: configFile, WORKERS: '2', WORKER_HANG_MS: String(HANG_MS) };
  try {
    const gw = await spawnGateway({ env, detached: true, seeded: true, timeoutMs: 180_000 });
    running.push(gw);
    const listening = () => logLines(gw.output()).filter((x) => x.msg === 'Junction is listening' && x.worker !== undefined);
    await waitFor(() => listening().length === 2, { timeoutMs: 120_000, what: 'two workers listening' });
    const first = new Map(listening().map((x) => [x.worker as number, x.pid as number]));
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers-hang@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const key = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'hang' }, { authorization: `Bearer ${reg.tokens.accessToken}` })) as { key: string }).key;
    assert.deepEqual(await Promise.all(Array.from({ length: 6 }, (_, i) => callAlone(gw.url, key, i + 1))), Array(6).fill(200));

    // Worker 1 stops answering anything; calls handed to it hang meanwhile.
    const stoppedPid = first.get(1) as number;
    process.kill(stoppedPid, 'SIGSTOP');
    const stoppedAt = Date.now();
    const during = Array.from({ length: 6 }, (_, i) => callAlone(gw.url, key, 100 + i, 15_000));

    await waitFor(() => listening().filter((x) => x.worker === 1).length === 2, { timeoutMs: 60_000, what: 'worker 1 replaced and listening' });
    const replacedMs = Date.now() - stoppedAt;
    t.diagnostic(`worker 1 replaced and listening ${replacedMs} ms after it stopped (workerHangMs ${HANG_MS})`);
    const lines = logLines(gw.output());
    const story = lines.filter((l) => l.process === 'primary').map((l) => JSON.stringify(l)).join('\n');
    const killed = lines.find((l) => l.process === 'primary' && /has not answered for 2000 ms \(server\.workerHangMs\); killing it/.test(l.msg));
    assert.ok(killed && killed.worker === 1 && killed.pid === stoppedPid, story);
    // Not before the hang limit (the ping sent at most a quarter of it after the stop).
    assert.ok(killed.time - stoppedAt >= HANG_MS, `killed ${killed.time - stoppedAt} ms after the stop:\n${story}`);
    assert.ok(lines.some((l) => l.process === 'primary' && l.worker === 1 && l.signal === 'SIGKILL' && /replacing it/.test(l.msg)), story);
    assert.equal(alive(stoppedPid), false, 'the stopped worker is gone');
    const replacement = listening().filter((x) => x.worker === 1)[1]?.pid as number;
    assert.notEqual(replacement, stoppedPid);
    // Worker 2 was never taken for a hung one.
    assert.equal(lines.filter((l) => /has not answered/.test(l.msg)).length, 1, story);

    // Calls made meanwhile were answered by worker 2, but the one connection the primary handed to
    // worker 1 (node:cluster keeps it open until the worker takes it, and forgets it when the
    // worker dies: the client's own timeout ends it). From now on every call is answered.
    const ended = await Promise.all(during);
    assert.ok(ended.filter((s) => s !== 200).length <= 1, JSON.stringify(ended));
    assert.deepEqual(await Promise.all(Array.from({ length: 12 }, (_, i) => callAlone(gw.url, key, 200 + i))), Array(12).fill(200));

    gw.child.kill('SIGTERM');
    await gw.exited;
  } finally {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
