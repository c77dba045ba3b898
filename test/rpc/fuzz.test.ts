// Fuzzing the JSON-RPC addresses (bounded, seeded: the same inputs on every run): random and
// mutated bodies, batches and WebSocket frames against the gateway in front of a fake node that
// records every body it receives. The gateway never answers 5xx but -32000/502, never crashes,
// and never forwards a call the policy refuses or whose members are not exactly as allowed (C22-C24).
// Then inside params (test/support/fuzz-gen.ts), against anvil chains: sane answers with the ids
// sent, open WebSockets, chains that still answer, and no error in the gateway's log (C50).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode, topLevel } from '../support/fake-node.ts';
import { connect, wsAddress } from '../support/ws.ts';
import { judge, paramFuzzer, prng, WsFuzzChannel } from '../support/fuzz-gen.ts';
import { MAX_NESTING } from '../../src/rpc/message.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const HTTP_CASES = 400;
const WS_CASES = 150;
const ADMIN = 'fuzz-admin-token-0123456789';
const MEMBERS = new Set(['jsonrpc', 'method', 'params', 'id']);

const ALLOWED = ['eth_chainId', 'eth_blockNumber', 'eth_getBalance', 'eth_call', 'net_version', 'eth_getBlockByNumber', 'web3_clientVersion'];
const REFUSED = [
  'eth_sendUnsignedTransaction',
  'eth_sendTransactionSync',
  'eth_sendTransaction',
  'eth_accounts',
  'admin_addPeer',
  'anvil_setBalance',
  'evm_mine',
  'hardhat_impersonateAccount',
  'debug_traceTransaction',
  'personal_unlockAccount',
  'Eth_blockNumber',
  'eth_subscribe',
  'txpool_content',
  'eth_chainid',
];

function generator(rand: () => number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const int = (n: number) => Math.floor(rand() * n);
  const str = () => {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz_ABCXYZ0123456789\\"\u0000\u00e9\u{1F600}';
    return Array.from({ length: int(12) }, () => pick([...alphabet])).join('');
  };
  const value = (depth = 0): unknown => {
    switch (int(depth > 2 ? 5 : 8)) {
      case 0:
        return null;
      case 1:
        return rand() < 0.5;
      case 2:
        return pick([0, -1, 1.5, 2 ** 53 + 1, 1e308, -0]);
      case 3:
        return str();
      case 4:
        return `0x${int(2 ** 30).toString(16)}`;
      case 5:
        return Array.from({ length: int(4) }, () => value(depth + 1));
      default:
        return Object.fromEntries(Array.from({ length: int(4) }, () => [str(), value(depth + 1)]));
    }
  };
  const method = () => (rand() < 0.45 ? pick(ALLOWED) : rand() < 0.75 ? pick(REFUSED) : str());
  // An id past 2^53 as JSON.parse would hold it (written as text: the literal would lose precision).
  const id = () => pick<unknown>([int(1000), str(), null, Number('12345678901234567890'), { a: 1 }, [1], true, undefined]);
  /** One call as text, often mutated in the ways a node reads differently from JSON.parse. */
  const callText = (): string => {
    const members: string[] = [];
    if (rand() < 0.95) members.push(`"jsonrpc":${rand() < 0.9 ? '"2.0"' : JSON.stringify(value())}`);
    if (rand() < 0.95) members.push(`"method":${JSON.stringify(method())}`);
    if (rand() < 0.8) members.push(`"params":${JSON.stringify(rand() < 0.7 ? [value(), value()] : value())}`);
    const i = id();
    if (i !== undefined) members.push(`"id":${JSON.stringify(i)}`);
    switch (int(10)) {
      case 0:
        members.push(`"Method":${JSON.stringify(pick(REFUSED))}`);
        break;
      case 1:
        members.push(`"m\\u0065thod":${JSON.stringify(pick(REFUSED))}`);
        break;
      case 2:
        members.push(`"method":${JSON.stringify(pick(REFUSED))}`);
        break;
      case 3:
        members.push(`${JSON.stringify(str())}:${JSON.stringify(value())}`);
        break;
      case 4:
        members.push(`"ID":1`);
        break;
      default:
    }
    for (let k = members.length - 1; k > 0; k--) {
      if (rand() < 0.3) {
        const j = int(k + 1);
        [members[k], members[j]] = [members[j] as string, members[k] as string];
      }
    }
    return `{${members.join(',')}}`;
  };
  const body = (): string => {
    const r = rand();
    if (r < 0.35) return callText();
    if (r < 0.6) {
      const items = Array.from({ length: rand() < 0.1 ? 100 + int(30) : int(8) }, () =>
        rand() < 0.8 ? callText() : JSON.stringify(rand() < 0.5 ? value() : [JSON.parse(callText().replace(/\\u0065/g, 'e')) as unknown]),
      );
      return `[${items.join(',')}]`;
    }
    if (r < 0.75) {
      const t = callText();
      return t.slice(0, int(t.length)); // truncated
    }
    if (r < 0.85) return JSON.stringify(value());
    return Buffer.from(Array.from({ length: int(64) }, () => int(256))).toString('latin1');
  };
  return { body };
}

let t: TestApp;
let node: FakeNode;
let key: string;

before(async () => {
  node = await startFakeNode();
  t = await startTestApp({
    listen: true,
    env: { UPSTREAM_NATIVE_MAINNET: node.url, ADMIN_TOKEN: ADMIN },
    overrides: { limits: { publicRpcPerMinute: 1_000_000 } },
  });
  const k = await createKey(t.app);
  await setTier(t.app, k.user.id, 'enterprise', ADMIN);
  key = k.key;
});
after(async () => {
  await t?.close();
  await node?.close();
});

/** Every call object the node received: its method is allowed and its members are exactly as allowed. */
function assertNodeSawOnlyAllowedCalls(): void {
  const allowed = new Set(t.config.methods.standard);
  for (const text of node.bodies) {
    const top = topLevel(text);
    const calls = top.kind === 'array' ? top.parts.map((p) => p.raw) : [text];
    for (const raw of calls) {
      const members = topLevel(raw).parts.map((p) => p.key ?? '');
      assert.ok(members.every((m) => MEMBERS.has(m)), `forwarded a call with members ${JSON.stringify(members)}: ${raw.slice(0, 200)}`);
      assert.equal(new Set(members).size, members.length, `forwarded a call with a repeated member: ${raw.slice(0, 200)}`);
      const method = (JSON.parse(raw) as { method?: unknown }).method;
      assert.ok(typeof method === 'string' && allowed.has(method), `forwarded ${String(method)}: ${raw.slice(0, 200)}`);
    }
  }
}

/** A gateway answer: JSON (or nothing), and 5xx only as -32000 with 502. */
function assertSaneAnswer(status: number, text: string, input: string): void {
  const where = `for input ${JSON.stringify(input.slice(0, 300))}`;
  if (status === 204) {
    assert.equal(text, '', where);
    return;
  }
  let parsed: unknown;
  assert.doesNotThrow(() => (parsed = JSON.parse(text)), `answer is not JSON ${where}: ${text.slice(0, 200)}`);
  const items = (Array.isArray(parsed) ? parsed : [parsed]) as Array<{ error?: { code: number } }>;
  assert.ok(status < 500 || status === 502, `HTTP ${status} ${where}`);
  if (status === 502) assert.ok(items.every((i) => i.error?.code === -32000 || !i.error), `502 without -32000 ${where}`);
  assert.ok(!items.some((i) => i.error?.code === -32603), `internal error ${where}: ${text.slice(0, 200)}`);
}

describe('fuzzing the JSON-RPC addresses (seeded)', () => {
  test(`${HTTP_CASES} random and mutated HTTP bodies: sane answers, and nothing refused reaches the node`, async () => {
    const { body } = generator(prng(SEED));
    for (let i = 0; i < HTTP_CASES; i++) {
      const input = body();
      const path = i % 3 === 0 ? '/public/main' : `/v1/native-mainnet/${key}`;
      const res = await fetch(`${t.url}${path}`, { method: 'POST', body: input });
      assertSaneAnswer(res.status, await res.text(), input);
    }
    assertNodeSawOnlyAllowedCalls();
    assert.equal((await fetch(`${t.url}/health/live`)).status, 200, 'still alive');
  });

  test(`${WS_CASES} random and mutated WebSocket frames: sane answers, the connection stays, nothing refused reaches the node`, async () => {
    const { body } = generator(prng(SEED + 1));
    const client = await connect(wsAddress(t, `/ws/native-mainnet?apiKey=${key}`));
    try {
      for (let i = 0; i < WS_CASES; i++) {
        const input = body();
        const seen = client.raw.length;
        client.ws.send(input);
        // A sentinel after each frame: every answer to the frame has arrived once its answer has.
        const sentinel = await client.call('eth_chainId');
        assert.equal(sentinel.error, undefined, `the connection still serves calls after ${JSON.stringify(input.slice(0, 200))}`);
        for (const text of client.raw.slice(seen, -1)) assertSaneAnswer(200, text, input);
      }
    } finally {
      await client.close();
    }
    assertNodeSawOnlyAllowedCalls();
  });
});

const PARAM_HTTP_CASES = 1500;
const PARAM_WS_CASES = 600;
const BODY_LIMIT = 1_048_576;

describe('fuzzing inside params against devnet chains (seeded)', () => {
  let d: TestApp;
  let dkey: string;
  const NETWORKS = ['native-mainnet', 'ethereum'];
  before(async () => {
    d = await startTestApp({
      devnet: true,
      devnetNetworks: NETWORKS,
      listen: true,
      env: { ADMIN_TOKEN: ADMIN },
      overrides: { limits: { publicRpcPerMinute: 1_000_000 } },
    });
    // The key is made once the account is enterprise: it then holds every network.
    const user = await registerUser(d.app);
    await setTier(d.app, user.id, 'enterprise', ADMIN);
    dkey = (await createKey(d.app, {}, user)).key;
  });
  after(() => d?.close());

  const options = (native: boolean, overLimit: boolean) => ({ maxNesting: MAX_NESTING, maxBatch: d.config.rpc.maxBatchSize, maxBytes: BODY_LIMIT, overLimit, native });
  const where = (input: string) => `for input ${JSON.stringify(input.slice(0, 300))}`;
  const blockNumber = async (slug: string) => {
    const res = await fetch(`${d.url}/v1/${slug}/${dkey}`, { method: 'POST', body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' });
    return ((await res.json()) as { result?: string }).result;
  };
  const errorLines = () => d.logs.filter((l) => /"level":(50|60)/.test(l));

  test('a call the node cannot read at all (a lone surrogate, which JSON.parse accepts) is answered under the caller\'s id, not the node\'s null (C23)', async () => {
    // anvil refuses the whole request text and answers {"id":null,"error":{"code":-32600}}.
    // In the address, which the gateway passes on unjudged: a lone surrogate as a block is the gateway's -32602 (C53).
    const lone = (method: string, id: string) => `{"jsonrpc":"2.0","method":"${method}","params":["\\ud800","latest"],"id":${id}}`;
    const filter = (id: string) => `{"jsonrpc":"2.0","method":"eth_newFilter","params":[{"topics":["\\ud800"]}],"id":${id}}`;
    for (const [path, headers] of [['/public/main', {}], ['/rpc/main/evm/1', { 'x-api-key': dkey }]] as const) {
      for (const [input, id] of [[lone('eth_getBalance', '7'), 7], [lone('eth_getCode', '"abc"'), 'abc'], [filter('12345678901234567890'), '12345678901234567890']] as const) {
        const res = await fetch(`${d.url}${path}`, { method: 'POST', headers, body: input });
        const text = await res.text();
        assert.equal(res.status, 200, text);
        if (typeof id === 'string' && /^\d+$/.test(id)) assert.match(text, new RegExp(`"id":${id}[,}]`), `${path}: ${text}`);
        else assert.equal((JSON.parse(text) as { id: unknown }).id, id, `${path}: ${text}`);
        assert.equal((JSON.parse(text) as { error?: { code: number } }).error?.code, -32600, text);
      }
    }
    // The same over a WebSocket, and a call with id null keeps it.
    const ws = await WsFuzzChannel.open(`${d.url.replace(/^http/, 'ws')}/ws/native-mainnet?apiKey=${dkey}`);
    try {
      const out = await ws.send(lone('eth_getBalance', '"ws-1"'));
      assert.ok('answer' in out && out.answer !== null);
      assert.equal((JSON.parse(out.answer) as { id: unknown }).id, 'ws-1', out.answer);
      const nullId = await ws.send(lone('eth_getBalance', 'null'));
      assert.ok('answer' in nullId && nullId.answer !== null);
      assert.equal((JSON.parse(nullId.answer) as { id: unknown }).id, null, nullId.answer);
    } finally {
      await ws.close();
    }
  });

  test(`${PARAM_HTTP_CASES} HTTP messages with mutated params, keyless and with a key, single and batch: sane answers with the ids sent (C22, C23)`, async (ctx) => {
    const fuzz = { native: paramFuzzer(prng(SEED + 2), options(true, true)), other: paramFuzzer(prng(SEED + 3), options(false, true)) };
    const paths = ['/public/main', `/v1/native-mainnet/${dkey}`, `/v1/ethereum/${dkey}`, '/rpc/main/evm/1'];
    const codes = new Map<number, number>();
    const statuses = new Map<number, number>();
    for (let i = 0; i < PARAM_HTTP_CASES; i++) {
      const path = paths[i % paths.length] as string;
      const input = (path.includes('ethereum') || path.endsWith('/1') ? fuzz.other : fuzz.native).message();
      const res = await fetch(`${d.url}${path}`, { method: 'POST', body: input, headers: path.startsWith('/rpc/') ? { 'x-api-key': dkey } : {} });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const verdict = judge(input, res.status, await res.text(), { maxNesting: MAX_NESTING, maxBytes: BODY_LIMIT });
      assert.deepEqual(verdict.problems, [], where(input));
      for (const c of verdict.codes) codes.set(c, (codes.get(c) ?? 0) + 1);
    }
    ctx.diagnostic(`HTTP statuses ${JSON.stringify([...statuses].sort())}; error codes ${JSON.stringify([...codes].sort((a, b) => b[1] - a[1]))}`);
    assert.ok(codes.has(-32602) && codes.has(-32600), `the gateway's own refusals were met: ${JSON.stringify([...codes])}`);
    for (const slug of NETWORKS) assert.match(String(await blockNumber(slug)), /^0x[0-9a-f]+$/, `${slug} still answers eth_blockNumber`);
    assert.deepEqual(errorLines(), [], 'no error in the gateway log');
  });

  test(`${PARAM_WS_CASES} WebSocket frames with mutated params: each answered with its ids, the connections stay open; only a frame over ws.maxPayloadBytes closes one (1009)`, async () => {
    for (const [n, slug] of NETWORKS.entries()) {
      const fuzz = paramFuzzer(prng(SEED + 4 + n), options(slug === 'native-mainnet', false));
      const ws = await WsFuzzChannel.open(`${d.url.replace(/^http/, 'ws')}/ws/${slug}?apiKey=${dkey}`);
      try {
        for (let i = 0; i < PARAM_WS_CASES / NETWORKS.length; i++) {
          const input = fuzz.message();
          const out = await ws.send(input);
          assert.ok('answer' in out, `the connection ${'failed' in out ? out.failed : ''} (${JSON.stringify(ws.closed)}) ${where(input)}`);
          assert.deepEqual(judge(input, undefined, out.answer, { maxNesting: MAX_NESTING, maxBytes: BODY_LIMIT }).problems, [], where(input));
        }
      } finally {
        await ws.close();
      }
    }
    // The one documented close: a frame over ws.maxPayloadBytes ends the connection with 1009
    // (Message Too Big); a new connection is served as before.
    const address = `${d.url.replace(/^http/, 'ws')}/ws/native-mainnet?apiKey=${dkey}`;
    const big = await WsFuzzChannel.open(address);
    const tooBig = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"data":"0x${'00'.repeat(d.config.ws.maxPayloadBytes / 2)}"},"latest"]}`;
    const cut = await big.send(tooBig);
    assert.ok('failed' in cut && cut.failed === 'closed', JSON.stringify(cut).slice(0, 200));
    assert.equal(big.closed?.code, 1009);
    const again = await WsFuzzChannel.open(address);
    const answer = await again.send('{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}');
    await again.close();
    assert.ok('answer' in answer && answer.answer !== null && /"result":"0x[0-9a-f]+"/.test(answer.answer), JSON.stringify(answer));
    for (const slug of NETWORKS) assert.match(String(await blockNumber(slug)), /^0x[0-9a-f]+$/, `${slug} still answers eth_blockNumber`);
    assert.deepEqual(errorLines(), [], 'no error in the gateway log');
  });
});
