// address.activity (C38) on the devnet: a real transfer sent with viem from a dev account is
// followed (C33) and delivered to the endpoints watching its sender ("out") and recipient ("in").
// And whale.alert: a whale-sized transfer recorded by whale alerts (C35) reaches its endpoint.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { createWalletClient, defineChain, http, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { Webhook } from 'standardwebhooks';
import { validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { Prices } from '../../src/prices/prices.ts';
import { AddressActivity } from '../../src/webhooks/address-activity.ts';
import { startTestApp, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, deliveries, FAST_WEBHOOKS, type Receiver, startReceiver, type User, userOn } from './helpers.ts';

const NET = 'ethereum-sepolia';
// anvil's first dev account (its well-known test mnemonic): funded on every devnet chain.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

describe('address.activity on the devnet (C38)', () => {
  let t: TestApp;
  let r: Receiver;
  let user: User;

  before(async () => {
    r = await startReceiver();
    t = await startTestApp({
      devnet: true,
      devnetNetworks: [NET, 'native-testnet'],
      env: { ADMIN_TOKEN },
      overrides: { webhooks: FAST_WEBHOOKS, events: { confirmations: 1, pollIntervalMs: 100 }, whaleAlerts: { networks: ['native-testnet'], recordMinValue: '5' } },
    });
    user = await userOn(t.app);
  });
  after(async () => {
    await t?.close();
    await r?.close();
  });

  const walletOn = (slug: string) => {
    const rpc = t.devnet?.upstreams[slug]?.http as string;
    const chainId = t.config.networks.find((n) => n.slug === slug)?.chainId as number;
    const chain = defineChain({ id: chainId, name: slug, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpc] } } });
    return createWalletClient({ account: privateKeyToAccount(DEV_KEY), chain, transport: http(rpc) });
  };
  const events = (secret: string, path: string) =>
    r.received.filter((x) => x.path === path).map((x) => (new Webhook(secret).verify(x.body, x.headers as Record<string, string>) as { type: string; timestamp: string; data: Record<string, unknown> }));

  test('a transfer from a dev account reaches the watcher of the recipient ("in") and of the sender ("out")', async () => {
    const dev = privateKeyToAccount(DEV_KEY);
    const recipient = privateKeyToAddress(generatePrivateKey());
    const inbound = await createWebhook(t.app, user, { url: `${r.url}/in`, events: ['address.activity'], filters: { networks: [NET], addresses: [recipient] } });
    const outbound = await createWebhook(t.app, user, {
      url: `${r.url}/out`,
      events: ['address.activity'],
      filters: { networks: [NET], addresses: [dev.address.toLowerCase()], minValue: '1' },
    });
    // Another network only (also on the devnet): never told about this one.
    await createWebhook(t.app, user, { url: `${r.url}/other`, events: ['address.activity'], filters: { networks: ['native-testnet'], addresses: [recipient] } });
    await waitFor(() => t.app.parts.follower.stats().find((s) => s.network === NET && s.leaseHeld && s.cursor !== null), { what: `the follower on ${NET}` });

    const wallet = walletOn(NET);
    const small = await wallet.sendTransaction({ to: recipient, value: parseEther('0.25') });
    const hash = await wallet.sendTransaction({ to: recipient, value: parseEther('1.000000000000000001') });

    await waitFor(() => events(inbound.secret, '/hook/in').length === 2, { what: 'the inbound events', timeoutMs: 20_000 });
    const inEvents = events(inbound.secret, '/hook/in');
    const last = inEvents.find((e) => e.data.txHash === hash);
    assert.ok(last, 'the second transfer');
    assert.equal(last.type, 'address.activity');
    assert.equal(last.data.network, NET);
    assert.equal(last.data.from, dev.address.toLowerCase());
    assert.equal(last.data.to, recipient.toLowerCase());
    assert.equal(last.data.value, '1.000000000000000001', 'exact, in whole native units');
    assert.equal(last.data.direction, 'in');
    assert.equal(typeof last.data.blockNumber, 'number');
    assert.equal(last.data.valueUsd, 0, 'a testnet coin without a configured price is worth 0 USD (C34)');
    assert.ok(inEvents.some((e) => e.data.txHash === small && e.data.value === '0.25'));

    // The sender's watcher has minValue 1: the 0.25 transfer is left out.
    await waitFor(() => events(outbound.secret, '/hook/out').length === 1, { what: 'the outbound event' });
    const out = events(outbound.secret, '/hook/out')[0];
    assert.equal(out?.data.txHash, hash);
    assert.equal(out?.data.direction, 'out');
    assert.equal(r.received.filter((x) => x.path === '/hook/other').length, 0);
  });

  test('prices are read before the block\'s storage transaction, never inside it (a slow price source holds no storage)', async () => {
    const db = t.storage.db as unknown as { transaction: (...args: unknown[]) => Promise<unknown> };
    const prices = t.app.parts.prices;
    const transaction = db.transaction;
    const nativeUsd = prices.nativeUsd.bind(prices);
    let open = 0;
    const reads: boolean[] = [];
    db.transaction = async (...args: unknown[]) => {
      open++;
      try {
        return await transaction.apply(db, args);
      } finally {
        open--;
      }
    };
    prices.nativeUsd = async (network: string) => {
      reads.push(open > 0);
      return nativeUsd(network);
    };
    // And the node reads of the consumers (whale alerts' receipts): outside too.
    const pools = [NET, 'native-testnet'].map((slug) => t.app.parts.upstreams.pool(slug));
    const nodeReads: string[] = [];
    for (const pool of pools) {
      const request = pool.request.bind(pool);
      (pool as { request: unknown }).request = (method: string, params: readonly unknown[], opts?: object) => {
        if (open > 0) nodeReads.push(method);
        return request(method, params, opts);
      };
    }
    try {
      const recipient = privateKeyToAddress(generatePrivateKey());
      const hook = await createWebhook(t.app, user, { url: `${r.url}/priced`, events: ['address.activity', 'whale.alert'], filters: { networks: [NET, 'native-testnet'], addresses: [recipient] } });
      await waitFor(() => t.app.parts.follower.stats().find((s) => s.network === NET && s.leaseHeld && s.cursor !== null), { what: `the follower on ${NET}` });
      await walletOn(NET).sendTransaction({ to: recipient, value: parseEther('0.5') });
      // Whale-sized on native-testnet (recordMinValue 5 here): whale alerts read a price too.
      await walletOn('native-testnet').sendTransaction({ to: recipient, value: parseEther('6') });
      await waitFor(() => events(hook.secret, '/hook/priced').filter((e) => e.type === 'address.activity').length === 2, { what: 'both transfers', timeoutMs: 20_000 });
      await waitFor(() => events(hook.secret, '/hook/priced').some((e) => e.type === 'whale.alert'), { what: 'the whale alert', timeoutMs: 20_000 });
      assert.ok(reads.length > 0, 'prices were read');
      assert.deepEqual(
        reads.filter((inside) => inside),
        [],
        'no price read inside a storage transaction',
      );
      assert.deepEqual(nodeReads, [], 'no node read inside a storage transaction');
    } finally {
      delete (db as { transaction?: unknown }).transaction; // the prototype's methods again
      delete (prices as { nativeUsd?: unknown }).nativeUsd;
      for (const pool of pools) delete (pool as { request?: unknown }).request;
    }
  });

  test('valueUsd is computed on integers from the wei and rounded half up once (0.7 coins at 0.05 USD is 0.04)', async () => {
    // The same consumer as the app's, with the network priced at 0.05 USD (as the devnet's native coin).
    const draft = structuredClone<Config>(t.config);
    const net = draft.networks.find((n) => n.slug === NET);
    assert.ok(net);
    net.price = { type: 'fixed', usd: 0.05 };
    const prices = new Prices({ settings: validateConfig(draft), upstreams: t.app.parts.upstreams, logger: pino({ level: 'silent' }) });
    const activity = new AddressActivity({ webhooks: t.app.parts.webhooks, prices, upstreams: t.app.parts.upstreams, networks: t.config.networks, logger: pino({ level: 'silent' }) });
    const watched = privateKeyToAddress(generatePrivateKey()).toLowerCase();
    await createWebhook(t.app, user, { url: `${r.url}/usd`, events: ['address.activity'], filters: { networks: [NET], addresses: [watched] } });
    // 0.7 * 0.05 = 0.035 USD exactly: half up is 0.04; in floating point it is 0.034999... and rounds to 0.03.
    const cases = [
      { value: parseEther('0.7'), usd: 0.04 },
      { value: parseEther('1234567.000000000000000001'), usd: 61728.35 },
    ];
    const block = {
      network: NET,
      chainId: t.config.networks.find((n) => n.slug === NET)?.chainId as number,
      number: 9_000_000,
      hash: `0x${randomBytes(32).toString('hex')}`,
      timestamp: Math.floor(Date.now() / 1000),
      transactions: cases.map((c, i) => ({
        hash: `0x${randomBytes(32).toString('hex')}`,
        from: privateKeyToAddress(generatePrivateKey()).toLowerCase(),
        to: watched,
        value: c.value,
        index: i,
        input: '0x',
      })),
    };
    try {
      await t.storage.db.transaction((tx) => activity.onBlock(block, tx));
    } finally {
      prices.close();
    }
    for (const [i, c] of cases.entries()) {
      const hash = block.transactions[i]?.hash as string;
      const res = await t.storage.db.execute(sql`select body from webhook_events where type = 'address.activity' and (body::jsonb -> 'data' ->> 'txHash') = ${hash}`);
      const rows = (res as { rows: Array<{ body: string }> }).rows;
      assert.equal(rows.length, 1, `one event for ${hash}`);
      const data = (JSON.parse(rows[0]?.body as string) as { data: Record<string, unknown> }).data;
      assert.equal(data.valueUsd, c.usd, `valueUsd of ${String(data.value)}`);
      assert.equal(data.direction, 'in');
    }
  });

  test('a transfer that reverted moved no coin: no event for it (C35), while the next one is delivered', async () => {
    const [refusing, taking] = [privateKeyToAddress(generatePrivateKey()), privateKeyToAddress(generatePrivateKey())];
    const rpc = t.devnet?.upstreams[NET]?.http as string;
    // The recipient's code reverts whatever it is sent: REVERT(0, 0).
    const set = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'anvil_setCode', params: [refusing, '0x60006000fd'] }) });
    assert.equal(((await set.json()) as { error?: unknown }).error, undefined);
    const hook = await createWebhook(t.app, user, { url: `${r.url}/reverted`, events: ['address.activity'], filters: { networks: [NET], addresses: [refusing, taking] } });
    await waitFor(() => t.app.parts.follower.stats().find((s) => s.network === NET && s.leaseHeld && s.cursor !== null), { what: `the follower on ${NET}` });

    const wallet = walletOn(NET);
    // Under the outbound watcher's minValue (1): only this endpoint watches these transfers. A gas
    // limit of its own, as viem's estimate would refuse the reverting one.
    const failed = await wallet.sendTransaction({ to: refusing, value: parseEther('0.5'), gas: 100_000n });
    const kept = await wallet.sendTransaction({ to: taking, value: parseEther('0.5') });
    await waitFor(() => events(hook.secret, '/hook/reverted').some((e) => e.data.txHash === kept), { what: 'the event of the transfer that went through', timeoutMs: 20_000 });
    const receipt = await fetch(rpc, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [failed] }) });
    assert.equal(((await receipt.json()) as { result: { status: string } }).result.status, '0x0', 'it did revert');
    // Its block came before (or with) the kept one's, and events are queued with their block: none was.
    const queued = await deliveries(t.app, user, hook.id);
    assert.equal(queued.length, 1, JSON.stringify(queued));
    assert.ok(!events(hook.secret, '/hook/reverted').some((e) => e.data.txHash === failed));
  });

  test('a whale-sized transfer on a whale-alert network arrives as a whale.alert event (C35, C38)', async () => {
    const hook = await createWebhook(t.app, user, { url: `${r.url}/whales`, events: ['whale.alert'], filters: { networks: ['native-testnet'], minValue: '6' } });
    await waitFor(() => t.app.parts.follower.stats().find((s) => s.network === 'native-testnet' && s.leaseHeld && s.cursor !== null), { what: 'the follower on native-testnet' });
    const wallet = walletOn('native-testnet');
    const to = privateKeyToAddress(generatePrivateKey());
    await wallet.sendTransaction({ to, value: parseEther('5.5') }); // recorded, below the endpoint's minValue
    const hash = await wallet.sendTransaction({ to, value: parseEther('7.25') });
    await waitFor(() => events(hook.secret, '/hook/whales').some((e) => e.data.txHash === hash), { what: 'the whale.alert event', timeoutMs: 20_000 });
    // (Other whale-sized traffic on the devnet may arrive too: only transfers to this recipient count.)
    const got = events(hook.secret, '/hook/whales').filter((e) => e.data.to === to.toLowerCase());
    assert.equal(got.length, 1, 'the 5.5 transfer is under the endpoint minValue');
    assert.equal(got[0]?.type, 'whale.alert');
    assert.equal(got[0]?.data.value, '7.25');
    assert.equal(got[0]?.data.to, to.toLowerCase());
    assert.equal(got[0]?.data.network, 'native-testnet');
  });

  test('the follower follows the networks of enabled address.activity endpoints only', async () => {
    const nets = await t.app.parts.webhooks.activityNetworks();
    assert.ok(nets.includes(NET) && nets.includes('native-testnet'));
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: user.auth });
    for (const w of list.json().data as Array<{ id: string }>) {
      await t.app.inject({ method: 'PATCH', url: `/api/v1/webhooks/${w.id}`, headers: user.auth, payload: { status: 'disabled' } });
    }
    assert.deepEqual(await t.app.parts.webhooks.activityNetworks(), []);
    await waitFor(() => !t.app.parts.follower.stats().some((s) => s.network === NET), { what: 'the follower to stop' });
  });
});
