import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { ended, ROOT, spawnGateway } from '../support/process.ts';
import { waitFor } from '../support/wait.ts';

// Logs an operator can use: JSON lines (readable ones on a terminal), no line per health check
// or scrape, every line of a request with its request id (upstream failures and refusals
// included, refusals at debug with the reason), no line twice, one line per start phase.

interface Line {
  level: number;
  msg: string;
  reqId?: string;
  [field: string]: unknown;
}

const call = (method: string, params: unknown[] = []) => ({ jsonrpc: '2.0', id: 1, method, params });

async function post(url: string, body: unknown, reqId: string): Promise<number> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': reqId }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  return res.status;
}

describe('log lines of requests', () => {
  let t: TestApp;
  let fake: FakeNode;
  let key: string;
  const lines = (): Line[] => t.logs.map((l) => JSON.parse(l) as Line);
  const of = (reqId: string) => lines().filter((l) => l.reqId === reqId);
  /** The lines of a request, each message at most once (no duplicated lines). */
  const once = (reqId: string) => {
    const mine = of(reqId);
    const msgs = mine.map((l) => l.msg);
    assert.equal(new Set(msgs).size, msgs.length, `a line repeated for ${reqId}: ${msgs.join(' | ')}`);
    return mine;
  };

  before(async () => {
    fake = await startFakeNode();
    await fake.setMode('status500');
    t = await startTestApp({ listen: true, env: { LOG_LEVEL: 'debug', UPSTREAM_AVALANCHE_FUJI: fake.url } });
    key = (await createKey(t.app, { networks: ['native-testnet', 'avalanche-fuji'] })).key;
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  test('every line is a JSON object with a numeric level and a message', () => {
    assert.ok(t.logs.length > 0);
    for (const l of lines()) {
      assert.equal(typeof l.level, 'number');
      assert.equal(typeof l.msg, 'string');
    }
  });

  test('health checks and scrapes leave no line, even at debug', async () => {
    for (const url of ['/health/live', '/health/ready', '/metrics']) {
      for (let i = 0; i < 3; i++) await t.app.inject({ method: 'GET', url, headers: { 'x-request-id': `probe-${url}-${i}` } });
    }
    assert.deepEqual(lines().filter((l) => String(l.reqId ?? '').startsWith('probe-')), []);
    // Other routes are still logged, with their request id.
    await t.app.inject({ method: 'GET', url: '/api/v1/networks', headers: { 'x-request-id': 'networks-1' } });
    assert.deepEqual(once('networks-1').map((l) => l.msg), ['incoming request', 'request completed']);
  });

  test('an upstream failure is logged with the request id of the call, each line once', async () => {
    assert.equal(await post(`${t.url}/v1/avalanche-fuji/${key}`, call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest']), 'up-fail-1'), 502);
    const mine = once('up-fail-1');
    const attempt = mine.find((l) => l.msg === 'upstream attempt failed');
    assert.equal(attempt?.reason, 'HTTP 500');
    assert.equal(attempt?.name, 'avalanche-fuji-0');
    const failed = mine.find((l) => l.msg.startsWith('upstream call failed'));
    assert.ok(failed, mine.map((l) => l.msg).join(' | '));
    assert.equal(failed.network, 'avalanche-fuji');
  });

  test('RPC refusals (401, 403, 429) are debug lines with the request id and the reason', async () => {
    assert.equal(await post(`${t.url}/v1/native-testnet/jk_live_00000000nosuchkeynosuchkeynosuchkeynosuchkey0000`, call('eth_blockNumber'), 'refused-401'), 401);
    const [k401] = once('refused-401');
    assert.deepEqual([k401?.level, k401?.msg, k401?.status, k401?.code], [20, 'rpc call refused', 401, -32001]);
    assert.match(String(k401?.reason), /API key/i);

    const narrow = (await createKey(t.app, { networks: ['ethereum'] })).key;
    assert.equal(await post(`${t.url}/v1/native-testnet/${narrow}`, call('eth_blockNumber'), 'refused-403'), 403);
    const [k403] = once('refused-403');
    assert.deepEqual([k403?.level, k403?.status, k403?.code, k403?.network], [20, 403, -32003, 'native-testnet']);
    assert.match(String(k403?.reason), /not authorized for network native-testnet/);

    const slow = (await createKey(t.app, { networks: ['avalanche-fuji'], rateLimit: 1 })).key;
    await post(`${t.url}/v1/avalanche-fuji/${slow}`, call('eth_blockNumber'), 'rate-1');
    assert.equal(await post(`${t.url}/v1/avalanche-fuji/${slow}`, call('eth_blockNumber'), 'refused-429'), 429);
    const [k429] = once('refused-429');
    assert.deepEqual([k429?.level, k429?.status, k429?.code], [20, 429, -32005]);
    // The key itself never shows.
    assert.ok(!t.logs.join('').includes(slow.slice(-20)));
  });

  test('REST refusals are debug lines with the request id and the reason', async () => {
    await t.app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: { 'x-request-id': 'rest-401' } });
    const refused = once('rest-401').find((l) => l.msg === 'request refused');
    assert.deepEqual([refused?.level, refused?.status, refused?.code], [20, 401, 'UNAUTHORIZED']);
    assert.equal(typeof refused?.reason, 'string');
  });

  test('a WebSocket keeps the request id of its upgrade: in the 101, on a refusal and on its messages’ lines', async () => {
    const wsUrl = t.url.replace('http', 'ws');
    const refusedStatus = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${wsUrl}/ws/native-testnet?apiKey=jk_live_00000000nosuchkeynosuchkeynosuchkeynosuchkey0000`, { headers: { 'x-request-id': 'ws-401' } });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => resolve(0));
    });
    assert.equal(refusedStatus, 401);
    assert.deepEqual(once('ws-401').map((l) => [l.msg, l.status]), [['websocket refused', 401]]);

    const ws = new WebSocket(`${wsUrl}/ws/avalanche-fuji?apiKey=${key}`, { headers: { 'x-request-id': 'ws-1' } });
    const upgradeId = await new Promise<string | undefined>((resolve, reject) => {
      let id: string | undefined;
      ws.once('upgrade', (res) => (id = res.headers['x-request-id'] as string | undefined));
      ws.once('open', () => resolve(id));
      ws.once('error', reject);
    });
    assert.equal(upgradeId, 'ws-1');
    const answer = new Promise<string>((resolve) => ws.once('message', (d: Buffer) => resolve(d.toString())));
    ws.send(JSON.stringify(call('eth_getBalance', ['0x0000000000000000000000000000000000000001', 'latest'])));
    assert.match(await answer, /-32000/);
    ws.close();
    assert.ok(of('ws-1').some((l) => l.msg.startsWith('upstream call failed')), 'the failed call of the connection carries its id');
  });
});

describe('a quiet console at info', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({});
  });
  after(async () => {
    await t?.close();
  });

  test('REST and static-file requests leave no line at info (they are debug lines)', async () => {
    for (const [url, id] of [['/api/v1/networks', 'rest-info-1'], ['/', 'static-info-1'], ['/docs', 'static-info-2'], ['/api/v1/nosuchroute', 'rest-info-2']] as const) {
      await t.app.inject({ method: 'GET', url, headers: { 'x-request-id': id } });
    }
    const mine = t.logs.map((l) => JSON.parse(l) as Line).filter((l) => String(l.reqId ?? '').includes('-info-'));
    assert.deepEqual(mine.map((l) => l.msg), []);
  });
});

/** Runs a few lines of TypeScript in a child process and returns what it printed. */
function run(code: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    void ended(child).then(() => resolve(out));
  });
}

describe('log formats', () => {
  const script = `import { createLogger } from './src/ops/logging.ts';
const log = createLogger('info', undefined, process.env.FORMAT);
log.info({ network: 'native-testnet', answering: 1, total: 2 }, 'native-testnet: 1 of 2 upstreams answer');
process.exit(0);`;

  test('pretty: readable lines written by pino-pretty (level name, message, fields below), even when exiting at once', async () => {
    const out = await run(script, { FORMAT: 'pretty' });
    assert.match(out, /INFO.*: native-testnet: 1 of 2 upstreams answer/);
    assert.match(out, /answering: 1/);
    assert.ok(!out.trimStart().startsWith('{'), out);
  });

  test('auto: JSON lines when stdout is not a terminal (a pipe, a log collector)', async () => {
    const out = await run(script, { FORMAT: 'auto' });
    const line = JSON.parse(out.trim().split('\n').pop() ?? '') as Line;
    assert.equal(line.msg, 'native-testnet: 1 of 2 upstreams answer');
    assert.equal(line.level, 30);
  });
});

describe('start lines', { concurrency: true }, () => {
  test('one line per phase: data folder and where the secrets are, storage, listening address with /docs; a hangup (SIGHUP: the terminal closed) stops it cleanly', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-logs-'));
    const gw = await spawnGateway({ env: { DATA_DIR: dir, LOG_FORMAT: 'json' } });
    try {
      const lines = gw
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
      const data = lines.filter((l) => l.msg === `data folder ${dir}`);
      assert.equal(data.length, 1, 'the data folder, once');
      assert.equal(data[0]?.secrets, `generated once into ${path.join(dir, 'secrets.json')} (mode 0600)`);
      const storage = lines.filter((l) => l.msg.startsWith('storage ready'));
      assert.equal(storage.length, 1);
      assert.equal(storage[0]?.storage, 'pglite');
      assert.match(storage[0]?.msg ?? '', /embedded PGlite/);
      const listening = lines.filter((l) => l.msg === 'Junction is listening');
      assert.equal(listening.length, 1);
      assert.equal(listening[0]?.address, gw.url);
      assert.match(String(listening[0]?.docs), /^http:\/\/localhost:\d+\/docs$/);
      // After the first probe round, one line sums up the networks (whatever this machine reaches:
      // the shipped upstreams are public nodes), with the lists for machines; then the banner.
      const summary = await waitFor(
        () => gw.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line).find((l) => /^(16 networks: 16 answering|\d+ of 16 networks answering)/.test(l.msg)),
        { what: 'the summary line after the first probes', timeoutMs: 30_000 },
      );
      assert.equal((summary.answering as string[]).length + (summary.down as string[]).length, 16);
      assert.doesNotMatch(gw.output(), /upstreams answer"/, 'no line per network at info');
      await waitFor(() => gw.output().includes('Junction is ready: dashboard'), { what: 'the banner' });
      // Node's default for SIGHUP is to die on the spot, without the last usage flush.
      gw.child.kill('SIGHUP');
      const { code, signal } = await gw.exited;
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, gw.output().slice(-1500));
      assert.match(gw.output(), /"signal":"SIGHUP"[^\n]*"msg":"stopping"/);
      assert.match(gw.output(), /"msg":"stopped"/);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('under --devnet: the chains at info; the dev accounts with their keys and the faucet wallets in DATA_DIR/devnet/accounts.json', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'junction-logs-'));
    // Two chains instead of sixteen: the other networks are left out of this run.
    const keep = new Set(['native-testnet', 'ethereum-sepolia']);
    const slugs = ['native-mainnet', 'native-testnet', 'ethereum', 'ethereum-sepolia', 'polygon', 'polygon-amoy', 'bsc', 'bsc-testnet', 'arbitrum', 'arbitrum-sepolia', 'optimism', 'optimism-sepolia', 'base', 'base-sepolia', 'avalanche', 'avalanche-fuji'];
    const config = path.join(dir, 'two-chains.json');
    writeFileSync(config, JSON.stringify({ networks: slugs.filter((s) => !keep.has(s)).map((slug) => ({ slug, enabled: false })), whaleAlerts: { networks: ['native-testnet'] } }));
    const gw = await spawnGateway({ args: ['--devnet', '--config', config], env: { DATA_DIR: dir, LOG_FORMAT: 'json' }, timeoutMs: 120_000, seeded: true });
    try {
      const lines = gw
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
      const chains = lines.find((l) => l.msg.startsWith('devnet chains are up'));
      const addresses = (chains?.chains ?? {}) as Record<string, { http: string; ws: string }>;
      assert.deepEqual(Object.keys(addresses).sort(), [...keep].sort());
      for (const u of Object.values(addresses)) {
        assert.match(u.http, /^http:\/\/127\.0\.0\.1:\d+/);
        assert.match(u.ws, /^ws:\/\/127\.0\.0\.1:\d+/);
      }
      // The accounts with their private keys are in a file of the data folder, never at info.
      const file = path.join(dir, 'devnet', 'accounts.json');
      assert.equal(lines.find((l) => l.msg.startsWith('devnet dev accounts'))?.file, file);
      assert.doesNotMatch(gw.output(), /privateKey|0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80/);
      const details = JSON.parse(readFileSync(file, 'utf8')) as { accounts: Array<{ address: string; privateKey: string }>; faucetWallets: Record<string, string> };
      const accounts = details.accounts;
      assert.equal(accounts.length, 10);
      assert.deepEqual(accounts[0], {
        index: 0,
        address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
        privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
      });
      const wallets = details.faucetWallets;
      assert.deepEqual(Object.keys(wallets).sort(), [...keep].sort());
      for (const a of Object.values(wallets)) assert.match(a, /^0x[0-9a-fA-F]{40}$/);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
