// One RPC pipeline for HTTP and WebSocket (C10, C23), the response cache in its dispatch step
// (C44), and the heads stream of the upstreams module: on a devnet chain and a counting fake node.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { createKey, startTestApp, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { connect, type Head, type Json, tryUpgrade, wsAddress } from '../support/ws.ts';

let t: TestApp;
let fake: FakeNode;

before(async () => {
  fake = await startFakeNode();
  t = await startTestApp({
    devnet: true,
    devnetNetworks: ['native-mainnet'],
    listen: true,
    env: { UPSTREAM_NATIVE_TESTNET: fake.url },
  });
});
after(async () => {
  await t?.close();
  await fake?.close();
});

const call = (method: string, id: unknown, params: unknown[] = []) => ({ jsonrpc: '2.0', id, method, params });

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Json | Json[] };
}

describe('one pipeline for every transport (C23)', () => {
  test('a batch that does not fit the key rate is refused whole, on HTTP and on the WebSocket alike', async () => {
    const http = await createKey(t.app, { rateLimit: 2 });
    const res = await post(`/v1/native-mainnet/${http.key}`, [call('eth_chainId', 1), call('eth_chainId', 2), call('eth_chainId', 3)]);
    assert.equal(res.status, 429);
    assert.ok(!Array.isArray(res.json), 'one error for the whole batch');
    assert.equal(res.json.error?.code, -32005);

    const ws = await createKey(t.app, { rateLimit: 2 });
    const client = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${ws.key}`));
    try {
      const answer = await client.send(JSON.stringify([call('eth_subscribe', 1, ['newHeads']), call('eth_chainId', 2), call('eth_chainId', 3)]));
      assert.ok(!Array.isArray(answer), `one error for the whole batch, got ${JSON.stringify(answer)}`);
      assert.equal(answer.error?.code, -32005);
      // Nothing of it ran: no subscription was made, so no notification ever arrives, and the
      // key's two requests are still there for the next message.
      const chainId = await client.call('eth_chainId');
      assert.equal(chainId.result, '0x32');
      assert.equal(client.messages.filter((m) => m.method === 'eth_subscription').length, 0);
    } finally {
      await client.close();
    }
  });

  test('one batch of more eth_subscribe calls than a connection may hold gets exactly the limit', async () => {
    const { key } = await createKey(t.app);
    const max = t.config.ws.plans.free.subscriptionsPerConnection as number;
    const client = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${key}`));
    try {
      const batch = Array.from({ length: max + 10 }, (_, i) => call('eth_subscribe', i, ['newHeads']));
      client.ws.send(JSON.stringify(batch));
      const answer = (await client.next((m) => Array.isArray(m))) as unknown as Json[];
      assert.equal(answer.length, max + 10);
      assert.equal(answer.filter((a) => typeof a.result === 'string').length, max);
      assert.equal(answer.filter((a) => a.error?.code === -32005).length, 10);
      // And one more on its own is refused too: the slots are really taken.
      assert.equal((await client.call('eth_subscribe', ['newHeads'])).error?.code, -32005);
    } finally {
      await client.close();
    }
  });

  test('WebSocket batch items that are not objects, nested arrays included, are -32600 in place', async () => {
    const { key } = await createKey(t.app);
    const client = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${key}`));
    try {
      client.ws.send(JSON.stringify([[call('eth_chainId', 1), call('eth_chainId', 2)], 7, 'x', call('eth_chainId', 'ok')]));
      const answer = (await client.next((m) => Array.isArray(m))) as unknown as Json[];
      assert.deepEqual(
        answer.map((a) => a.error?.code ?? a.result),
        [-32600, -32600, -32600, '0x32'],
      );
      assert.equal(answer[3]?.id, 'ok');
    } finally {
      await client.close();
    }
  });

  test('the WebSocket reads no HTTP status: a key revoked meanwhile is told why, then the connection closes 1008', async () => {
    const k = await createKey(t.app);
    const client = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${k.key}`));
    const revoke = await t.app.inject({ method: 'POST', url: `/api/v1/api-keys/${k.id}/revoke`, headers: k.user.auth, payload: {} });
    assert.equal(revoke.statusCode, 200);
    const answer = await client.call('eth_chainId').catch(() => undefined);
    if (answer) assert.equal(answer.error?.code, -32002);
    assert.equal((await client.closed).code, 1008);
  });
});

describe('the response cache in the dispatch step (C44)', () => {
  test('eth_chainId from memory carries X-Cache HIT and the caller own id, and is metered like a miss', async () => {
    const { key } = await createKey(t.app);
    const before = fake.callCount('eth_chainId');
    const a = await post(`/v1/native-testnet/${key}`, call('eth_chainId', 1));
    const b = await post(`/v1/native-testnet/${key}`, call('eth_chainId', '12345678901234567890'));
    const c = await post(`/v1/native-testnet/${key}`, `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"eth_chainId","params":[]}`);
    assert.equal(fake.callCount('eth_chainId'), before + 1, 'one upstream call for three answers');
    assert.equal(a.headers.get('x-cache'), 'MISS');
    assert.equal(b.headers.get('x-cache'), 'HIT');
    assert.equal((b.json as Json).id, '12345678901234567890');
    assert.deepEqual((b.json as Json).result, (a.json as Json).result);
    assert.equal(c.headers.get('x-cache'), 'HIT');
    // Metered as usual: each answer took one request from the window.
    const remaining = [a, b, c].map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    assert.deepEqual([remaining[0]! - remaining[1]!, remaining[1]! - remaining[2]!], [1, 1]);
  });

  test('every answer says whether memory gave it: a batch all from memory HIT, one a node helped with MISS, uncacheable calls and refusals MISS', async () => {
    const { key } = await createKey(t.app);
    const url = `/v1/native-testnet/${key}`;
    await post(url, call('eth_chainId', 1));
    await post(url, call('net_version', 2));
    const both = await post(url, [call('eth_chainId', 3), call('net_version', 4)]);
    assert.equal(both.status, 200);
    assert.equal(both.headers.get('x-cache'), 'HIT');
    const mixed = await post(url, [call('eth_chainId', 5), call('eth_blockNumber', 6)]);
    assert.equal(mixed.headers.get('x-cache'), 'MISS');
    assert.equal((await post(url, call('eth_sendRawTransaction', 7, ['0x02']))).headers.get('x-cache'), 'MISS');
    assert.equal((await post(url, call('eth_accounts', 8))).headers.get('x-cache'), 'MISS');
    assert.equal((await post(`/v1/native-testnet/${key.slice(0, -4)}AAAA`, call('eth_chainId', 9))).headers.get('x-cache'), 'MISS');
  });

  test('an answer from memory is returned at once, not as a promise: a key in memory and limits in process await nothing', async () => {
    const { key } = await createKey(t.app);
    const network = t.app.parts.networks.bySlug('native-testnet');
    assert.ok(network);
    const input = (method: string, id: number) => ({ network, apiKey: key, body: Buffer.from(JSON.stringify(call(method, id))), ip: '127.0.0.1', origin: undefined, authorization: undefined, requestId: `sync-${id}` });
    const { pipeline } = t.app.parts;
    // The first call looks the key up in storage (and may ask the node): that one waits.
    const first = pipeline.handle(input('eth_chainId', 1));
    assert.ok(first instanceof Promise);
    const result = (JSON.parse(String((await first).body)) as Json).result;
    const hit = pipeline.handle(input('eth_chainId', 2));
    assert.ok(!(hit instanceof Promise), 'answered at once');
    assert.equal(hit.cache, 'HIT');
    assert.equal(hit.status, 200);
    assert.deepEqual(JSON.parse(String(hit.body)), { jsonrpc: '2.0', id: 2, result });
    assert.ok(Number(hit.headers?.['x-ratelimit-remaining']) >= 0, 'metered: the limit headers are there');
    // A call the node answers still waits for it.
    const forwarded = pipeline.handle(input('eth_blockNumber', 3));
    assert.ok(forwarded instanceof Promise);
    assert.equal((await forwarded).status, 200);
  });

  test('C12: a key limited to 10 a minute gets exactly 10 answers from memory of 31 calls, 30 of them fired at once', async () => {
    const { key } = await createKey(t.app, { rateLimit: 10 });
    // The first call puts the key in memory (and eth_chainId in the cache): the 30 after it take the path that awaits nothing.
    assert.equal((await post(`/v1/native-testnet/${key}`, call('eth_chainId', 0))).status, 200);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => post(`/v1/native-testnet/${key}`, call('eth_chainId', i + 1))));
    const ok = answers.filter((a) => a.status === 200);
    assert.equal(ok.length, 9);
    assert.ok(ok.every((a) => a.headers.get('x-cache') === 'HIT'));
    const refused = answers.filter((a) => a.status === 429);
    assert.equal(refused.length, 21);
    assert.ok(refused.every((a) => (a.json as Json).error?.code === -32005));
  });

  test('identical concurrent reads share one upstream call, each answered under its own id', async () => {
    const { key } = await createKey(t.app);
    const hash = `0x${'ab'.repeat(32)}`;
    fake.setDelay(300);
    try {
      const before = fake.callCount('eth_getBlockByHash');
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post(`/v1/native-testnet/${key}`, call('eth_getBlockByHash', `r${i}`, [hash, false]))));
      assert.equal(fake.callCount('eth_getBlockByHash'), before + 1);
      assert.deepEqual(answers.map((r) => (r.json as Json).id), Array.from({ length: 10 }, (_, i) => `r${i}`));
    } finally {
      fake.setDelay(0);
    }
  });

  test('an old block by hash on the devnet is served from memory the second time, in a batch too', async () => {
    const { key } = await createKey(t.app);
    const url = `/v1/native-mainnet/${key}`;
    const block = (await post(url, call('eth_getBlockByNumber', 1, ['0x1', false]))).json as Json<Head>;
    const hash = block.result.hash;
    const first = await post(url, call('eth_getBlockByHash', 1, [hash, false]));
    const second = await post(url, call('eth_getBlockByHash', 2, [hash, false]));
    assert.equal(first.headers.get('x-cache'), 'MISS');
    assert.equal(second.headers.get('x-cache'), 'HIT');
    assert.deepEqual((second.json as Json).result, (first.json as Json).result);
    const batch = (await post(url, [call('eth_getBlockByHash', 'a', [hash, false]), call('eth_chainId', 'b')])).json as [Json<Head>, Json<string>];
    assert.equal(batch[0]?.result.hash, hash);
    assert.equal(batch[0]?.id, 'a');
    assert.equal(batch[1]?.result, '0x32');
  });

  test('a latest-relative read is never served from memory', async () => {
    const { key } = await createKey(t.app);
    const url = `/v1/native-mainnet/${key}`;
    const first = await post(url, call('eth_getBlockByNumber', 1, ['latest', false]));
    assert.notEqual(first.headers.get('x-cache'), 'HIT');
    const n0 = Number.parseInt((first.json as Json<Head>).result.number, 16);
    // The native devnet chain mines every second: a later answer shows a newer block.
    let n1 = n0;
    for (let i = 0; i < 50 && n1 === n0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const again = await post(url, call('eth_getBlockByNumber', 2, ['latest', false]));
      assert.notEqual(again.headers.get('x-cache'), 'HIT');
      n1 = Number.parseInt((again.json as Json<Head>).result.number, 16);
    }
    assert.ok(n1 > n0, 'latest moved on');
  });
});

describe('the upstreams module', () => {
  test('heads(network) streams the new blocks of a network, in increasing order, to a background reader', async () => {
    const abort = new AbortController();
    const seen: number[] = [];
    for await (const head of t.app.parts.upstreams.heads('native-mainnet', abort.signal)) {
      assert.equal(head.network, 'native-mainnet');
      seen.push(head.number);
      if (seen.length === 3) abort.abort();
    }
    assert.equal(seen.length, 3);
    assert.ok(seen[0]! < seen[1]! && seen[1]! < seen[2]!, `increasing: ${seen.join(', ')}`);
  });
});

describe('unknown API keys on the RPC addresses (C17 failed-auth limit)', () => {
  test('past limits.failedAuthPerMinute, unknown keys from one address are -32005 without a storage lookup, and a good key keeps working from memory', async () => {
    const small = await startTestApp({ listen: true, env: { UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { limits: { failedAuthPerMinute: 5 } } });
    try {
      const good = await createKey(small.app);
      const ok = await fetch(`${small.url}/v1/native-mainnet/${good.key}`, { method: 'POST', body: JSON.stringify(call('eth_chainId', 1)) });
      assert.equal(ok.status, 200);
      const cache = small.app.parts.keyCache;
      const lookups = cache.misses;
      const answers = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          fetch(`${small.url}/v1/native-mainnet/jk_live_unknown${i}x${'q'.repeat(30)}`, { method: 'POST', body: JSON.stringify(call('eth_chainId', i)) }).then(async (r) => ({
            status: r.status,
            code: ((await r.json()) as Json).error?.code,
          })),
        ),
      );
      assert.equal(answers.filter((a) => a.status === 401 && a.code === -32001).length, 5);
      assert.equal(answers.filter((a) => a.status === 429 && a.code === -32005).length, 10);
      assert.equal(cache.misses - lookups, 5, 'only the admitted ones reached storage');
      const again = await fetch(`${small.url}/v1/native-mainnet/${good.key}`, { method: 'POST', body: JSON.stringify(call('eth_chainId', 2)) });
      assert.equal(again.status, 200);
      assert.equal(cache.misses - lookups, 5, 'the good key was still in memory');
    } finally {
      await small.close();
    }
  });
});

describe('C13 headers on unknown API keys: the failed-lookup window of the address', () => {
  const LIMIT = 3;
  const unknown = (tag: string) => `jk_live_unknown${tag}x${'q'.repeat(30)}`;
  const nowS = () => Math.floor(Date.now() / 1000);
  type Headers = Record<string, string | string[] | undefined>;
  function assertWindow(h: Headers, remaining: number): void {
    assert.equal(h['x-ratelimit-limit'], String(LIMIT), 'limits.failedAuthPerMinute');
    assert.equal(h['x-ratelimit-remaining'], String(remaining));
    assert.match(String(h['x-ratelimit-reset']), /^\d+$/);
    assert.ok(Number(h['x-ratelimit-reset']) >= nowS());
    assert.equal(h['x-cu-remaining'], '-1', 'no account is known');
  }

  test('HTTP: each unknown key is -32001 with the window\'s headers, one less left each, then -32005 with them and Retry-After', async () => {
    const small = await startTestApp({ listen: true, env: { UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { limits: { failedAuthPerMinute: LIMIT } } });
    try {
      const send = async (key: string) => {
        const r = await fetch(`${small.url}/v1/native-mainnet/${key}`, { method: 'POST', body: JSON.stringify(call('eth_chainId', 1)) });
        return { status: r.status, headers: Object.fromEntries(r.headers), code: ((await r.json()) as Json).error?.code };
      };
      for (let i = 0; i < LIMIT; i++) {
        const r = await send(unknown(`h${i}`));
        assert.equal(r.status, 401);
        assert.equal(r.code, -32001);
        assertWindow(r.headers, LIMIT - 1 - i);
        assert.equal(r.headers['retry-after'], undefined);
      }
      const refused = await send(unknown('hz'));
      assert.equal(refused.status, 429);
      assert.equal(refused.code, -32005);
      assertWindow(refused.headers, 0);
      assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After');
      assert.ok(Number(refused.headers['x-ratelimit-reset']) >= nowS() + 1, 'when one more is allowed again');
    } finally {
      await small.close();
    }
  });

  test('WebSocket upgrade: the same headers on its 401 (-32001) and on its 429 (-32005)', async () => {
    const small = await startTestApp({ listen: true, env: { UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { limits: { failedAuthPerMinute: LIMIT } } });
    try {
      const codeOf = (body: string) => (JSON.parse(body) as Json).error?.code;
      for (let i = 0; i < LIMIT; i++) {
        const r = await tryUpgrade(wsAddress(small, `/ws/native-mainnet?apiKey=${unknown(`w${i}`)}`));
        assert.equal(r.status, 401);
        assert.equal(codeOf(r.body), -32001);
        assertWindow(r.headers, LIMIT - 1 - i);
      }
      const refused = await tryUpgrade(wsAddress(small, `/ws/native-mainnet`), { 'x-api-key': unknown('wz') });
      assert.equal(refused.status, 429);
      assert.equal(codeOf(refused.body), -32005);
      assertWindow(refused.headers, 0);
      assert.ok(Number(refused.headers['retry-after']) >= 1);
    } finally {
      await small.close();
    }
  });
});

describe('unknown API keys at the WebSocket upgrade (C17 failed-auth limit)', () => {
  test('past limits.failedAuthPerMinute, upgrades with unknown keys from one address are 429 without a storage lookup, and a good key still connects', async () => {
    const small = await startTestApp({ listen: true, env: { UPSTREAM_NATIVE_MAINNET: fake.url }, overrides: { limits: { failedAuthPerMinute: 5 } } });
    try {
      const good = await createKey(small.app);
      const first = await tryUpgrade(wsAddress(small, `/ws/native-mainnet?apiKey=${good.key}`));
      assert.equal(first.status, 101);
      first.ws?.close();
      const cache = small.app.parts.keyCache;
      const lookups = cache.misses;
      // Fired at once: the allowance is taken before the lookup, so concurrency cannot pass it.
      const answers = await Promise.all(
        Array.from({ length: 15 }, (_, i) => tryUpgrade(wsAddress(small, `/ws/native-mainnet?apiKey=jk_live_unknown${i}x${'q'.repeat(30)}`))),
      );
      const codeOf = (body: string) => (JSON.parse(body) as Json).error?.code;
      assert.equal(answers.filter((a) => a.status === 401 && codeOf(a.body) === -32001).length, 5);
      assert.equal(answers.filter((a) => a.status === 429 && codeOf(a.body) === -32005).length, 10);
      assert.ok(answers.filter((a) => a.status === 429).every((a) => Number(a.headers['retry-after']) >= 1), 'Retry-After on each 429');
      assert.equal(cache.misses - lookups, 5, 'only the admitted ones reached storage');
      const again = await tryUpgrade(wsAddress(small, `/ws/native-mainnet`), { 'x-api-key': good.key });
      assert.equal(again.status, 101, 'the good key is in memory: no allowance needed');
      again.ws?.close();
      assert.equal(cache.misses - lookups, 5);
    } finally {
      await small.close();
    }
  });
});

describe('a burst of lookups of one key (C17: one storage read, one place of the allowance)', () => {
  const ALLOWANCE = 5;
  let small: TestApp;
  /** Storage reads of a key by hash, counted at the key service. */
  let reads: string[];
  before(async () => {
    small = await startTestApp({
      listen: true,
      env: { UPSTREAM_NATIVE_MAINNET: fake.url },
      overrides: { limits: { failedAuthPerMinute: ALLOWANCE }, ws: { plans: { free: { connectionsPerKey: 1_000, subscriptionsPerConnection: 20 } } } },
    });
    reads = [];
    const keys = small.app.parts.keys;
    const read = keys.lookupByHash.bind(keys);
    keys.lookupByHash = async (hash: string) => {
      reads.push(hash);
      // A storage read that takes its time: answered only once every request of the burst has
      // asked for the key, so all of them are waiting on a lookup at once.
      const h = held;
      if (h) await waitFor(() => h.asked >= h.burst, { what: `${h.burst} requests to ask for the key` });
      return read(hash);
    };
    const cache = small.app.parts.keyCache;
    const peek = cache.peek.bind(cache);
    cache.peek = (apiKey: string | undefined) => {
      if (held && apiKey === held.key) held.asked++;
      return peek(apiKey);
    };
  });
  /** The burst in progress: its key, its size, and how many times the key was asked for so far. */
  let held: { key: string; burst: number; asked: number } | undefined;
  async function burst<T>(key: string, n: number, fire: (i: number) => Promise<T>): Promise<T[]> {
    held = { key, burst: n, asked: 0 };
    try {
      return await Promise.all(Array.from({ length: n }, (_, i) => fire(i)));
    } finally {
      held = undefined;
    }
  }
  after(() => small?.close());
  const unknownKey = (tag: string) => `jk_live_unknown${tag}x${'q'.repeat(30)}`;
  const codeOf = (body: string) => (JSON.parse(body) as Json).error?.code;

  test('60 HTTP calls and batches at once with a valid key not yet in memory are all served, after one storage read', async () => {
    // First: the WebSocket test below spends this address's (127.0.0.1) allowance on unknown keys.
    const { key } = await createKey(small.app);
    reads.length = 0;
    // 30 calls and 30 batches of 2: 90 requests, within the free plan's 100 a minute (C10).
    const answers = await burst(key, 60, (i) =>
      fetch(`${small.url}/v1/native-mainnet/${key}`, {
        method: 'POST',
        body: JSON.stringify(i % 2 ? call('eth_chainId', i) : [call('eth_chainId', i), call('eth_chainId', -i)]),
      }).then((r) => r.status),
    );
    assert.deepEqual(answers.filter((s) => s !== 200), [], 'every call is served');
    assert.equal(reads.length, 1, 'one storage read for the 60');
  });

  test('200 WebSocket upgrades at once with a valid key not yet in memory are all 101, after one storage read, and keep no place of the allowance', async () => {
    const { key } = await createKey(small.app);
    reads.length = 0;
    const answers = await burst(key, 200, () => tryUpgrade(wsAddress(small, `/ws/native-mainnet?apiKey=${key}`)));
    try {
      const refused = answers.filter((a) => a.status !== 101);
      assert.deepEqual(refused.map((a) => `${a.status} ${a.body}`), [], 'every upgrade is 101');
      assert.equal(reads.length, 1, 'one storage read for the 200');
    } finally {
      for (const a of answers) a.ws?.close();
    }
    // The place was given back: the address still has its whole allowance for unknown keys.
    const unknown = await Promise.all(Array.from({ length: ALLOWANCE + 3 }, (_, i) => tryUpgrade(wsAddress(small, `/ws/native-mainnet?apiKey=${unknownKey(`ws${i}`)}`))));
    assert.equal(unknown.filter((a) => a.status === 401 && codeOf(a.body) === -32001).length, ALLOWANCE);
    assert.equal(unknown.filter((a) => a.status === 429 && codeOf(a.body) === -32005).length, 3);
  });

  test('one unknown key asked 200 times at once from one address is one storage read and one failed lookup: the rest of the allowance stays', async () => {
    const ip = '10.43.4.1';
    reads.length = 0;
    const same = await burst(unknownKey('same'), 200, (i) =>
      small.app.inject({ method: 'POST', url: `/v1/native-mainnet/${unknownKey('same')}`, remoteAddress: ip, payload: call('eth_chainId', i) }),
    );
    assert.deepEqual([...new Set(same.map((r) => r.statusCode))], [401]);
    assert.equal(reads.length, 1);
    // C13: every one of them carries the one place's window: one spent of the allowance.
    assert.deepEqual([...new Set(same.map((r) => [r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining'], r.headers['x-cu-remaining']].join('/')))], [`${ALLOWANCE}/${ALLOWANCE - 1}/-1`]);
    // Fired at once, different unknown keys still meet the allowance exactly: 1 spent, 4 left.
    const others = await Promise.all(
      Array.from({ length: ALLOWANCE + 3 }, (_, i) =>
        small.app.inject({ method: 'POST', url: `/v1/native-mainnet/${unknownKey(`other${i}`)}`, remoteAddress: ip, payload: call('eth_chainId', i) }),
      ),
    );
    assert.equal(others.filter((r) => r.statusCode === 401 && r.json().error.code === -32001).length, ALLOWANCE - 1);
    assert.equal(others.filter((r) => r.statusCode === 429 && r.json().error.code === -32005).length, 4);
    assert.equal(reads.length, ALLOWANCE, 'only the admitted lookups reached storage');
  });
});

describe('RPC fast path metrics', () => {
  test('/metrics counts RPC requests by address and status, with a duration histogram, and never a key', async () => {
    const { key } = await createKey(t.app);
    await post(`/v1/native-mainnet/${key}`, call('eth_chainId', 1));
    await post(`/v1/native-mainnet/${key}`, '{not json');
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const count = (status: number) => Number(new RegExp(`junction_rpc_http_requests_total\\{route="/v1/:network/:apiKey",status="${status}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    assert.ok(count(200) >= 1, 'successes counted');
    assert.ok(count(400) >= 1, 'parse errors counted');
    assert.match(text, /junction_rpc_http_request_duration_seconds_bucket\{le="\+Inf",route="\/v1\/:network\/:apiKey"\} \d+/);
    assert.match(text, /junction_rpc_http_request_duration_seconds_count\{route="\/v1\/:network\/:apiKey"\} \d+/);
    assert.ok(!text.includes(key.slice(8)), 'no key in the metrics');
  });
});
