// The testnet faucet (C28–C30) on real local chains: real signed transactions, cooldowns,
// nonces under concurrency, a wallet that cannot pay, restarts, and several instances.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import {
  type Address,
  createPublicClient,
  createWalletClient,
  defineChain,
  formatEther,
  getAddress,
  type Hex,
  http,
  keccak256,
  parseEther,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import type { Devnet } from '../../src/devnet/devnet.ts';
import { startDevnet } from '../../src/devnet/devnet.ts';
import { faucetGrants } from '../../src/faucet/schema.ts';
import { createKey, registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { type FakeNode, startFakeNode } from '../support/fake-node.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';

const ADMIN_TOKEN = 'faucet-test-admin-token-0123456789';
const SEPOLIA = 'ethereum-sepolia';
const NATIVE = 'native-testnet';
const DAY = 86_400;
const pgSkip = await serviceSkip('PostgreSQL');

type User = Awaited<ReturnType<typeof registerUser>>;
type Body = Record<string, unknown>;

/** A JSON-RPC call straight to a devnet chain (anvil_* control methods, checks behind the gateway's back). */
async function chainRpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

const chainOf = (id: number, url: string) =>
  defineChain({ id, name: `chain ${id}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [url] } } });

const freshAddress = (): Address => privateKeyToAddress(generatePrivateKey());

describe('faucet on the devnet (C28–C30)', () => {
  let t: TestApp;
  /** Every response body the faucet routes gave, for the "key never returned" check. */
  const bodies: string[] = [];

  before(async () => {
    t = await startTestApp({ devnet: true, devnetNetworks: [NATIVE, SEPOLIA], listen: true, env: { ADMIN_TOKEN } });
  });
  after(async () => {
    await t?.close();
  });

  const ask = async (auth: { authorization: string } | undefined, body: Body) => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/faucet/request', ...(auth ? { headers: auth } : {}), payload: body });
    bodies.push(res.body);
    return res;
  };
  const balances = async (auth?: { authorization: string }) => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/faucet/balance', ...(auth ? { headers: auth } : {}) });
    bodies.push(res.body);
    return res;
  };
  const chainUrl = (slug: string) => t.devnet?.upstreams[slug]?.http as string;
  const chainId = (slug: string) => t.config.networks.find((n) => n.slug === slug)?.chainId as number;
  const faucetAddress = async (slug: string, auth: { authorization: string }): Promise<Address> =>
    (await balances(auth)).json().data[slug].faucetAddress;
  const grantRows = (recipient: string) =>
    t.storage.db.select().from(faucetGrants).where(eq(faucetGrants.recipient, recipient.toLowerCase()));

  test('a grant lands: viem through the gateway sees the balance rise by exactly the amount and the receipt succeed; the recipient then spends it through the gateway', async () => {
    const user = await registerUser(t.app);
    await setTier(t.app, user.id, 'pro', ADMIN_TOKEN);
    const { key } = await createKey(t.app, { name: 'faucet user', networks: [NATIVE, SEPOLIA] }, user);
    for (const [slug, amount, wei] of [
      [SEPOLIA, '0.5', parseEther('0.5')],
      [NATIVE, undefined, parseEther('1')], // the default amount
    ] as const) {
      const recipient = privateKeyToAccount(generatePrivateKey());
      const res = await ask(user.auth, { network: slug, address: recipient.address.toLowerCase(), ...(amount ? { amount } : {}) });
      assert.equal(res.statusCode, 200, res.body);
      const data = res.json().data;
      assert.deepEqual(Object.keys(data).sort(), ['amount', 'network', 'recipient', 'txHash']);
      assert.equal(data.amount, amount ?? '1');
      assert.equal(data.network, slug);
      assert.equal(data.recipient, recipient.address, 'the EIP-55 form');
      assert.match(data.txHash, /^0x[0-9a-f]{64}$/);

      const gateway = `${t.url}/v1/${slug}/${key}`;
      const chain = chainOf(chainId(slug), gateway);
      const client = createPublicClient({ chain, transport: http(gateway), pollingInterval: 200 });
      const receipt = await client.waitForTransactionReceipt({ hash: data.txHash, pollingInterval: 200, timeout: 15_000 });
      assert.equal(receipt.status, 'success');
      assert.equal(receipt.to, recipient.address.toLowerCase());
      const tx = await client.getTransaction({ hash: data.txHash });
      assert.equal(tx.value, wei);
      assert.equal(tx.gas, 21_000n);
      assert.equal(tx.chainId, chainId(slug));
      assert.equal(await client.getBalance({ address: recipient.address }), wei, 'up by exactly the amount');
      const [row] = await grantRows(recipient.address);
      assert.ok(row?.status === 'sent' || row?.status === 'mined', `status ${row?.status}`);
      assert.equal(row?.txHash, data.txHash);
      assert.equal(row?.nonce, tx.nonce);
      assert.equal(row?.userId, user.id);
      assert.equal(BigInt(row?.amountWei ?? 0), wei);

      // The recipient spends part of it with a transaction of its own, signed locally and sent through the gateway.
      const wallet = createWalletClient({ account: recipient, chain, transport: http(gateway) });
      const spend = parseEther('0.1');
      const hash = await wallet.sendTransaction({ to: freshAddress(), value: spend });
      const own = await client.waitForTransactionReceipt({ hash, pollingInterval: 200, timeout: 15_000 });
      assert.equal(own.status, 'success');
      assert.equal(await client.getBalance({ address: recipient.address }), wei - spend - own.gasUsed * own.effectiveGasPrice);
    }
  });

  test('C28 validation: bad network, address, checksum, prefix or amount is 400 in the C7 envelope, listing the field, and uses up nothing', async () => {
    const user = await registerUser(t.app);
    const address = getAddress(freshAddress());
    // A checksum made wrong by flipping the case of one letter.
    const i = [...address].findIndex((c, k) => k > 1 && /[a-f]/i.test(c));
    const flipped = address.slice(0, i) + (address[i] === address[i]?.toUpperCase() ? address[i]?.toLowerCase() : address[i]?.toUpperCase()) + address.slice(i + 1);
    const cases: Array<[string, Body, string]> = [
      ['mainnet', { network: 'ethereum', address }, 'body.network'],
      ['unknown network', { network: 'atlantis', address }, 'body.network'],
      ['testnet without a faucet wallet', { network: 'polygon-amoy', address }, 'body.network'],
      ['not an address', { network: SEPOLIA, address: 'nope' }, 'body.address'],
      ['too short', { network: SEPOLIA, address: address.slice(0, 40) }, 'body.address'],
      ['bad checksum', { network: SEPOLIA, address: flipped }, 'body.address'],
      ['xdc prefix off the native chain', { network: SEPOLIA, address: `xdc${address.slice(2)}` }, 'body.address'],
      ['zero address', { network: SEPOLIA, address: `0x${'0'.repeat(40)}` }, 'body.address'],
      ['amount 0', { network: SEPOLIA, address, amount: '0' }, 'body.amount'],
      ['amount 0.000', { network: SEPOLIA, address, amount: '0.000' }, 'body.amount'],
      ['negative amount', { network: SEPOLIA, address, amount: '-1' }, 'body.amount'],
      ['over the maximum', { network: SEPOLIA, address, amount: '10.000000000000000001' }, 'body.amount'],
      ['19 decimals', { network: SEPOLIA, address, amount: '0.0000000000000000001' }, 'body.amount'],
      ['exponent', { network: SEPOLIA, address, amount: '1e1' }, 'body.amount'],
      ['amount not a string', { network: SEPOLIA, address, amount: 1 }, 'body.amount'],
      ['unknown field', { network: SEPOLIA, address, token: 'USDC' }, 'body.token'],
      ['no network', { address }, 'body.network'],
    ];
    for (const [name, body, field] of cases) {
      const res = await ask(user.auth, body);
      assert.equal(res.statusCode, 400, `${name}: ${res.body}`);
      const err = res.json();
      assert.equal(err.success, false);
      assert.equal(err.error.code, 'VALIDATION_ERROR', name);
      assert.ok(err.error.message.length > 0);
      assert.ok(
        err.error.details.some((d: { field: string }) => d.field === field),
        `${name}: details name ${field}: ${JSON.stringify(err.error.details)}`,
      );
    }
    assert.equal((await grantRows(address)).length, 0, 'nothing recorded');
    // Nothing above used up the cooldown of this account or address: both networks still grant them.
    const ok = await ask(user.auth, { network: SEPOLIA, address, amount: '10' });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().data.amount, '10');
    // On the native chain the xdc prefix is accepted and answered as 0x (mixed case: the checksum is checked).
    const xdc = await ask(user.auth, { network: NATIVE, address: `xdc${address.slice(2)}`, amount: '0.25' });
    assert.equal(xdc.statusCode, 200, xdc.body);
    assert.equal(xdc.json().data.recipient, address);
    assert.equal(xdc.json().data.amount, '0.25');
  });

  test('C29 cooldown: a second grant to one address, or to one account, on one network within 24 h is 429 FAUCET_COOLDOWN with Retry-After', async () => {
    const [a, b] = [await registerUser(t.app), await registerUser(t.app)] as [User, User];
    const x = freshAddress();
    const y = freshAddress();
    assert.equal((await ask(a.auth, { network: SEPOLIA, address: x })).statusCode, 200);

    for (const [who, auth, address] of [
      ['same address, another account', b.auth, x],
      ['same account, another address', a.auth, y],
    ] as const) {
      const res = await ask(auth, { network: SEPOLIA, address });
      assert.equal(res.statusCode, 429, `${who}: ${res.body}`);
      assert.equal(res.json().error.code, 'FAUCET_COOLDOWN');
      const retry = Number(res.headers['retry-after']);
      assert.ok(retry > DAY - 60 && retry <= DAY, `${who}: Retry-After ${retry}`);
      assert.equal(res.json().error.details.retryAfter, retry);
    }
    assert.equal((await grantRows(y)).length, 0, 'a refused grant is not recorded');
    // Per network: the other testnet still grants the same account and address.
    assert.equal((await ask(a.auth, { network: NATIVE, address: x })).statusCode, 200);
    // B was refused for x only: it may still receive for itself, elsewhere.
    assert.equal((await ask(b.auth, { network: SEPOLIA, address: y })).statusCode, 200);
  });

  test('C28: a recipient whose code reverts a plain transfer, or needs more gas than a grant carries, is 400 naming body.address; nothing is sent or recorded', async () => {
    const u = await registerUser(t.app);
    const reverting = freshAddress();
    await chainRpc(chainUrl(SEPOLIA), 'anvil_setCode', [reverting, '0x60006000fd']); // REVERT(0, 0)
    const storing = freshAddress();
    await chainRpc(chainUrl(SEPOLIA), 'anvil_setCode', [storing, '0x6001600055']); // SSTORE(0, 1): ~22k gas more
    const sends = await chainRpc<Hex>(chainUrl(SEPOLIA), 'eth_getTransactionCount', [await faucetAddress(SEPOLIA, u.auth), 'pending']);
    for (const [address, why] of [
      [reverting, /cannot receive this transfer: the node says .*revert/i],
      [storing, /needs \d+ gas to receive a transfer; the faucet sends 21000/],
    ] as const) {
      const res = await ask(u.auth, { network: SEPOLIA, address });
      assert.equal(res.statusCode, 400, res.body);
      const err = res.json().error;
      assert.equal(err.code, 'VALIDATION_ERROR');
      assert.equal(err.details[0].field, 'body.address');
      assert.match(err.details[0].message, why);
      assert.equal((await grantRows(address)).length, 0, 'nothing recorded');
    }
    assert.equal(await chainRpc<Hex>(chainUrl(SEPOLIA), 'eth_getTransactionCount', [await faucetAddress(SEPOLIA, u.auth), 'pending']), sends, 'nothing sent');
    // No cooldown was used: the same account is granted at once to an account without code.
    assert.equal((await ask(u.auth, { network: SEPOLIA, address: freshAddress() })).statusCode, 200);
  });

  test('C29 nonces: 10 concurrent grants from 10 accounts to 10 addresses all land, with distinct hashes and consecutive nonces', async () => {
    const users = await Promise.all(Array.from({ length: 10 }, () => registerUser(t.app)));
    const recipients = users.map(() => freshAddress());
    const answers = await Promise.all(
      users.map((u, i) =>
        fetch(`${t.url}/api/v1/faucet/request`, {
          method: 'POST',
          headers: { ...u.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ network: NATIVE, address: recipients[i], amount: '0.01' }),
        }).then(async (r) => ({ status: r.status, body: (await r.json()) as { data: { txHash: Hex } } })),
      ),
    );
    for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    const hashes = answers.map((a) => a.body.data.txHash);
    assert.equal(new Set(hashes).size, 10, 'distinct hashes');
    const url = chainUrl(NATIVE);
    const client = createPublicClient({ chain: chainOf(chainId(NATIVE), url), transport: http(url) });
    const receipts = await Promise.all(hashes.map((hash) => client.waitForTransactionReceipt({ hash, pollingInterval: 200, timeout: 20_000 })));
    assert.ok(receipts.every((r) => r.status === 'success'));
    const nonces = (await Promise.all(hashes.map((hash) => client.getTransaction({ hash })))).map((tx) => tx.nonce).sort((x, y) => x - y);
    assert.equal(new Set(nonces).size, 10, 'distinct nonces');
    assert.equal((nonces.at(-1) as number) - (nonces[0] as number), 9, `consecutive: ${nonces.join(',')}`);
    for (const r of recipients) assert.equal(await client.getBalance({ address: r }), parseEther('0.01'));
  });

  test('C29 FAUCET_EMPTY: a wallet that cannot pay amount + gas is 503, records nothing, and uses up no cooldown', async () => {
    const user = await registerUser(t.app);
    const faucet = await faucetAddress(SEPOLIA, user.auth);
    const url = chainUrl(SEPOLIA);
    const before = await chainRpc<Hex>(url, 'eth_getBalance', [faucet, 'latest']);
    const recipient = freshAddress();
    const logsBefore = t.logs.length;
    try {
      // 1 ETH left: enough for 0.5 and gas, not for 1 and gas.
      await chainRpc(url, 'anvil_setBalance', [faucet, `0x${parseEther('1').toString(16)}`]);
      const res = await ask(user.auth, { network: SEPOLIA, address: recipient, amount: '1' });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().error.code, 'FAUCET_EMPTY');
      await chainRpc(url, 'anvil_setBalance', [faucet, '0x0']);
      assert.equal((await ask(user.auth, { network: SEPOLIA, address: recipient, amount: '0.001' })).statusCode, 503);
      assert.equal((await grantRows(recipient)).length, 0, 'nothing recorded, nothing sent');
      const shown = (await balances(user.auth)).json().data[SEPOLIA];
      assert.equal(shown.balance, '0');
    } finally {
      await chainRpc(url, 'anvil_setBalance', [faucet, before]);
    }
    const res = await ask(user.auth, { network: SEPOLIA, address: recipient, amount: '1' });
    assert.equal(res.statusCode, 200, `the same account and address once the wallet is refilled: ${res.body}`);
    // An empty faucet is a state, not a fault: logged as a warning with its code, never as an error.
    const lines = t.logs.slice(logsBefore).map((l) => JSON.parse(l) as { level: number; code?: string; msg: string });
    assert.equal(lines.filter((l) => l.code === 'FAUCET_EMPTY' && l.level === 40).length, 2, 'both refusals logged as warnings');
    assert.deepEqual(lines.filter((l) => l.level >= 50), [], 'no error-level line');
  });

  test('C30 GET /faucet/balance: every faucet network, balance read live in whole units, symbol and address', async () => {
    const user = await registerUser(t.app);
    const res = await balances(user.auth);
    assert.equal(res.statusCode, 200, res.body);
    const data = res.json().data as Record<string, { balance: string; symbol: string; faucetAddress: Address }>;
    assert.deepEqual(Object.keys(data).sort(), [NATIVE, SEPOLIA].sort(), 'the testnets with a faucet wallet');
    for (const slug of [NATIVE, SEPOLIA]) {
      const entry = data[slug];
      assert.ok(entry);
      assert.deepEqual(Object.keys(entry).sort(), ['balance', 'faucetAddress', 'symbol']);
      assert.equal(entry.symbol, t.config.networks.find((n) => n.slug === slug)?.currency.symbol);
      const key = t.config.faucet.networks[slug]?.privateKey as Hex;
      assert.equal(entry.faucetAddress, privateKeyToAddress(key));
      assert.match(entry.balance, /^[0-9]+(\.[0-9]+)?$/);
      const onChain = BigInt(await chainRpc<Hex>(chainUrl(slug), 'eth_getBalance', [entry.faucetAddress, 'latest']));
      if (slug === SEPOLIA) assert.equal(entry.balance, formatEther(onChain));
      assert.ok(Number(entry.balance) > 900_000, 'funded by the devnet, less what was granted');
    }
  });

  test('both routes need a bearer token (401)', async () => {
    for (const auth of [undefined, { authorization: 'Bearer not-a-token' }]) {
      const post = await ask(auth, { network: SEPOLIA, address: freshAddress() });
      assert.equal(post.statusCode, 401);
      assert.equal(post.json().error.code, 'UNAUTHORIZED');
      assert.equal((await balances(auth)).statusCode, 401);
    }
  });

  test('C30: no faucet private key appears in any response or log line', () => {
    const keys = Object.values(t.config.faucet.networks).map((n) => (n.privateKey as string).slice(2).toLowerCase());
    assert.equal(keys.length, 2);
    assert.ok(bodies.length > 20 && t.logs.length > 0);
    for (const text of [...bodies, ...t.logs]) for (const k of keys) assert.ok(!text.toLowerCase().includes(k), 'a faucet key leaked');
  });
});

describe('faucet storage: refusals, restarts, several instances (C29)', () => {
  let devnet: Devnet;
  /** Passes every call on to the chain, counts them, and refuses the methods in `refuse`. */
  let proxy: FakeNode;
  const keyA = generatePrivateKey();
  const keyB = generatePrivateKey();
  let chain: string;

  before(async () => {
    devnet = await startDevnet({
      networks: [{ slug: SEPOLIA, chainId: 11155111 }],
      nativeBlockTimeSeconds: 1,
      fund: [privateKeyToAddress(keyA), privateKeyToAddress(keyB)],
    });
    chain = devnet.upstreams[SEPOLIA]?.http as string;
    proxy = await startFakeNode({ forwardTo: chain });
  });
  after(async () => {
    await proxy?.close();
    await devnet?.stop();
  });

  const envFor = (key: Hex) => ({
    UPSTREAM_ETHEREUM_SEPOLIA: proxy.url,
    FAUCET_PRIVATE_KEY_ETHEREUM_SEPOLIA: key,
    // A faucet network whose node is down (nothing listens on port 1).
    FAUCET_PRIVATE_KEY_POLYGON_AMOY: key,
    UPSTREAM_POLYGON_AMOY: 'http://127.0.0.1:1',
  });
  const ask = (t: TestApp, user: User, body: Body) =>
    t.app.inject({ method: 'POST', url: '/api/v1/faucet/request', headers: user.auth, payload: body });
  const nonceOf = async (address: Address, tag = 'pending') => Number(BigInt(await chainRpc<Hex>(chain, 'eth_getTransactionCount', [address, tag])));

  describe('on PGlite, restarted on the same directory', () => {
    let dir: string;
    let t: TestApp;
    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'junction-faucet-'));
      t = await startTestApp({ dataDir: dir, env: envFor(keyA) });
    });
    after(async () => {
      await t?.close();
      await rm(dir, { recursive: true, force: true });
    });

    test('a grant the node refuses is 502, recorded failed, uses up no cooldown, and its nonce goes to the next grant', async () => {
      const user = await registerUser(t.app);
      const recipient = freshAddress();
      const faucet = privateKeyToAddress(keyA);
      const next = await nonceOf(faucet);
      proxy.refuse.add('eth_sendRawTransaction');
      try {
        const res = await ask(t, user, { network: SEPOLIA, address: recipient });
        assert.equal(res.statusCode, 502, res.body);
        assert.equal(res.json().error.code, 'UPSTREAM_ERROR');
      } finally {
        proxy.refuse.delete('eth_sendRawTransaction');
      }
      const [failed] = await t.storage.db.select().from(faucetGrants).where(eq(faucetGrants.recipient, recipient.toLowerCase()));
      assert.equal(failed?.status, 'failed');
      assert.match(failed?.error ?? '', /refused by the test/);
      assert.equal(failed?.nonce, next);

      const res = await ask(t, user, { network: SEPOLIA, address: recipient });
      assert.equal(res.statusCode, 200, res.body);
      const tx = await chainRpc<{ nonce: Hex }>(chain, 'eth_getTransactionByHash', [res.json().data.txHash]);
      assert.equal(Number(tx.nonce), next, 'the failed grant left no gap');
    });

    test('GET /faucet/balance: a network whose node does not answer shows balance null and an error; the others their balance', async () => {
      const user = await registerUser(t.app);
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/faucet/balance', headers: user.auth });
      assert.equal(res.statusCode, 200, res.body);
      const data = res.json().data;
      assert.equal(data['polygon-amoy'].balance, null);
      assert.equal(data['polygon-amoy'].faucetAddress, privateKeyToAddress(keyA));
      assert.match(data['polygon-amoy'].error, /no node/);
      assert.match(data[SEPOLIA].balance, /^[0-9]+(\.[0-9]+)?$/);
      assert.equal(data[SEPOLIA].error, undefined);
    });

    test('restart: a grant recorded but not sent is sent exactly once; one whose nonce another transaction took is marked failed', async () => {
      const user = await registerUser(t.app);
      const account = privateKeyToAccount(keyA);
      const n = await nonceOf(account.address);
      const fees = { gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n, chainId: 11155111 };
      // Someone else uses nonce n first (the wallet is shared, or the node saw a lost transaction).
      await chainRpc(chain, 'eth_sendRawTransaction', [await account.signTransaction({ ...fees, nonce: n, to: account.address, value: 0n })]);
      // Two grants "recorded before a crash": nonce n (now taken) and n + 1.
      const x = freshAddress();
      const y = freshAddress();
      const rawX = await account.signTransaction({ ...fees, nonce: n, to: x, value: parseEther('0.3') });
      const rawY = await account.signTransaction({ ...fees, nonce: n + 1, to: y, value: parseEther('0.25') });
      const row = (id: string, to: Address, raw: Hex, nonce: number, wei: bigint) => ({
        id,
        userId: user.id,
        network: SEPOLIA,
        faucetAddress: account.address.toLowerCase(),
        recipient: to.toLowerCase(),
        amountWei: wei.toString(),
        nonce,
        txHash: keccak256(raw),
        rawTx: raw,
        status: 'pending' as const,
      });
      await t.storage.db.insert(faucetGrants).values([
        row('crash-x', x, rawX, n, parseEther('0.3')),
        row('crash-y', y, rawY, n + 1, parseEther('0.25')),
      ]);
      // A pending grant is visible and counts: y is on cooldown already.
      const early = await ask(t, await registerUser(t.app), { network: SEPOLIA, address: y });
      assert.equal(early.statusCode, 429, early.body);
      await t.close();

      const sendsBefore = proxy.callCount('eth_sendRawTransaction');
      t = await startTestApp({ dataDir: dir, env: envFor(keyA) });
      const status = (id: string) =>
        t.storage.db.select().from(faucetGrants).where(eq(faucetGrants.id, id)).then((r) => r[0]);
      const done = await waitFor(async () => {
        const [a, b] = [await status('crash-x'), await status('crash-y')];
        return a?.status !== 'pending' && b?.status !== 'pending' ? { a, b } : undefined;
      }, { timeoutMs: 10_000, intervalMs: 100, what: 'the pending grants to be resumed' });
      assert.equal(done.a?.status, 'failed');
      assert.match(done.a?.error ?? '', /nonce/);
      assert.ok(done.b?.status === 'sent' || done.b?.status === 'mined', `status ${done.b?.status}`);
      assert.equal(proxy.callCount('eth_sendRawTransaction') - sendsBefore, 2, 'each pending grant broadcast once');
      const tx = await chainRpc<{ nonce: Hex; to: string } | null>(chain, 'eth_getTransactionByHash', [keccak256(rawY)]);
      assert.equal(Number(tx?.nonce), n + 1);
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [y, 'latest'])), parseEther('0.25'));
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [x, 'latest'])), 0n);
      assert.equal(await nonceOf(account.address, 'latest'), n + 2);

      // Once more: nothing left pending, nothing sent again; the start's check finds y mined.
      await t.close();
      const sends = proxy.callCount('eth_sendRawTransaction');
      t = await startTestApp({ dataDir: dir, env: envFor(keyA) });
      await waitFor(async () => ((await status('crash-y'))?.status === 'mined' ? true : undefined), { timeoutMs: 10_000, intervalMs: 100, what: 'the sent grant to be found mined' });
      assert.equal(proxy.callCount('eth_sendRawTransaction'), sends);
      assert.equal(await nonceOf(account.address), n + 2);
      assert.equal((await status('crash-x'))?.status, 'failed');
    });
  });

  describe('a sent transaction the node dropped from its pool (checked every second)', () => {
    const keyC = generatePrivateKey();
    const faucet = privateKeyToAddress(keyC);
    let t: TestApp;
    before(async () => {
      await chainRpc(chain, 'anvil_setBalance', [faucet, `0x${parseEther('1000').toString(16)}`]);
      t = await startTestApp({ env: envFor(keyC), overrides: { faucet: { recheckIntervalSeconds: 1, recheckAfterSeconds: 1 } } });
    });
    after(async () => {
      await chainRpc(chain, 'evm_setAutomine', [true]).catch(() => {});
      proxy.refuse.delete('eth_getTransactionReceipt');
      await t?.close();
    });

    const rowOf = (hash: Hex) => t.storage.db.select().from(faucetGrants).where(eq(faucetGrants.txHash, hash)).then((r) => r[0]);
    const receipt = (hash: Hex) => chainRpc<{ status: Hex } | null>(chain, 'eth_getTransactionReceipt', [hash]);
    /**
     * A grant the node accepts and then drops (anvil_dropTransaction, mining paused meanwhile).
     * While `held`, the proxy refuses receipt lookups, so the faucet's check cannot run yet.
     */
    const grantThenDrop = async (user: User, address: Address): Promise<Hex> => {
      await chainRpc(chain, 'evm_setAutomine', [false]);
      const res = await ask(t, user, { network: SEPOLIA, address, amount: '0.1' });
      assert.equal(res.statusCode, 200, res.body);
      const hash = res.json().data.txHash as Hex;
      assert.equal(await chainRpc(chain, 'anvil_dropTransaction', [hash]), hash);
      assert.equal(await chainRpc(chain, 'eth_getTransactionByHash', [hash]), null, 'the node forgot it');
      return hash;
    };

    test('it is sent again with the same bytes, so the grants after it, stuck behind the nonce gap, are mined', async () => {
      proxy.refuse.add('eth_getTransactionReceipt'); // the check waits until the scene is set
      const [a, b] = [await registerUser(t.app), await registerUser(t.app)] as [User, User];
      const [x, y] = [freshAddress(), freshAddress()];
      const dropped = await grantThenDrop(a, x);
      // The next grant takes the nonce after the dropped one: the node queues it behind the gap.
      const later = await ask(t, b, { network: SEPOLIA, address: y, amount: '0.2' });
      assert.equal(later.statusCode, 200, later.body);
      const laterHash = later.json().data.txHash as Hex;
      assert.equal(Number((await rowOf(laterHash))?.nonce), Number((await rowOf(dropped))?.nonce) + 1);
      await chainRpc(chain, 'evm_setAutomine', [true]);
      await chainRpc(chain, 'evm_mine', []);
      assert.equal(await receipt(laterHash), null, 'stuck behind the gap');

      const sends = proxy.callCount('eth_sendRawTransaction');
      proxy.refuse.delete('eth_getTransactionReceipt');
      const mined = await waitFor(async () => {
        const [r1, r2] = [await receipt(dropped), await receipt(laterHash)];
        return r1 && r2 ? [r1, r2] : undefined;
      }, { timeoutMs: 10_000, intervalMs: 100, what: 'both grants to be mined' });
      assert.ok(mined.every((r) => r.status === '0x1'));
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [x, 'latest'])), parseEther('0.1'));
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [y, 'latest'])), parseEther('0.2'));
      assert.equal(proxy.callCount('eth_sendRawTransaction') - sends, 1, 'only the dropped one was sent again');
      await waitFor(async () => ((await rowOf(dropped))?.status === 'mined' && (await rowOf(laterHash))?.status === 'mined' ? true : undefined), { timeoutMs: 10_000, intervalMs: 100, what: 'both recorded mined' });
    });

    test('one whose nonce another transaction took is marked failed and its cooldown is given back', async () => {
      proxy.refuse.add('eth_getTransactionReceipt');
      const user = await registerUser(t.app);
      const x = freshAddress();
      const dropped = await grantThenDrop(user, x);
      const nonce = Number((await rowOf(dropped))?.nonce);
      await chainRpc(chain, 'evm_setAutomine', [true]);
      // Someone else with the wallet's key uses that nonce first.
      const fees = { gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n, chainId: 11155111 };
      const other = await privateKeyToAccount(keyC).signTransaction({ ...fees, nonce, to: faucet, value: 0n });
      await chainRpc(chain, 'eth_sendRawTransaction', [other]);
      const cooling = await ask(t, user, { network: SEPOLIA, address: x, amount: '0.1' });
      assert.equal(cooling.statusCode, 429, 'the lost grant still holds the cooldown');

      proxy.refuse.delete('eth_getTransactionReceipt');
      const row = await waitFor(async () => {
        const r = await rowOf(dropped);
        return r?.status === 'failed' ? r : undefined;
      }, { timeoutMs: 10_000, intervalMs: 100, what: 'the dropped grant to be marked failed' });
      assert.match(row.error ?? '', /nonce/);
      const again = await ask(t, user, { network: SEPOLIA, address: x, amount: '0.1' });
      assert.equal(again.statusCode, 200, `the cooldown was given back: ${again.body}`);
      const r = await waitFor(() => receipt(again.json().data.txHash).then((v) => v ?? undefined), { timeoutMs: 10_000, intervalMs: 100, what: 'the new grant to be mined' });
      assert.equal(r.status, '0x1');
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [x, 'latest'])), parseEther('0.1'));
    });
    test('one that reverts on chain (the recipient got code after the check) is marked failed and its cooldown is given back', async () => {
      proxy.refuse.add('eth_getTransactionReceipt'); // the check waits until the scene is set
      const user = await registerUser(t.app);
      const x = freshAddress();
      await chainRpc(chain, 'evm_setAutomine', [false]);
      const res = await ask(t, user, { network: SEPOLIA, address: x, amount: '0.1' });
      assert.equal(res.statusCode, 200, res.body);
      const hash = res.json().data.txHash as Hex;
      await chainRpc(chain, 'anvil_setCode', [x, '0x60006000fd']);
      await chainRpc(chain, 'evm_setAutomine', [true]);
      await chainRpc(chain, 'evm_mine', []);
      const r = await waitFor(() => receipt(hash).then((v) => v ?? undefined), { timeoutMs: 10_000, intervalMs: 100, what: 'the grant to be mined' });
      assert.equal(r.status, '0x0', 'reverted');
      assert.equal(BigInt(await chainRpc<Hex>(chain, 'eth_getBalance', [x, 'latest'])), 0n);

      proxy.refuse.delete('eth_getTransactionReceipt');
      const row = await waitFor(async () => {
        const g = await rowOf(hash);
        return g?.status === 'failed' ? g : undefined;
      }, { timeoutMs: 10_000, intervalMs: 100, what: 'the reverted grant to be marked failed' });
      assert.match(row.error ?? '', /reverted on chain/);
      // The cooldown is given back: the account may ask again (for an address that can take it).
      const again = await ask(t, user, { network: SEPOLIA, address: freshAddress(), amount: '0.1' });
      assert.equal(again.statusCode, 200, again.body);
    });
  });

  describe('on PostgreSQL, two instances on one database', { skip: pgSkip }, () => {
    let set: ScaleOut | undefined;
    let apps: TestApp[] = [];
    before(async () => {
      set = await startScaleOut({ redis: false, env: envFor(keyB) });
      apps = [set.a, set.b];
    });
    after(() => set?.close());

    test('6 concurrent grants split over both instances all land, with distinct nonces, none sent twice', async () => {
      const [one, two] = apps as [TestApp, TestApp];
      const users = await Promise.all(Array.from({ length: 6 }, () => registerUser(one.app)));
      const recipients = users.map(() => freshAddress());
      const faucet = privateKeyToAddress(keyB);
      const start = await nonceOf(faucet);
      const sends = proxy.callCount('eth_sendRawTransaction');
      const answers = await Promise.all(
        users.map((u, i) => ask(i % 2 ? two : one, u, { network: SEPOLIA, address: recipients[i], amount: '0.02' })),
      );
      for (const a of answers) assert.equal(a.statusCode, 200, a.body);
      const hashes = answers.map((a) => a.json().data.txHash as Hex);
      assert.equal(new Set(hashes).size, 6);
      assert.equal(proxy.callCount('eth_sendRawTransaction') - sends, 6, 'one broadcast per grant');
      const client = createPublicClient({ transport: http(chain) });
      const receipts = await Promise.all(hashes.map((hash) => client.waitForTransactionReceipt({ hash, pollingInterval: 100, timeout: 15_000 })));
      assert.ok(receipts.every((r) => r.status === 'success'));
      const nonces = (await Promise.all(hashes.map((hash) => client.getTransaction({ hash })))).map((tx) => tx.nonce).sort((a, b) => a - b);
      assert.deepEqual(nonces, [0, 1, 2, 3, 4, 5].map((k) => start + k));
      for (const r of recipients) assert.equal(await client.getBalance({ address: r }), parseEther('0.02'));
    });
  });
});
