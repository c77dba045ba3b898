// C41: a restart between the open and the fill still ends settled once, a fill recorded but never
// sent is sent after a restart with its recorded bytes, concurrent intents on two instances never
// reserve more than the solver holds, and two instances on one PostgreSQL database send one fill
// per order between them.
// slow: intents across restarts and two instances on anvil
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { and, eq, inArray } from 'drizzle-orm';
import { type Hex, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { intents as intentsTable, intentTransactions } from '../../src/intents/schema.ts';
import type { Intent } from '../../src/intents/view.ts';
import { createTestDatabase, registerUser, type TestApp } from '../support/app.ts';
import { serviceSkip } from '../support/services.ts';
import { waitFor } from '../support/wait.ts';
import { DESTINATION, type IntentChains, ORIGIN, startIntentApp, startIntentChains } from './helpers.ts';

const skip = await serviceSkip('PostgreSQL');
let chains: IntentChains;
let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
const apps: TestApp[] = [];

before(async () => {
  if (skip) return;
  chains = await startIntentChains();
  db = await createTestDatabase();
});

after(async () => {
  for (const a of apps) await a.close().catch(() => {});
  await chains?.stop();
  await db?.drop();
});

/** The N+k test is about the wallet's own balance (3 ETH intents against 10 ETH): the C51 shares of it (shares.test.ts) allow all of it here. */
const WHOLE_BALANCE = { maxReservePerIntent: 100, maxReservePerAccount: 100, maxReserveAwaitingOpen: 100 };

async function start(): Promise<TestApp> {
  const a = await startIntentApp(chains, { backend: 'postgres', databaseUrl: db?.url as string, intents: WHOLE_BALANCE });
  apps.push(a);
  return a;
}

async function open(intent: Intent, account: number): Promise<void> {
  const w = chains.wallet('origin', account);
  const hash = await w.sendTransaction({ to: intent.open.to, data: intent.open.data, value: BigInt(intent.open.value), account: w.account, chain: w.chain });
  assert.equal((await chains.pub.origin.waitForTransactionReceipt({ hash })).status, 'success');
}

async function settled(a: TestApp, auth: { authorization: string }, id: string): Promise<Intent> {
  return waitFor(
    async () => {
      const intent = (await a.app.inject({ method: 'GET', url: `/api/v1/chain-abstraction/intents/${id}`, headers: auth })).json().data as Intent;
      return intent.status === 'settled' ? intent : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: `intent ${id} settled` },
  );
}

/**
 * A relay in front of a node that passes every call on but swallows each eth_sendRawTransaction:
 * it reads it and drops the connection, as an instance that died between recording its fill and
 * sending it would leave things (recorded, never on the chain).
 */
async function startSwallowingRelay(target: string): Promise<{ url: string; swallowed: Hex[]; close(): Promise<void> }> {
  const swallowed: Hex[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString();
      const calls = [JSON.parse(body) as { method?: string; params?: unknown[] }].flat();
      const send = calls.find((c) => c.method === 'eth_sendRawTransaction');
      if (send) {
        swallowed.push(send.params?.[0] as Hex);
        req.socket.destroy();
        return;
      }
      const answer = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(await answer.text());
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    swallowed,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** POST /chain-abstraction/intent from ORIGIN to DESTINATION, sent by dev account `account`. */
function requestIntent(a: TestApp, auth: Record<string, string>, amount: string, account: number, recipient?: string) {
  return a.app.inject({
    method: 'POST',
    url: '/api/v1/chain-abstraction/intent',
    headers: auth,
    payload: { fromNetwork: ORIGIN.slug, toNetwork: DESTINATION.slug, amount, sender: chains.devnet.accounts[account]?.address, ...(recipient ? { recipient } : {}) },
  });
}

async function fills(a: TestApp, id: string) {
  return a.storage.db.select().from(intentTransactions).where(eq(intentTransactions.intentId, id));
}

describe('intents across restarts and instances (C41)', { skip }, () => {
  test('an intent opened while the gateway is down is filled and settled once after the restart', async () => {
    const first = await start();
    const user = await registerUser(first.app);
    const recipient = privateKeyToAddress(generatePrivateKey());
    const res = await requestIntent(first, user.auth, '0.75', 5, recipient);
    assert.equal(res.statusCode, 200, res.body);
    const intent = res.json().data as Intent;
    await first.close();
    apps.splice(apps.indexOf(first), 1);

    await open(intent, 5);
    const second = await start();
    const done = await settled(second, user.auth, intent.id);
    assert.equal(await chains.pub.destination.getBalance({ address: recipient }), parseEther(done.outputAmount));
    const txs = await fills(second, intent.id);
    assert.deepEqual(txs.map((x) => x.kind).sort(), ['fill', 'settle']);
  });

  test('two instances on one database send one fill and one settle per order', async () => {
    const a = apps[0] ?? (await start());
    const b = await start();
    const user = await registerUser(a.app);
    const recipient = privateKeyToAddress(generatePrivateKey());
    const created = await Promise.all(
      [6, 7].map(async (account) => {
        const res = await requestIntent(a, user.auth, '0.5', account, recipient);
        assert.equal(res.statusCode, 200, res.body);
        return { intent: res.json().data as Intent, account };
      }),
    );
    const sentBefore = a.app.parts.solver.stats.sent.fill + b.app.parts.solver.stats.sent.fill;
    for (const { intent, account } of created) await open(intent, account);
    let total = 0n;
    for (const { intent } of created) {
      const done = await settled(b, user.auth, intent.id);
      total += parseEther(done.outputAmount);
      const txs = await fills(b, intent.id);
      assert.equal(txs.filter((x) => x.kind === 'fill').length, 1);
      assert.equal(txs.filter((x) => x.kind === 'settle').length, 1);
    }
    assert.equal(a.app.parts.solver.stats.sent.fill + b.app.parts.solver.stats.sent.fill - sentBefore, 2);
    assert.equal(await chains.pub.destination.getBalance({ address: recipient }), total);
  });

  test('a fill recorded but never sent (the instance went down first) is sent after the restart with its recorded bytes, once', async () => {
    // Alone on the database: another running instance would send the recorded fill itself.
    for (const a of apps.splice(0)) await a.close();
    const relay = await startSwallowingRelay(chains.url('destination'));
    try {
      const first = await startIntentApp(chains, { backend: 'postgres', databaseUrl: db?.url as string, env: { UPSTREAM_ARBITRUM: relay.url }, intents: WHOLE_BALANCE });
      apps.push(first);
      const user = await registerUser(first.app);
      const recipient = privateKeyToAddress(generatePrivateKey());
      const res = await requestIntent(first, user.auth, '0.6', 8, recipient);
      assert.equal(res.statusCode, 200, res.body);
      const intent = res.json().data as Intent;
      await open(intent, 8);
      // The first instance records its fill, then its broadcast never reaches the chain.
      const recorded = await waitFor(
        async () => {
          const [fill] = (await fills(first, intent.id)).filter((x) => x.kind === 'fill');
          return fill && relay.swallowed.includes(fill.rawTx as Hex) ? fill : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 100, what: 'a recorded fill whose broadcast was swallowed' },
      );
      await first.close();
      apps.splice(apps.indexOf(first), 1);
      assert.equal(recorded.status, 'pending');
      assert.equal(await chains.rpc('destination', 'eth_getTransactionByHash', [recorded.txHash]), null, 'the fill never reached the chain');

      const second = await start();
      const done = await settled(second, user.auth, intent.id);
      const txs = await fills(second, intent.id);
      const fillRows = txs.filter((x) => x.kind === 'fill');
      assert.equal(fillRows.length, 1, 'one fill, never a second one');
      assert.equal(fillRows[0]?.txHash, recorded.txHash, 'the bytes recorded before the crash were sent');
      assert.equal(done.transactions.fill?.txHash, recorded.txHash);
      const receipt = (await chains.rpc('destination', 'eth_getTransactionReceipt', [recorded.txHash])) as { status: Hex } | null;
      assert.equal(receipt?.status, '0x1');
      assert.equal(await chains.pub.destination.getBalance({ address: recipient }), parseEther(done.outputAmount));
    } finally {
      await relay.close();
    }
  });

  test('intents asked for at once on two instances never reserve more than the solver holds (N+k at once)', async () => {
    const a = await start();
    const b = await start();
    const user = await registerUser(a.app);
    const solver = chains.solver.address;
    const saved = (await chains.rpc('destination', 'eth_getBalance', [solver, 'latest'])) as Hex;
    // What earlier intents still reserve stays reserved: the wallet gets 10 ETH on top of it.
    const live = await a.storage.db
      .select()
      .from(intentsTable)
      .where(and(eq(intentsTable.toNetwork, DESTINATION.slug), inArray(intentsTable.status, ['awaiting_open', 'opened'])));
    const earlier = live.reduce((sum, r) => sum + BigInt(r.outputWei) + BigInt(r.gasReserveWei), 0n);
    const balance = earlier + parseEther('10');
    await chains.rpc('destination', 'anvil_setBalance', [solver, `0x${balance.toString(16)}`]);
    try {
      // 3 ETH each: three fit in 10 ETH, a fourth does not; ten ask at once, five on each instance.
      const ask = (app: TestApp) => requestIntent(app, user.auth, '3', 4);
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i % 2 ? a : b)));
      const codes = answers.map((r) => r.statusCode).sort();
      assert.deepEqual(codes, [200, 200, 200, 409, 409, 409, 409, 409, 409, 409], answers.map((r) => `${r.statusCode} ${r.json().error?.code ?? ''}`).join(', '));
      for (const r of answers.filter((x) => x.statusCode === 409)) assert.equal(r.json().error.code, 'INSUFFICIENT_LIQUIDITY');
      const rows = await a.storage.db
        .select()
        .from(intentsTable)
        .where(and(eq(intentsTable.toNetwork, DESTINATION.slug), inArray(intentsTable.status, ['awaiting_open', 'opened'])));
      const reserved = rows.reduce((sum, r) => sum + BigInt(r.outputWei) + BigInt(r.gasReserveWei), 0n);
      assert.ok(reserved <= balance, `reserved ${reserved} of ${balance}`);
    } finally {
      await chains.rpc('destination', 'anvil_setBalance', [solver, saved]);
    }
  });
});
