// C57 with C56: the stop of a gateway run as several processes (WORKERS) ends within
// server.shutdownGraceMs as a whole, the workers' drain and the primary's last usage write
// included (src/cluster/primary.ts `stopBudget`: the workers get the grace less the primary's tail).
// slow: a real primary and its workers, started as `node dist/main.js` is
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startFakeNode } from '../support/fake-node.ts';
import { callAlone as call, type GatewayProcess, killLeft, logLines, postJson, spawnGateway, usageTotal } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

const GRACE_MS = 3_000;
/** What the primary takes to exit once its stop is done (and the test to see it), on a busy machine. */
const EXIT_SLACK_MS = 1_500;

const running: GatewayProcess[] = [];
after(() => killLeft(running));

test('WORKERS=2: a stop sent to the process group, with a worker that does not stop by itself and calls in flight at a hung node on the other, ends within server.shutdownGraceMs, the primary\'s last usage write included, and keeps the usage of every answered call (C57, C56)', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-stop-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } }, server: { shutdownGraceMs: GRACE_MS } }));
  // The stopped worker is left to the stop (the primary's hang watch would replace it first after 10 s on a slow machine).
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, GATEWAY_CONFIG: configFile, WORKER_HANG_MS: '600000' };
  try {
    let gw = await spawnGateway({ env: { ...env, WORKERS: '2' }, detached: true, seeded: true, timeoutMs: 180_000 });
    running.push(gw);
    const workers = await waitFor(
      () => {
        const l = logLines(gw.output()).filter((x) => x.msg === 'Junction is listening' && x.worker !== undefined);
        return l.length === 2 && new Map(l.map((x) => [x.worker as number, x.pid as number]));
      },
      { timeoutMs: 120_000, what: 'two workers listening' },
    );
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers-stop@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const auth = { authorization: `Bearer ${reg.tokens.accessToken}` };
    const key = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'stop' }, auth)) as { key: string }).key;

    // Calls answered by both workers, stored before the stop.
    const first = await Promise.all(Array.from({ length: 12 }, (_, i) => call(gw.url, key, i + 1)));
    assert.deepEqual(first, Array(12).fill(200));
    await waitFor(async () => (await usageTotal(gw.url, auth)) === 12, { what: 'the first calls stored' });

    // Worker 1 stops answering anything, a stop signal included (stuck: a busy loop, or an exit held
    // by a lookup in the thread pool): the primary must not wait for it past the workers' deadline.
    process.kill(workers.get(1) as number, 'SIGSTOP');
    // Calls answered by worker 2 from then on: their usage reaches the store with the primary's last
    // write (the one connection handed to worker 1 is never answered).
    const late = Array.from({ length: 5 }, (_, i) => call(gw.url, key, 100 + i));
    let answeredLate = 0;
    for (const c of late) void c.then((s) => (answeredLate += s === 200 ? 1 : 0));
    await waitFor(() => answeredLate >= 4, { what: 'calls answered by worker 2' });
    // Then the node hangs: two calls stay in flight at it through the stop (worker 2's drain runs to its limit).
    await upstream.setMode('stallCalls');
    const atNode = upstream.callCount('eth_getBalance');
    const hanging = [call(gw.url, key, 200), call(gw.url, key, 201)];
    await waitFor(() => upstream.callCount('eth_getBalance') >= atNode + 2, { what: 'two calls in flight at the node' });

    // As operators do: SIGTERM to the whole process group.
    const stopAt = performance.now();
    process.kill(-(gw.child.pid as number), 'SIGTERM');
    const code = await new Promise<number | null>((resolve) => gw.child.once('exit', (c) => resolve(c)));
    const stopMs = performance.now() - stopAt;
    await gw.exited;
    await Promise.all([...late, ...hanging]);
    const lines = logLines(gw.output());
    const story = lines
      .filter((l) => /stop|drain|did not|took too long/.test(l.msg))
      .map((l) => JSON.stringify(l))
      .join('\n');
    const primary = lines.filter((l) => l.process === 'primary');
    const stopping = primary.find((l) => l.msg === 'stopping');
    const stopped = primary.find((l) => l.msg === 'stopped');
    assert.ok(stopping && stopped, `the primary logged its stop:\n${story}`);
    // The contract, on the primary's own clock: from its signal to the end of its last usage write.
    const primaryMs = stopped.time - stopping.time;
    t.diagnostic(`the primary's stop: ${primaryMs} ms by its log, exit ${Math.round(stopMs)} ms after SIGTERM (grace ${GRACE_MS} ms)`);
    assert.ok(primaryMs <= GRACE_MS, `the primary's stop took ${primaryMs} ms, more than server.shutdownGraceMs (${GRACE_MS} ms):\n${story}`);
    assert.ok(stopMs <= GRACE_MS + EXIT_SLACK_MS, `the primary exited ${Math.round(stopMs)} ms after SIGTERM:\n${story}`);
    assert.equal(code, 0, `a stop within the grace:\n${story}`);
    // Worker 1 was killed at the workers' deadline; worker 2 drained for half of it (less than half
    // the grace: the workers' deadline is the grace less the primary's tail), then stopped
    // (handing its last usage over; its exit may still be held past that, as by a DNS lookup of a
    // default node's name on a machine without DNS, and then it is killed too); the store's owner
    // wrote last.
    assert.ok(primary.some((l) => l.msg === 'a worker did not stop in time; killing it' && l.worker === 1), story);
    assert.ok(lines.some((l) => l.process === 'worker-2' && l.msg === 'requests still running after the drain; closing their connections' && (l.drainMs as number) < GRACE_MS / 2), story);
    const ends = lines.filter((l) => l.msg === 'stopped');
    assert.deepEqual(ends.map((l) => l.process), ['worker-2', 'primary'], story);

    await upstream.setMode('ok');
    gw = await spawnGateway({ env, seeded: true, timeoutMs: 120_000 });
    running.push(gw);
    try {
      // Every answered call is counted, those of worker 2 written by the primary at its stop; the two
      // calls cut at the drain limit are not (C57: nothing unanswered is counted).
      assert.deepEqual(await Promise.all(hanging).then((h) => h.filter((s) => s === 200)), [], 'the calls at the hung node were cut, not answered');
      assert.equal(await usageTotal(gw.url, auth), 12 + answeredLate, `the ${12 + answeredLate} answered calls, not the ${hanging.length} cut ones`);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  } finally {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
