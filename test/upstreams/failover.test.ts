// Upstream failures behind the gateway (C22, C26): a fake node that fails on demand in front of a
// real devnet chain, then a gateway with nothing but failing fakes.
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { after, before, beforeEach, describe, test } from 'node:test';
import { type Hex, keccak256, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeMode, type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { waitFor } from '../support/wait.ts';

const NETWORK = 'native-testnet';
const CHAIN_ID_HEX = '0x33'; // 51
/** The fake claims a head far ahead of the devnet chain, so it is never the laggard unless told. */
const FAKE_HEAD = 1_000_000;
const REQUEST_TIMEOUT_MS = 500;
const TOTAL_TIMEOUT_MS = 2_000;
const MARGIN_MS = 1_500; // generous: the point is "bounded", not "fast"

interface Answer {
  status: number;
  text: string;
  body: { jsonrpc?: string; id?: unknown; result?: unknown; error?: { code: number; message: string; data?: Record<string, unknown> } };
}

async function post(url: string, payload: unknown): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as Answer['body'] };
}

const call = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });

interface UpstreamReport {
  index: number;
  healthy: boolean;
  head: number | null;
  lag: number | null;
  lastError?: string;
}

/** `GET /health/ready`: its status, raw body and this network's upstream report. */
async function readiness(t: TestApp): Promise<{ status: number; text: string; upstreams: UpstreamReport[] }> {
  const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
  const net = res.json<{ networks: Record<string, { upstreams?: UpstreamReport[] }> }>().networks[NETWORK];
  return { status: res.statusCode, text: res.body, upstreams: net?.upstreams ?? [] };
}

/** The pool's debug lines about failed attempts, written since `mark`. */
function failedAttempts(t: TestApp, mark: number): Array<{ upstream: number; reason: string; methods: string[] }> {
  return t.logs.slice(mark).flatMap((line) => {
    try {
      const o = JSON.parse(line) as { msg?: string; upstream?: number; reason?: string; methods?: string[] };
      return o.msg === 'upstream attempt failed' ? [{ upstream: o.upstream ?? -1, reason: o.reason ?? '', methods: o.methods ?? [] }] : [];
    } catch {
      return [];
    }
  });
}

describe('a failing upstream in front of a devnet chain', () => {
  let t: TestApp;
  let fake: FakeNode;
  let rpcUrl: string;
  let chainUrl: string;
  const rpc = (payload: unknown) => post(rpcUrl, payload);
  /** Straight to the devnet chain, bypassing the gateway. */
  const node = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const a = await post(chainUrl, call(method, params));
    if (a.body.error) throw new Error(`${method}: ${a.body.error.message}`);
    return a.body.result as T;
  };

  before(async () => {
    fake = await startFakeNode({ head: FAKE_HEAD });
    t = await startTestApp({
      devnet: true,
      devnetNetworks: [NETWORK],
      listen: true,
      // debug: the pool logs each failed attempt, which shows the fake was tried first.
      env: { UPSTREAM_NATIVE_TESTNET: fake.url, LOG_LEVEL: 'debug' },
      // No response cache: every call here must reach the pool, whose failover is under test.
      // Broadcast off: these cases pin the one-node-after-another path and its maybeSent rule
      // (C26); the broadcast is tested in test/upstreams/broadcast.test.ts.
      overrides: { rpc: { requestTimeoutMs: REQUEST_TIMEOUT_MS, totalTimeoutMs: TOTAL_TIMEOUT_MS, healthIntervalMs: 200, broadcastTransactions: false }, cache: { enabled: false } },
    });
    chainUrl = t.devnet?.upstreams[NETWORK]?.http ?? '';
    const { key } = await createKey(t.app, { networks: [NETWORK] });
    rpcUrl = `${t.url}/v1/${NETWORK}/${key}`;
    // Test apps probe a network's upstreams from its first use on.
    assert.equal((await rpc(call('eth_blockNumber'))).status, 200);
  });

  after(async () => {
    await t?.close();
    await fake?.close();
  });

  /** Puts the fake back in `ok` and waits until a health round has seen it healthy and ahead. */
  async function fakeHealthy(): Promise<void> {
    await fake.setMode('ok');
    fake.setHead(FAKE_HEAD);
    await waitFor(async () => {
      const u = (await readiness(t)).upstreams[0];
      return u?.healthy === true && u.head === FAKE_HEAD && u.lastError === undefined;
    }, { what: 'the fake to be healthy again' });
  }

  /**
   * Switches the fake to `mode` and runs `send` at once. A health probe may notice the failure
   * first and the call then goes straight to the chain; that proves nothing, so it is repeated
   * until the log shows the fake was tried first for `method` within the call.
   */
  async function throughFailingFake<T>(mode: FakeMode, method: string, send: () => Promise<T>): Promise<{ value: T; reason: string }> {
    for (let i = 0; i < 5; i++) {
      await fakeHealthy();
      const mark = t.logs.length;
      await fake.setMode(mode);
      const value = await send();
      const attempt = failedAttempts(t, mark).find((a) => a.upstream === 0 && a.methods.includes(method));
      if (attempt) return { value, reason: attempt.reason };
    }
    throw new Error(`the fake was never tried first for ${method} in mode ${mode}`);
  }

  test('the harness puts the fake first and the devnet chain second, and a healthy fake answers', async () => {
    assert.deepEqual(
      t.config.networks.find((n) => n.slug === NETWORK)?.upstreams.map((u) => u.http),
      [fake.url, chainUrl],
    );
    await fakeHealthy();
    const before = fake.callCount('eth_chainId');
    const a = await rpc(call('eth_chainId'));
    assert.equal(a.status, 200);
    // The fake answers every method but eth_blockNumber with an echo: that is how we tell who answered.
    assert.deepEqual(a.body.result, { method: 'eth_chainId', params: [] });
    assert.equal(fake.callCount('eth_chainId'), before + 1);
  });

  // `stallCalls` answers its probes: a hung node that looks healthy, the hedge tests' subject.
  const reasons: Record<Exclude<FakeMode, 'ok' | 'stallCalls'>, RegExp> = {
    refuse: /^ECONNREFUSED$/,
    stall: new RegExp(`^timeout after ${REQUEST_TIMEOUT_MS} ms$`),
    status500: /^HTTP 500$/,
    status429: /^HTTP 429$/,
    garbage: /^invalid body \(HTTP 200\)$/,
  };
  for (const [mode, reason] of Object.entries(reasons) as Array<[Exclude<FakeMode, 'ok' | 'stallCalls'>, RegExp]>) {
    test(`requests keep succeeding from the chain while the first upstream is in mode ${mode}`, async () => {
      const { value, reason: seen } = await throughFailingFake(mode, 'eth_chainId', () => rpc(call('eth_chainId', [], 'x')));
      assert.match(seen, reason);
      assert.equal(value.status, 200);
      assert.deepEqual(value.body, { jsonrpc: '2.0', id: 'x', result: CHAIN_ID_HEX });
      // And the next ones too, now that the fake is cooling down.
      for (let i = 0; i < 3; i++) {
        const a = await rpc(call('eth_chainId', [], i));
        assert.equal(a.status, 200);
        assert.equal(a.body.result, CHAIN_ID_HEX);
      }
      const ready = await readiness(t);
      assert.equal(ready.status, 200, 'a failing upstream does not make the gateway unready (C3)');
      assert.equal(ready.upstreams[0]?.healthy, false);
      assert.equal(ready.upstreams[1]?.healthy, true);
    });
  }

  test('a healthy upstream lagging far behind the head is skipped after a health round, and used again once caught up', async () => {
    await fakeHealthy();
    // Push the chain well past maxLagBlocks (5), then have the fake report an old head.
    await node('anvil_mine', ['0x64']);
    const chainHead = Number.parseInt(await node<string>('eth_blockNumber'), 16);
    assert.ok(chainHead >= 100);
    fake.setHead(1);
    await waitFor(async () => {
      const u = (await readiness(t)).upstreams[0];
      return u?.head === 1 && u.healthy && (u.lag ?? 0) >= chainHead - 1;
    }, { what: 'the health round to see the fake lagging' });
    const before = fake.callCount('eth_chainId');
    const mark = t.logs.length;
    for (let i = 0; i < 3; i++) {
      const a = await rpc(call('eth_chainId', [], i));
      assert.equal(a.status, 200);
      assert.equal(a.body.result, CHAIN_ID_HEX);
    }
    // On failure, what the pool saw and logged meanwhile (this has failed rarely on a busy machine).
    const asked = fake.callCount('eth_chainId') - before;
    if (asked !== 0) assert.fail(`the lagging fake was asked ${asked} time(s); upstreams now ${JSON.stringify((await readiness(t)).upstreams)}; logs ${t.logs.slice(mark).join('').slice(0, 4000)}`);

    fake.setHead(FAKE_HEAD);
    await waitFor(async () => (await readiness(t)).upstreams[0]?.lag === 0, { what: 'the fake to catch up' });
    // Caught up, it is in line again; first once its probe latency is in the chain's class (on a
    // busy machine a round or two later), so the call is repeated until the fake answers it.
    await waitFor(async () => isDeepStrictEqual((await rpc(call('eth_chainId'))).body.result, { method: 'eth_chainId', params: [] }), {
      what: 'the caught-up fake to be asked again',
    });
  });

  /** A signed transfer from a dev account at its current nonce (read from the chain itself). */
  async function signedTransfer(): Promise<{ raw: Hex; hash: Hex; from: Hex; nonce: number }> {
    const dev = t.devnet?.accounts[1];
    assert.ok(dev);
    const account = privateKeyToAccount(dev.privateKey);
    const nonce = Number.parseInt(await node<string>('eth_getTransactionCount', [account.address, 'pending']), 16);
    const gasPrice = BigInt(await node<string>('eth_gasPrice'));
    const raw = await account.signTransaction({
      type: 'eip1559',
      chainId: 51,
      nonce,
      to: t.devnet?.accounts[9]?.address,
      value: parseEther('0.01'),
      gas: 21_000n,
      maxFeePerGas: gasPrice * 2n,
      maxPriorityFeePerGas: 1n,
    });
    return { raw, hash: keccak256(raw), from: account.address, nonce };
  }

  test('eth_sendRawTransaction is not retried on the second node after a stall: -32000, HTTP 502, maybeSent', async () => {
    await fakeHealthy();
    const tx = await signedTransfer();
    const sentBefore = fake.callCount('eth_sendRawTransaction');
    // The stalled attempt needs REQUEST_TIMEOUT_MS to fail: no health probe can mark the fake down first.
    await fake.setMode('stall');
    const a = await rpc(call('eth_sendRawTransaction', [tx.raw], 7));
    assert.equal(a.status, 502);
    assert.equal(a.body.id, 7);
    assert.equal(a.body.error?.code, -32000);
    assert.equal(a.body.error?.data?.maybeSent, true);
    assert.equal(fake.callCount('eth_sendRawTransaction'), sentBefore + 1, 'the fake received it');

    // The chain never saw it: not in its pool, not mined a block later.
    const nonceNow = async (tag: string) => Number.parseInt(await node<string>('eth_getTransactionCount', [tx.from, tag]), 16);
    assert.equal(await nonceNow('pending'), tx.nonce);
    assert.equal(await node('eth_getTransactionByHash', [tx.hash]), null);
    // The native devnet mines every second: wait for the next block.
    const head = async () => Number.parseInt(await node<string>('eth_blockNumber'), 16);
    const mined = await head();
    await waitFor(async () => (await head()) > mined, { intervalMs: 100, what: 'the next native block' });
    assert.equal(await nonceNow('latest'), tx.nonce);
    assert.equal(await nonceNow('pending'), tx.nonce);
  });

  test('eth_sendRawTransaction moves on to the second node after connection refused, and the transaction lands', async () => {
    let tx: Awaited<ReturnType<typeof signedTransfer>> | undefined;
    const { value: a, reason } = await throughFailingFake('refuse', 'eth_sendRawTransaction', async () => {
      tx = await signedTransfer();
      return rpc(call('eth_sendRawTransaction', [tx.raw], 8));
    });
    assert.equal(reason, 'ECONNREFUSED');
    assert.ok(tx);
    assert.equal(a.status, 200, a.text);
    assert.equal(a.body.result, tx.hash);
    // Its receipt, read back through the gateway (the fake is cooling down or refusing).
    const receipt = await waitFor(async () => {
      const r = await rpc(call('eth_getTransactionReceipt', [tx?.hash]));
      return r.body.result as { status?: string } | null;
    }, { intervalMs: 250, what: 'the receipt' }); // a free key: 100 requests a minute
    assert.equal(receipt.status, '0x1');
  });

  test('no upstream address appears in the logs or in /health/ready', async () => {
    const ready = await readiness(t);
    for (const addr of [`127.0.0.1:${fake.port}`, new URL(chainUrl).host]) {
      assert.ok(!ready.text.includes(addr), `health names ${addr}`);
      assert.ok(!t.logs.some((l) => l.includes(addr)), `a log line names ${addr}`);
    }
  });
});

describe('a network whose upstreams all fail (only fakes)', () => {
  let t: TestApp;
  let a: FakeNode;
  let b: FakeNode;
  let rpcUrl: string;
  const bodies: string[] = [];
  const rpc = async (payload: unknown) => {
    const res = await post(rpcUrl, payload);
    bodies.push(res.text);
    return res;
  };
  const ATTEMPT_MS = 1_500; // one stalled attempt eats most of the total; the second gets the rest

  before(async () => {
    [a, b] = await Promise.all([startFakeNode({ head: 10 }), startFakeNode({ head: 10 })]);
    t = await startTestApp({
      listen: true,
      env: {
        UPSTREAM_NATIVE_TESTNET: `http://user:secret@127.0.0.1:${a.port}/secretpath,http://127.0.0.1:${b.port}`,
        LOG_LEVEL: 'debug',
      },
      overrides: { rpc: { requestTimeoutMs: ATTEMPT_MS, totalTimeoutMs: TOTAL_TIMEOUT_MS, healthIntervalMs: 200, broadcastTransactions: false }, cache: { enabled: false } },
    });
    rpcUrl = `${t.url}/v1/${NETWORK}/${(await createKey(t.app, { networks: [NETWORK] })).key}`;
    // Test apps probe a network's upstreams from its first use on.
    assert.equal((await post(rpcUrl, call('eth_chainId'))).status, 200);
  });

  after(async () => {
    await t?.close();
    await Promise.all([a?.close(), b?.close()]);
  });

  const both = (mode: FakeMode) => Promise.all([a.setMode(mode), b.setMode(mode)]);

  // While every upstream is known to be down, calls fail at once without reaching a node: each
  // case starts from a network whose upstreams both answer again (seen by a health probe).
  beforeEach(async () => {
    await both('ok');
    await waitFor(async () => {
      const res = await t.app.inject({ method: 'GET', url: '/health/ready' });
      return res.json<{ networks: Record<string, { status: string }> }>().networks[NETWORK]?.status === 'up';
    }, { what: 'both upstreams answering' });
  });

  test('the credential and path of an upstream URL are used (so their absence below means something)', async () => {
    await both('ok');
    const res = await rpc(call('eth_chainId'));
    assert.equal(res.status, 200);
    assert.equal(a.last?.path, '/secretpath');
    assert.equal(a.last?.headers.authorization, `Basic ${Buffer.from('user:secret').toString('base64')}`);
  });

  test('both refuse connections: -32000 with HTTP 502, quickly', async () => {
    await both('refuse');
    const t0 = Date.now();
    const res = await rpc(call('eth_chainId', [], 'r1'));
    const elapsed = Date.now() - t0;
    assert.equal(res.status, 502);
    assert.equal(res.body.id, 'r1');
    assert.equal(res.body.error?.code, -32000);
    assert.equal(res.body.error?.data?.maybeSent, false);
    assert.ok(elapsed < TOTAL_TIMEOUT_MS, `took ${elapsed} ms`);
  });

  test('both stall: -32000 with HTTP 502 within the total timeout, both tried', async () => {
    await both('stall');
    const before = [a.callCount('eth_getBalance'), b.callCount('eth_getBalance')];
    const t0 = Date.now();
    const res = await rpc(call('eth_getBalance', ['0x0000000000000000000000000000000000000000', 'latest'], 2));
    const elapsed = Date.now() - t0;
    assert.equal(res.status, 502);
    assert.equal(res.body.id, 2);
    assert.equal(res.body.error?.code, -32000);
    assert.ok(elapsed < TOTAL_TIMEOUT_MS + MARGIN_MS, `took ${elapsed} ms, total timeout ${TOTAL_TIMEOUT_MS} ms`);
    // Two full attempts (2 x 1.5 s) would overrun the total: the second got what was left.
    assert.deepEqual([a.callCount('eth_getBalance') - (before[0] ?? 0), b.callCount('eth_getBalance') - (before[1] ?? 0)], [1, 1]);
  });

  test('a stalled eth_sendRawTransaction answers maybeSent and is not sent to the other node', async () => {
    await both('stall');
    const before = a.callCount('eth_sendRawTransaction') + b.callCount('eth_sendRawTransaction');
    const res = await rpc(call('eth_sendRawTransaction', ['0x02f86b'], 3));
    assert.equal(res.status, 502);
    assert.equal(res.body.error?.code, -32000);
    assert.equal(res.body.error?.data?.maybeSent, true);
    assert.equal(a.callCount('eth_sendRawTransaction') + b.callCount('eth_sendRawTransaction'), before + 1);
  });

  test('a batch when one stalls and the other answers 500: HTTP 502, every item -32000 with its id', async () => {
    await Promise.all([a.setMode('stall'), b.setMode('status500')]);
    const res = await rpc([call('eth_chainId', [], 1), call('eth_blockNumber', [], 'two')]);
    assert.equal(res.status, 502);
    const items = res.body as unknown as Array<{ id: unknown; error?: { code: number } }>;
    assert.deepEqual(
      items.map((i) => [i.id, i.error?.code]),
      [
        [1, -32000],
        ['two', -32000],
      ],
    );
  });

  test('no upstream URL, credential or path reaches a response body, a log line or /health/ready', async () => {
    await both('refuse');
    await rpc(call('eth_chainId'));
    const ready = await t.app.inject({ method: 'GET', url: '/health/ready' });
    assert.equal(ready.statusCode, 200, 'no upstream answering does not make the gateway unready (C3)');
    const report = ready.json<{ networks: Record<string, { status: string; upstreams: UpstreamReport[] }> }>().networks[NETWORK];
    assert.equal(report?.status, 'down');
    assert.ok(report?.upstreams.every((u) => typeof u.lastError === 'string'));

    const secrets = ['secret', `127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`, `localhost:${a.port}`, `localhost:${b.port}`];
    const places: Array<[string, string]> = [
      ...bodies.map((body, i): [string, string] => [`response ${i}`, body]),
      ['/health/ready', ready.body],
      ...t.logs.map((line, i): [string, string] => [`log line ${i}`, line]),
    ];
    assert.ok(t.logs.some((l) => l.includes('upstream attempt failed')), 'the failures were logged');
    for (const [where, text] of places) {
      for (const s of secrets) assert.ok(!text.includes(s), `${where} contains "${s}": ${text.slice(0, 300)}`);
    }
  });
});
