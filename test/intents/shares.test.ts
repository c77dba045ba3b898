// C51: intents cannot hold the solver's liquidity hostage. With the shipped shares, one intent
// reserves at most 5% of the solver's liquidity on its destination, one account's intents at most
// 10% and all intents waiting for their open at most 50%, whatever many accounts ask at once; the
// shares are of the wallet's balance, which reserving does not lower. An amount beyond uint256 is
// a 400 in the C7 shape, and an intent asked for without an open deadline may be opened for 10
// minutes. On the embedded store and on PostgreSQL.
// slow: contracts deployed and intents reserved on anvil
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Address, parseEther } from 'viem';
import { intents as intentsTable } from '../../src/intents/schema.ts';
import type { Intent } from '../../src/intents/view.ts';
import { registerUser, type TestApp } from '../support/app.ts';
import { storageBackends } from '../support/services.ts';
import { DESTINATION, type IntentChains, ORIGIN, startIntentApp, startIntentChains } from './helpers.ts';

type User = Awaited<ReturnType<typeof registerUser>>;
interface Refusal {
  code: string;
  message: string;
  details: { setting?: string; percent?: number; available: string; needed: string };
}

const backends = await storageBackends();
let chains: IntentChains;

before(async () => {
  if (backends.every((b) => b.skip)) return;
  chains = await startIntentChains();
});

after(async () => {
  await chains?.stop();
});

const TWO_POW_256 = 2n ** 256n;

for (const backend of backends) {
  describe(`intents cannot hold the solver's liquidity hostage (C51), ${backend.name}`, { skip: backend.skip }, () => {
    let t: TestApp;
    const sender = () => chains.devnet.accounts[1]?.address as Address;
    const create = (user: User, body: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/api/v1/chain-abstraction/intent', headers: user.auth, payload: { fromNetwork: ORIGIN.slug, toNetwork: DESTINATION.slug, sender: sender(), ...body } });
    const setSolverBalance = (wei: bigint) => chains.rpc('destination', 'anvil_setBalance', [chains.solver.address, `0x${wei.toString(16)}`]);
    /** What each live intent on the destination reserves (output plus the fill's gas), with its account. */
    const reservations = async () =>
      (await t.storage.db.select().from(intentsTable))
        .filter((r) => r.toNetwork === DESTINATION.slug && r.status === 'awaiting_open')
        .map((r) => ({ userId: r.userId, wei: BigInt(r.outputWei) + BigInt(r.gasReserveWei) }));
    const refusal = (res: { statusCode: number; body: string; json(): unknown }): Refusal => {
      assert.equal(res.statusCode, 409, res.body);
      return (res.json() as { error: Refusal }).error;
    };

    before(async () => {
      t = await startIntentApp(chains, { backend: backend.name });
      assert.deepEqual(
        [t.config.intents.maxReservePerIntent, t.config.intents.maxReservePerAccount, t.config.intents.maxReserveAwaitingOpen],
        [5, 10, 50],
        'the shipped shares',
      );
    });

    after(async () => {
      await t?.close();
    });

    test('an amount beyond uint256 is 400 in the C7 shape, naming body.amount; nothing is stored and nothing logged at error level', async () => {
      await setSolverBalance(parseEther('100'));
      const user = await registerUser(t.app);
      const mark = t.logs.length;
      // 2^256 whole coins; 2^256 wei written in coins; and 2^256 - 1 wei, which fits the order but not the solver.
      const huge = [TWO_POW_256.toString(), `${TWO_POW_256 / 10n ** 18n}.${(TWO_POW_256 % 10n ** 18n).toString().padStart(18, '0')}`];
      for (const amount of huge) {
        const res = await create(user, { amount });
        assert.equal(res.statusCode, 400, `${amount}: ${res.body}`);
        const body = res.json<{ success: boolean; error: { code: string; message: string; details: Array<{ field: string; message: string }> } }>();
        assert.equal(body.success, false);
        assert.equal(body.error.code, 'VALIDATION_ERROR');
        assert.equal(typeof body.error.message, 'string');
        assert.deepEqual(
          body.error.details.map((d) => d.field),
          ['body.amount'],
        );
      }
      const max = TWO_POW_256 - 1n;
      const fits = await create(user, { amount: `${max / 10n ** 18n}.${(max % 10n ** 18n).toString().padStart(18, '0')}` });
      assert.equal(refusal(fits).details.setting, 'intents.maxReservePerIntent');
      assert.deepEqual(await reservations(), []);
      const errors = t.logs.slice(mark).filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
      assert.deepEqual(errors, [], 'no error-level line');
    });

    test('5 accounts asking 5 intents each at once: no intent over 5%, no account over 10%, all of them at most 50% of the liquidity', async () => {
      // 100 ETH: 5 per intent, 10 per account, 50 for all intents waiting for their open.
      await setSolverBalance(parseEther('100'));
      const users = await Promise.all(Array.from({ length: 5 }, () => registerUser(t.app)));
      // Each asks 4.9 four times (two fit in its 10) and 6 once (over 5 alone).
      const sizes = ['4.9', '4.9', '4.9', '4.9', '6'];
      const asked = users.flatMap((user) => sizes.map((amount) => ({ user, amount })));
      const answers = await Promise.all(asked.map(({ user, amount }) => create(user, { amount })));

      for (const [n, res] of answers.entries()) {
        const { user, amount } = asked[n] as (typeof asked)[number];
        if (amount === '6') {
          const err = refusal(res);
          assert.equal(err.code, 'INSUFFICIENT_LIQUIDITY');
          assert.equal(err.details.setting, 'intents.maxReservePerIntent');
          assert.equal(err.details.percent, 5);
          assert.equal(err.details.available, '5');
          assert.match(err.message, /5% .*intents\.maxReservePerIntent/);
        } else if (res.statusCode !== 200) {
          const err = refusal(res);
          assert.equal(err.code, 'INSUFFICIENT_LIQUIDITY');
          assert.equal(err.details.setting, 'intents.maxReservePerAccount', `${user.email}: ${res.body}`);
          assert.match(err.message, /10% .*intents\.maxReservePerAccount/);
        }
      }
      for (const user of users) {
        const mine = answers.filter((res, n) => asked[n]?.user === user && res.statusCode === 200);
        assert.equal(mine.length, 2, `${user.email}: two intents of 4.9 fit in 10% of 100`);
      }

      const held = await reservations();
      assert.equal(held.length, 10);
      for (const r of held) assert.ok(r.wei <= parseEther('5'), `one intent reserves ${r.wei}`);
      for (const user of users) {
        const own = held.filter((r) => r.userId === user.id).reduce((sum, r) => sum + r.wei, 0n);
        assert.ok(own <= parseEther('10'), `${user.email} reserves ${own}`);
      }
      const total = held.reduce((sum, r) => sum + r.wei, 0n);
      assert.ok(total <= parseEther('50'), `all reserve ${total}`);
      // What is left on the network is at least the other half of the liquidity.
      assert.ok(parseEther('100') - total >= parseEther('50'));
    });

    test('more accounts at once still leave half: the intents waiting for their open are refused at 50%, and the shares do not shrink as liquidity is reserved', async () => {
      const before = (await reservations()).reduce((sum, r) => sum + r.wei, 0n);
      assert.ok(before > parseEther('48') && before <= parseEther('50'), `the test before left ${before} reserved`);
      // Three new accounts, each within its own 10%: none of their 4.9 fits in what is left of the 50%.
      const users = await Promise.all(Array.from({ length: 3 }, () => registerUser(t.app)));
      const answers = await Promise.all(users.flatMap((user) => [create(user, { amount: '4.9' }), create(user, { amount: '4.9' })]));
      for (const res of answers) {
        const err = refusal(res);
        assert.equal(err.details.setting, 'intents.maxReserveAwaitingOpen', res.body);
        assert.equal(err.details.percent, 50);
        assert.equal(parseEther(err.details.available), parseEther('50') - before);
        assert.match(err.message, /50% .*intents\.maxReserveAwaitingOpen/);
      }
      assert.equal((await reservations()).reduce((sum, r) => sum + r.wei, 0n), before, 'nothing more reserved');
      // One intent is still measured against the whole balance, not what is left of it.
      const big = refusal(await create(users[0] as User, { amount: '6' }));
      assert.equal(big.details.setting, 'intents.maxReservePerIntent');
      assert.equal(big.details.available, '5');
      // What fits in the rest of the 50% is taken, and then nothing more.
      const small = await create(users[0] as User, { amount: '1' });
      assert.equal(small.statusCode, 200, small.body);
      const total = (await reservations()).reduce((sum, r) => sum + r.wei, 0n);
      assert.ok(total <= parseEther('50'), `all reserve ${total}`);
      assert.equal(refusal(await create(users[1] as User, { amount: '1' })).details.setting, 'intents.maxReserveAwaitingOpen');
    });

    test('an intent asked for without deadlines may be opened for 10 minutes and filled for 10 minutes after (C41)', async () => {
      // The shares follow the wallet: with 1,000 ETH there is room again.
      await setSolverBalance(parseEther('1000'));
      const user = await registerUser(t.app);
      const from = Math.floor(Date.now() / 1000);
      const res = await create(user, { amount: '0.5' });
      const to = Math.ceil(Date.now() / 1000);
      assert.equal(res.statusCode, 200, res.body);
      const intent = res.json().data as Intent;
      assert.ok(intent.order.openDeadline >= from + 600 && intent.order.openDeadline <= to + 600, `open deadline ${intent.order.openDeadline - from} s after the request`);
      // C41: and, without a fill deadline, the solver has 10 minutes from the open (the latest possible open until it is opened).
      assert.equal(intent.order.fillDeadline - intent.order.openDeadline, 600);
    });
  });
}
