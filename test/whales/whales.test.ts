// Whale alerts (C35, C36) on the devnet: real transfers signed with viem on anvil, recorded from
// the blocks that hold them, listed by GET /whale-alerts with its plan gate, filters and paging.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { eq } from 'drizzle-orm';
import { type Address, createPublicClient, createWalletClient, defineChain, type Hex, http, parseUnits, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import type { FollowedBlock } from '../../src/events/types.ts';
import type { PublishedEvent } from '../../src/webhooks/service.ts';
import { whaleAlerts } from '../../src/whales/schema.ts';
import type { WhaleAlert } from '../../web/src/api-types.ts';
import { registerUser, setTier, startTestApp, type TestApp } from '../support/app.ts';
import { TINY_ABI, TINY_BYTECODE } from '../support/tiny-contract.ts';
import { waitFor } from '../support/wait.ts';

const ADMIN_TOKEN = 'whale-test-admin-token-0123456789';
const MAINNET = 'native-mainnet';
const TESTNET = 'native-testnet';
const DAY_MS = 86_400_000;

type User = Awaited<ReturnType<typeof registerUser>>;

/** A transfer as mined: what the alert must say. */
interface Sent {
  network: string;
  hash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: number;
  index: number;
}

async function chainRpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

const freshAddress = (): Address => privateKeyToAddress(generatePrivateKey());

describe('whale alerts on the devnet (C35, C36)', () => {
  let t: TestApp;
  let maxUser: User;
  /** Every whale.alert event published, as the webhook service received it. */
  const published: PublishedEvent[] = [];

  const chainUrl = (network: string) => t.devnet?.upstreams[network]?.http as string;
  const chainId = (network: string) => t.config.networks.find((n) => n.slug === network)?.chainId as number;
  const clientOf = (network: string) => createPublicClient({ transport: http(chainUrl(network)) });

  /** A block as the follower hands it (C33), read from the chain. */
  async function followedBlock(network: string, number: number): Promise<FollowedBlock> {
    const b = await clientOf(network).getBlock({ blockNumber: BigInt(number), includeTransactions: true });
    return {
      network,
      chainId: chainId(network),
      number: Number(b.number),
      hash: b.hash,
      timestamp: Number(b.timestamp),
      transactions: b.transactions.map((tx) => ({
        hash: tx.hash,
        from: tx.from.toLowerCase(),
        to: tx.to ? tx.to.toLowerCase() : null,
        value: tx.value,
        index: tx.transactionIndex,
        input: tx.input,
      })),
    };
  }

  /** Hands a block to the whale-alert consumer as the follower does: in one transaction, then afterCommit. */
  async function handBlock(block: FollowedBlock): Promise<void> {
    const whales = t.app.parts.whales;
    await t.storage.db.transaction(async (tx) => whales.onBlock(block, tx));
    whales.afterCommit(block);
  }

  /** Sends `coins` from dev account `account` to a fresh address and waits for the receipt. */
  async function send(network: string, account: number, coins: string): Promise<Sent> {
    const dev = t.devnet?.accounts[account];
    assert.ok(dev, `dev account ${account}`);
    const url = chainUrl(network);
    // Enough for any transfer here, whatever the devnet funded the account with.
    await chainRpc(url, 'anvil_setBalance', [dev.address, toHex(parseUnits('50000000', 18))]);
    const chain = defineChain({ id: chainId(network), name: network, nativeCurrency: { name: 'N', symbol: 'N', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
    const wallet = createWalletClient({ account: privateKeyToAccount(dev.privateKey), chain, transport: http(url) });
    const to = freshAddress();
    const value = parseUnits(coins, 18);
    const hash = await wallet.sendTransaction({ to, value });
    const receipt = await clientOf(network).waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.equal(receipt.status, 'success');
    return { network, hash, from: dev.address, to, value, blockNumber: Number(receipt.blockNumber), index: receipt.transactionIndex };
  }

  /**
   * Waits until the app's block follower (C33) has handed on the blocks of `sent`: whatever whale
   * alerts they hold are recorded by then.
   */
  async function recorded(...sent: Sent[]): Promise<void> {
    for (const s of sent) {
      await waitFor(
        () => {
          const cursor = t.app.parts.follower.stats().find((f) => f.network === s.network)?.cursor;
          return cursor !== null && cursor !== undefined && cursor >= s.blockNumber;
        },
        { timeoutMs: 60_000, what: `the follower past block ${s.blockNumber} of ${s.network}` },
      );
    }
  }

  /** A block of synthetic transfers, unknown to the chain (and so to the follower). */
  const syntheticBlock = (base: FollowedBlock, number: number, timestamp: number, values: readonly bigint[]): FollowedBlock => ({
    ...base,
    number,
    timestamp,
    transactions: values.map((value, i) => ({
      hash: `0x${randomBytes(32).toString('hex')}`,
      from: freshAddress().toLowerCase(),
      to: freshAddress().toLowerCase(),
      value,
      index: i,
      input: '0x',
    })),
  });
  const headBlock = async () => followedBlock(MAINNET, Number(await clientOf(MAINNET).getBlockNumber()));

  const list = (user: { auth: { authorization: string } } | undefined, query = '') =>
    t.app.inject({ method: 'GET', url: `/api/v1/whale-alerts${query}`, ...(user ? { headers: user.auth } : {}) });

  const alertsOf = async (query = '') => {
    const res = await list(maxUser, query);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json<{ success: true; data: WhaleAlert[] }>();
    assert.equal(body.success, true);
    return body.data;
  };

  const rowsOf = (hash: string) => t.storage.db.select().from(whaleAlerts).where(eq(whaleAlerts.txHash, hash.toLowerCase()));

  before(async () => {
    t = await startTestApp({ devnet: true, devnetNetworks: [MAINNET, TESTNET], listen: true, env: { ADMIN_TOKEN } });
    const webhooks = t.app.parts.webhooks;
    const publish = webhooks.publish.bind(webhooks);
    webhooks.publish = async (tx, event) => {
      if (event.type === 'whale.alert') published.push(event);
      return publish(tx, event);
    };
    maxUser = await registerUser(t.app);
    await setTier(t.app, maxUser.id, 'max', ADMIN_TOKEN);
  });
  after(async () => {
    await t?.close();
  });

  describe('recording (C35)', () => {
    test('a 150,000-coin transfer becomes an alert with exact fields', async () => {
      const sent = await send(MAINNET, 1, '150000');
      await recorded(sent);
      const block = await clientOf(MAINNET).getBlock({ blockNumber: BigInt(sent.blockNumber) });
      const price = await t.app.parts.prices.nativeUsd(MAINNET);
      assert.notEqual(price, null, 'the devnet price feed gives the native coin a price (C45)');
      const alert = (await alertsOf('?limit=100')).find((a) => a.txHash === sent.hash.toLowerCase());
      assert.ok(alert, 'the transfer is listed');
      assert.match(alert.id, /^wa_[A-Za-z0-9_-]+$/);
      assert.deepEqual(alert, {
        id: alert.id,
        txHash: sent.hash.toLowerCase(),
        from: sent.from.toLowerCase(),
        to: sent.to.toLowerCase(),
        value: '150000',
        valueUsd: price === null ? null : Math.round(150_000 * price * 100) / 100,
        timestamp: new Date(Number(block.timestamp) * 1000).toISOString(),
        blockNumber: sent.blockNumber,
        network: MAINNET,
      });
      // Stored exactly in wei as well, for the minValue filter.
      const [row] = await rowsOf(sent.hash);
      assert.equal(row?.valueWei, parseUnits('150000', 18).toString());
      assert.equal(row?.txIndex, sent.index);
      // The same id on every read, and the alert went out as a whale.alert event.
      assert.equal((await alertsOf('?limit=100')).find((a) => a.txHash === alert.txHash)?.id, alert.id);
      assert.deepEqual(
        published.filter((e) => e.data.txHash === alert.txHash).map((e) => e.data),
        [alert],
      );
    });

    test('a whale-sized transaction that reverted moved nothing: no alert; the next transfer is recorded', async () => {
      const dev = t.devnet?.accounts[4];
      assert.ok(dev);
      const url = chainUrl(MAINNET);
      await chainRpc(url, 'anvil_setBalance', [dev.address, toHex(parseUnits('50000000', 18))]);
      const chain = defineChain({ id: chainId(MAINNET), name: MAINNET, nativeCurrency: { name: 'N', symbol: 'N', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
      const wallet = createWalletClient({ account: privateKeyToAccount(dev.privateKey), chain, transport: http(url) });
      // A contract that reverts on any call it does not know, a plain transfer included.
      const deployed = await clientOf(MAINNET).waitForTransactionReceipt({ hash: await wallet.deployContract({ abi: TINY_ABI, bytecode: TINY_BYTECODE }), pollingInterval: 100 });
      const contract = deployed.contractAddress as Address;
      const hash = await wallet.sendTransaction({ to: contract, value: parseUnits('200000', 18), gas: 100_000n });
      const receipt = await clientOf(MAINNET).waitForTransactionReceipt({ hash, pollingInterval: 100 });
      assert.equal(receipt.status, 'reverted');
      const after = await send(MAINNET, 4, '120000');
      await recorded({ network: MAINNET, hash, from: dev.address, to: contract, value: 0n, blockNumber: Number(receipt.blockNumber), index: receipt.transactionIndex }, after);
      const listed = await alertsOf('?limit=100&minValue=0');
      assert.ok(listed.some((a) => a.txHash === after.hash.toLowerCase()), 'the transfer after it is recorded');
      assert.equal(listed.find((a) => a.txHash === hash.toLowerCase()), undefined, 'the reverted one is not');
      assert.deepEqual(await rowsOf(hash), []);
      assert.equal(published.filter((e) => e.data.txHash === hash.toLowerCase()).length, 0, 'and no whale.alert event went out');
    });

    test('a 5,000-coin transfer is not recorded', async () => {
      const sent = await send(MAINNET, 2, '5000');
      await recorded(sent);
      assert.deepEqual(await rowsOf(sent.hash), []);
      assert.equal((await alertsOf('?limit=100&minValue=0')).some((a) => a.txHash === sent.hash.toLowerCase()), false);
    });

    test('a 50,000-coin transfer is recorded, hidden by the default minValue and shown with minValue=10000', async () => {
      const sent = await send(MAINNET, 3, '50000');
      await recorded(sent);
      const has = async (q: string) => (await alertsOf(`?limit=100${q}`)).some((a) => a.txHash === sent.hash.toLowerCase());
      assert.equal((await rowsOf(sent.hash)).length, 1);
      assert.equal(await has(''), false, 'default minValue is 100000');
      assert.equal(await has('&minValue=10000'), true);
      // minValue is compared exactly, in wei: the boundary is in, one wei above it is out.
      assert.equal(await has('&minValue=50000'), true);
      assert.equal(await has('&minValue=50000.000000000000000001'), false);
      assert.equal(await has('&minValue=49999.999999999999999999'), true);
    });

    test('an alert of the testnet is listed under network=native-testnet only', async () => {
      const sent = await send(TESTNET, 1, '200000');
      await recorded(sent);
      const hash = sent.hash.toLowerCase();
      const testnet = await alertsOf(`?network=${TESTNET}&limit=100`);
      assert.equal(testnet.find((a) => a.txHash === hash)?.network, TESTNET);
      assert.equal((await alertsOf('?limit=100')).some((a) => a.txHash === hash), false);
    });

    test('a block handed twice is recorded once, with one event', async () => {
      const sent = await send(MAINNET, 4, '120000');
      const block = await followedBlock(MAINNET, sent.blockNumber);
      await handBlock(block);
      await handBlock(block);
      assert.equal((await rowsOf(sent.hash)).length, 1);
      assert.equal(published.filter((e) => e.data.txHash === sent.hash.toLowerCase()).length, 1);
    });

    test('an alert written in a transaction that rolls back leaves no row and no event', async () => {
      const block = syntheticBlock(await headBlock(), 2_000_000, Math.floor(Date.now() / 1000), [parseUnits('130000', 18)]);
      const hash = block.transactions[0]?.hash as string;
      await assert.rejects(
        t.storage.db.transaction(async (tx) => {
          await t.app.parts.whales.onBlock(block, tx);
          assert.equal((await tx.select().from(whaleAlerts).where(eq(whaleAlerts.txHash, hash))).length, 1, 'written in the transaction');
          throw new Error('cursor move failed');
        }),
        /cursor move failed/,
      );
      assert.deepEqual(await rowsOf(hash), []);
      // Handed again (as the follower retries a failed block), it is recorded.
      await handBlock(block);
      assert.equal((await rowsOf(hash)).length, 1);
    });
  });

  describe('listing (C36)', () => {
    test('newest first by block then transaction index, and before pages back through the same list', async () => {
      // Two at once from two accounts (often one block), then one more.
      const pair = await Promise.all([send(MAINNET, 6, '110000'), send(MAINNET, 7, '111000')]);
      const last = await send(MAINNET, 6, '112000');
      const mine = [...pair, last];
      await recorded(...mine);

      const all = await alertsOf('?limit=100&minValue=10000');
      const order = all.map((a) => `${a.blockNumber}`.padStart(12, '0'));
      assert.deepEqual(order, [...order].sort().reverse(), 'block numbers descending');
      const expected = [...mine]
        .sort((a, b) => b.blockNumber - a.blockNumber || b.index - a.index)
        .map((s) => s.hash.toLowerCase());
      assert.deepEqual(
        all.map((a) => a.txHash).filter((h) => expected.includes(h)),
        expected,
      );

      // Page by page, two at a time: the same alerts in the same order, no repeats.
      const paged: WhaleAlert[] = [];
      let before: string | undefined;
      for (;;) {
        const page = await alertsOf(`?limit=2&minValue=10000${before ? `&before=${before}` : ''}`);
        assert.ok(page.length <= 2);
        paged.push(...page);
        if (page.length < 2) break;
        before = page[page.length - 1]?.id;
      }
      assert.deepEqual(
        paged.map((a) => a.id),
        all.map((a) => a.id),
      );
    });

    test('limit defaults to 20 and caps the page', async () => {
      // Enough alerts for a full default page: synthetic transfers in one block.
      const block = syntheticBlock(await headBlock(), 3_000_000, Math.floor(Date.now() / 1000), Array.from({ length: 25 }, () => parseUnits('100000', 18)));
      await handBlock(block);
      assert.equal((await alertsOf()).length, 20);
      assert.equal((await alertsOf('?limit=3')).length, 3);
      assert.ok((await alertsOf('?limit=100')).length >= 25);
    });

    test('only the max and enterprise plans read alerts; others get 403 PLAN_FEATURE naming them', async () => {
      const free = await registerUser(t.app);
      const pro = await registerUser(t.app);
      await setTier(t.app, pro.id, 'pro', ADMIN_TOKEN);
      for (const user of [free, pro]) {
        const res = await list(user);
        assert.equal(res.statusCode, 403);
        const body = res.json();
        assert.equal(body.success, false);
        assert.equal(body.error.code, 'PLAN_FEATURE');
        assert.match(body.error.message, /\bmax\b/);
        assert.match(body.error.message, /\benterprise\b/);
        // The plan is judged before the query: bad input from another plan is still 403.
        assert.equal((await list(user, '?limit=0')).statusCode, 403);
      }
      const enterprise = await registerUser(t.app);
      await setTier(t.app, enterprise.id, 'enterprise', ADMIN_TOKEN);
      assert.equal((await list(enterprise)).statusCode, 200);
      assert.equal((await list(undefined)).statusCode, 401);
    });

    test('bad parameters are 400 VALIDATION_ERROR', async () => {
      const [some] = await alertsOf('?limit=1&minValue=0');
      assert.ok(some);
      const testnetAlert = (await alertsOf(`?network=${TESTNET}&limit=1&minValue=0`))[0];
      assert.ok(testnetAlert);
      const cases = [
        '?limit=0',
        '?limit=101',
        '?limit=abc',
        '?limit=1.5',
        '?minValue=-1',
        '?minValue=abc',
        '?minValue=1e5',
        '?minValue=',
        '?minValue=.5',
        '?minValue=0.0000000000000000001', // 19 decimals: the native coin has 18
        '?network=ethereum-mainnet', // a network, but not a whale-alert network
        '?network=nope',
        '?network=NATIVE-MAINNET',
        '?before=wa_unknown',
        '?before=not%20an%20id',
        `?before=${testnetAlert.id}`, // an alert of another network
        '?foo=1',
        '?minValue=1%00',
        '?limit=1&limit=2',
        '?limit=1&limit=1', // a repeated parameter is refused, even with one value
      ];
      for (const q of cases) {
        const res = await list(maxUser, q);
        assert.equal(res.statusCode, 400, `${q}: ${res.body}`);
        const body = res.json();
        assert.equal(body.success, false, q);
        assert.equal(body.error.code, 'VALIDATION_ERROR', q);
      }
      for (const q of ['?minValue=0', '?minValue=100000.5', '?minValue=0.000000000000000001', `?before=${some.id}`]) {
        assert.equal((await list(maxUser, q)).statusCode, 200, q);
      }
    });

    test('the route is in the OpenAPI document with its operationId and bearer security', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json();
      const op = doc.paths['/api/v1/whale-alerts']?.get;
      assert.equal(op?.operationId, 'listWhaleAlerts');
      assert.deepEqual(op?.security, [{ bearerAuth: [] }]);
      const params = (op?.parameters as { name: string }[]).map((p) => p.name).sort();
      assert.deepEqual(params, ['before', 'limit', 'minValue', 'network']);
    });
  });

  describe('retention (C35)', () => {
    test('alerts older than retentionDays are deleted, newer ones kept', async () => {
      const days = t.config.whaleAlerts.retentionDays;
      const base = await headBlock();
      const synthetic = (ageDays: number, n: number) =>
        syntheticBlock(base, 4_000_000 + n, Math.floor((Date.now() - ageDays * DAY_MS) / 1000), [parseUnits('100000', 18)]);
      const old = synthetic(days + 1, 1);
      const young = synthetic(days - 1, 2);
      await handBlock(old);
      await handBlock(young);
      const oldHash = old.transactions[0]?.hash as string;
      const youngHash = young.transactions[0]?.hash as string;
      const oldId = (await rowsOf(oldHash))[0]?.id;
      assert.ok(oldId);

      const deleted = await t.app.parts.whales.sweep();
      assert.ok(deleted >= 1);
      assert.deepEqual(await rowsOf(oldHash), []);
      assert.equal((await rowsOf(youngHash)).length, 1);
      // A deleted alert cannot anchor a page any more.
      assert.equal((await list(maxUser, `?before=${oldId}`)).statusCode, 400);
      assert.equal(await t.app.parts.whales.sweep(), 0);
    });
  });
});
