// End to end on two instances of the gateway sharing one PostgreSQL database and one Redis, both
// following one devnet chain: a whale transfer becomes exactly one whale alert (C35) and, for a
// max-plan endpoint subscribed to whale.alert, exactly one signed delivery (C38, C39), whichever
// instance holds the follower's lease (C33), also after the holder stops and the other takes over.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eq, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { type Address, createPublicClient, createWalletClient, defineChain, type Hex, http, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { type Devnet, startDevnet } from '../../src/devnet/devnet.ts';
import type { FollowedBlock } from '../../src/events/types.ts';
import { webhookAttempts, webhookDeliveries, webhookEvents } from '../../src/webhooks/schema.ts';
import { whaleAlerts } from '../../src/whales/schema.ts';
import type { WhaleAlert } from '../../web/src/api-types.ts';
import type { TestApp } from '../support/app.ts';
import { type ScaleOut, startScaleOut } from '../support/scale-out.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN_TOKEN, createWebhook, FAST_WEBHOOKS, type Receiver, startReceiver, type User, userOn } from '../webhooks/helpers.ts';

const MAINNET = 'native-mainnet';
const CHAIN_ID = 50;
const skip = (await serviceSkip('PostgreSQL')) || (await serviceSkip('Redis'));

describe('chain events on two instances sharing PostgreSQL and Redis (C33, C35, C38, C39)', { skip }, () => {
  let devnet: Devnet;
  let receiver: Receiver;
  let dir: string;
  /** The two instances; one is stopped by the takeover test. */
  let scale: ScaleOut | undefined;
  const apps: TestApp[] = [];
  let user: User;
  let secret: string;
  let hookPath: string;

  before(async () => {
    devnet = await startDevnet({ networks: [{ slug: MAINNET, chainId: CHAIN_ID, native: true }], nativeBlockTimeSeconds: 1 });
    receiver = await startReceiver();
    // Both instances on the one chain, priced from its feed (C34, C45), as `--devnet` sets it up.
    dir = await mkdtemp(path.join(tmpdir(), 'junction-events-e2e-'));
    const configFile = path.join(dir, 'gateway.json');
    const chain = devnet.upstreams[MAINNET] as { http: string; ws: string };
    const feed = devnet.priceFeeds[MAINNET] as Address;
    await writeFile(
      configFile,
      JSON.stringify({
        networks: [{ slug: MAINNET, upstreams: [{ http: chain.http, ws: chain.ws }], price: { type: 'chainlink', network: MAINNET, address: feed } }],
      }),
    );
    scale = await startScaleOut({
      env: { ADMIN_TOKEN, GATEWAY_CONFIG: configFile },
      overrides: { webhooks: FAST_WEBHOOKS, whaleAlerts: { networks: [MAINNET] }, events: { confirmations: 1 } },
    });
    apps.push(scale.a, scale.b);
    const [a] = apps as [TestApp];
    user = await userOn(a.app, 'max');
    hookPath = '/hook/whales';
    const hook = await createWebhook(a.app, user, { url: `${receiver.url}/whales`, events: ['whale.alert'], filters: { networks: [MAINNET] } });
    secret = hook.secret;
  });
  after(async () => {
    await scale?.close();
    await receiver?.close();
    await devnet?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const live = () => apps.filter((t) => !scale?.closed.has(t));
  /** The live instances holding the follower's lease on the chain. */
  const holders = () => live().filter((t) => t.app.parts.follower.stats().some((s) => s.network === MAINNET && s.leaseHeld));

  /** A whale-sized transfer from dev account `account` to a fresh address, mined. */
  async function sendWhale(account: number, coins: string): Promise<{ hash: Hex; from: Address; to: Address; blockNumber: number }> {
    const dev = devnet.accounts[account];
    assert.ok(dev);
    const url = (devnet.upstreams[MAINNET] as { http: string }).http;
    const chain = defineChain({ id: CHAIN_ID, name: MAINNET, nativeCurrency: { name: 'N', symbol: 'N', decimals: 18 }, rpcUrls: { default: { http: [url] } } });
    const wallet = createWalletClient({ account: privateKeyToAccount(dev.privateKey), chain, transport: http(url) });
    const to = privateKeyToAddress(generatePrivateKey());
    const hash = await wallet.sendTransaction({ to, value: parseUnits(coins, 18) });
    const receipt = await createPublicClient({ chain, transport: http(url) }).waitForTransactionReceipt({ hash, pollingInterval: 100 });
    assert.equal(receipt.status, 'success');
    return { hash, from: dev.address, to, blockNumber: Number(receipt.blockNumber) };
  }

  /** What storage and the receiver hold for the transfer `hash`, once its one delivery is delivered. */
  async function settled(hash: Hex) {
    const txHash = hash.toLowerCase();
    const db = (live()[0] as TestApp).storage.db;
    const deliveryRows = () =>
      db
        .select({ id: webhookDeliveries.id, status: webhookDeliveries.status, eventId: webhookDeliveries.eventId, lastStatusCode: webhookDeliveries.lastStatusCode })
        .from(webhookDeliveries)
        .innerJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
        .where(sql`${webhookEvents.type} = 'whale.alert' and (${webhookEvents.body}::jsonb -> 'data' ->> 'txHash') = ${txHash}`);
    await waitFor(async () => (await deliveryRows()).some((d) => d.status === 'delivered'), {
      timeoutMs: 60_000,
      what: `the whale.alert delivery of ${txHash}`,
    });
    const alerts = await db.select().from(whaleAlerts).where(eq(whaleAlerts.txHash, txHash));
    const events = await db
      .select({ id: webhookEvents.id })
      .from(webhookEvents)
      .where(sql`${webhookEvents.type} = 'whale.alert' and (${webhookEvents.body}::jsonb -> 'data' ->> 'txHash') = ${txHash}`);
    const deliveries = await deliveryRows();
    const okAttempts = await db
      .select({ id: webhookAttempts.deliveryId })
      .from(webhookAttempts)
      .where(sql`${webhookAttempts.deliveryId} in (${sql.join(deliveries.map((d) => sql`${d.id}`), sql`, `)}) and ${webhookAttempts.statusCode} between 200 and 299`);
    const received = receiver.received
      .filter((x) => x.path === hookPath)
      .map((x) => ({ id: x.headers['webhook-id'], event: new Webhook(secret).verify(x.body, x.headers as Record<string, string>) as { type: string; data: WhaleAlert } }))
      .filter((x) => x.event.data.txHash === txHash);
    return { alerts, events, deliveries, okAttempts, received };
  }

  const listed = async (t: TestApp, txHash: string): Promise<WhaleAlert | undefined> => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/whale-alerts?limit=100&minValue=10000', headers: user.auth });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: WhaleAlert[] }>().data.find((x) => x.txHash === txHash);
  };

  async function assertOnce(sent: { hash: Hex; from: Address; to: Address; blockNumber: number }, coins: string): Promise<void> {
    const txHash = sent.hash.toLowerCase();
    const s = await settled(sent.hash);
    assert.equal(s.alerts.length, 1, 'one alert row');
    assert.equal(s.events.length, 1, 'one whale.alert event');
    assert.equal(s.deliveries.length, 1, 'one delivery for the one endpoint');
    assert.equal(s.deliveries[0]?.status, 'delivered');
    assert.equal(s.okAttempts.length, 1, 'one 2xx attempt');
    assert.equal(s.received.length, 1, 'the receiver got it once');
    assert.equal(s.received[0]?.id, s.deliveries[0]?.eventId, 'webhook-id is the event id');
    const price = await (live()[0] as TestApp).app.parts.prices.nativeUsd(MAINNET);
    assert.notEqual(price, null, 'the devnet feed prices the coin');
    // Every live instance lists the same alert, and it is what the receiver got.
    for (const t of live()) {
      const alert = await listed(t, txHash);
      assert.ok(alert, 'listed');
      assert.equal(alert.value, coins);
      assert.equal(alert.from, sent.from.toLowerCase());
      assert.equal(alert.to, sent.to.toLowerCase());
      assert.equal(alert.blockNumber, sent.blockNumber);
      assert.equal(alert.valueUsd, Math.round(Number(coins) * (price as number) * 100) / 100);
      assert.deepEqual(s.received[0]?.event.data, alert);
      assert.equal(s.received[0]?.event.type, 'whale.alert');
    }
  }

  test('both instances follow, one holds the lease, and a whale transfer is alerted and delivered once', async () => {
    await waitFor(() => apps.every((t) => t.app.parts.follower.stats().some((s) => s.network === MAINNET)) && holders().length === 1, {
      timeoutMs: 30_000,
      what: 'both followers running, one lease holder',
    });
    const sent = await sendWhale(1, '150000');
    await assertOnce(sent, '150000');
    assert.equal(holders().length, 1, 'still one holder');
  });

  test('one block handed to both instances at once is recorded and published once (the second waits on the first)', async () => {
    const [a, b] = apps as [TestApp, TestApp];
    const head = await createPublicClient({ transport: http((devnet.upstreams[MAINNET] as { http: string }).http) }).getBlock();
    const txHash = `0x${randomBytes(32).toString('hex')}`;
    const block: FollowedBlock = {
      network: MAINNET,
      chainId: CHAIN_ID,
      number: Number(head.number),
      hash: head.hash,
      timestamp: Number(head.timestamp),
      transactions: [{ hash: txHash, from: privateKeyToAddress(generatePrivateKey()).toLowerCase(), to: privateKeyToAddress(generatePrivateKey()).toLowerCase(), value: parseUnits('300000', 18), index: 0, input: '0x' }],
    };
    let second: Promise<void> | undefined;
    await a.storage.db.transaction(async (tx) => {
      await a.app.parts.whales.onBlock(block, tx);
      // B's insert of the same (network, txHash) must wait for A's transaction to end.
      second = b.storage.db.transaction((tx2) => b.app.parts.whales.onBlock(block, tx2));
      await waitFor(
        async () => {
          const res = await a.storage.db.execute(
            sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike '%whale_alerts%'`,
          );
          return ((res as { rows: Array<{ n: number }> }).rows[0]?.n ?? 0) > 0;
        },
        { what: "B's insert waiting on A's row" },
      );
    });
    await second;
    const db = a.storage.db;
    assert.equal((await db.select().from(whaleAlerts).where(eq(whaleAlerts.txHash, txHash))).length, 1);
    const events = await db
      .select({ id: webhookEvents.id })
      .from(webhookEvents)
      .where(sql`${webhookEvents.type} = 'whale.alert' and (${webhookEvents.body}::jsonb -> 'data' ->> 'txHash') = ${txHash}`);
    assert.equal(events.length, 1);
  });

  test('when the holder stops, the other instance takes over and the next whale is alerted and delivered once', async () => {
    const [holder] = holders();
    assert.ok(holder);
    await scale?.closeOne(holder);
    const [other] = live();
    assert.ok(other);
    await waitFor(() => holders().includes(other), { timeoutMs: 30_000, what: 'the other instance taking the lease' });
    const sent = await sendWhale(2, '250000');
    await assertOnce(sent, '250000');
  });
});
