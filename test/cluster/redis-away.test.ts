// C48 with C56: with WORKERS and REDIS_URL, the workers' limits are Redis'; when Redis goes away
// each worker enforces them in the primary's memory, one count for the machine, not one per
// worker (src/metering/shared-limiter.ts). Redis here is killed for real, under a running gateway.
// slow: a real primary and its workers, started as `node dist/main.js` is
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startFakeNode } from '../support/fake-node.ts';
import { callAlone, type GatewayProcess, killLeft, logLines, postJson, spawnGateway } from '../support/process.ts';
import { hasRedisServer, startOwnRedis } from '../support/redis-server.ts';
import { waitFor } from '../support/wait.ts';

const running: GatewayProcess[] = [];
after(() => killLeft(running));
const skip = hasRedisServer() ? false : 'no redis-server binary (apt-get install -y redis-server)';

test('WORKERS=2 on Redis, Redis killed: a key limited to 10 a minute gets 10 in all from the machine, not 10 from each worker (C48, C56)', { skip }, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'junction-workers-redis-'));
  const upstream = await startFakeNode({ head: 0x1234 });
  const redis = await startOwnRedis();
  const configFile = path.join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { free: { requestsPerMinute: null, dailyLimit: null, monthlyComputeUnits: null } } }));
  const env = { DATA_DIR: path.join(dir, 'data'), UPSTREAM_NATIVE_MAINNET: upstream.url, GATEWAY_CONFIG: configFile, WORKERS: '2', REDIS_URL: redis.url };
  try {
    const gw = await spawnGateway({ env, detached: true, seeded: true, timeoutMs: 180_000 });
    running.push(gw);
    const listening = () => logLines(gw.output()).filter((x) => x.msg === 'Junction is listening' && x.worker !== undefined);
    await waitFor(() => listening().length === 2, { timeoutMs: 120_000, what: 'two workers listening' });
    const reg = (await postJson(`${gw.url}/api/v1/auth/register`, { email: 'workers-redis@example.com', password: 'long enough pw', name: 'W' })) as { tokens: { accessToken: string } };
    const key = ((await postJson(`${gw.url}/api/v1/api-keys`, { name: 'ten', rateLimit: 10 }, { authorization: `Bearer ${reg.tokens.accessToken}` })) as { key: string }).key;
    // Two through Redis (one on each worker: connections are handed out in turn).
    assert.deepEqual(await Promise.all([callAlone(gw.url, key, 1), callAlone(gw.url, key, 2)]), [200, 200]);

    await redis.kill();
    // 30 at once, each on its own connection, so over both workers: 8 more in this minute.
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => callAlone(gw.url, key, 10 + i, 15_000)));
    const count = (s: number | string) => statuses.filter((x) => x === s).length;
    t.diagnostic(`with Redis away: ${count(200)} admitted, ${count(429)} refused`);
    assert.deepEqual([count(200), count(429)], [8, 22], statuses.join(' '));
    const lines = logLines(gw.output());
    const workersAway = new Set(lines.filter((l) => /Redis does not answer/.test(l.msg)).map((l) => l.worker ?? l.pid));
    assert.equal(workersAway.size, 2, 'both workers took part and found Redis away');

    gw.child.kill('SIGTERM');
    await gw.exited;
  } finally {
    await redis.close();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
