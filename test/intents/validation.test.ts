// C41: what POST /chain-abstraction/intent refuses before anything is asked of a node or stored.
// (The default routes and the intents config checks: test/intents/setup.test.ts; the quote's
// arithmetic: test/intents/quote.test.ts.)
// slow: the app on anvil chains with settlers deployed
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { intents } from '../../src/intents/schema.ts';
import { registerUser, startTestApp, type TestApp } from '../support/app.ts';

const SETTLERS = { origin: '0x1111111111111111111111111111111111111111', destination: '0x2222222222222222222222222222222222222222' };
const SENDER = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const SOLVER_KEY = generatePrivateKey();
let t: TestApp;
let auth: { authorization: string };

before(async () => {
  t = await startTestApp({
    overrides: { intents: { solverPrivateKey: SOLVER_KEY, settlers: { ethereum: SETTLERS, arbitrum: SETTLERS, 'ethereum-sepolia': SETTLERS } } },
  });
  auth = (await registerUser(t.app)).auth;
});

after(async () => {
  await t?.close();
});

const valid = { fromNetwork: 'ethereum', toNetwork: 'arbitrum', amount: '1', sender: SENDER };

async function refused(body: Record<string, unknown>, field: string): Promise<void> {
  const res = await t.app.inject({ method: 'POST', url: '/api/v1/chain-abstraction/intent', headers: auth, payload: body });
  assert.equal(res.statusCode, 400, `${JSON.stringify(body)}: ${res.body}`);
  const err = res.json().error as { code: string; details: Array<{ field: string }> | undefined; message: string };
  assert.equal(err.code, 'VALIDATION_ERROR');
  assert.ok(JSON.stringify(err.details ?? err.message).includes(field), `${field} named in ${JSON.stringify(err)}`);
}

describe('POST /chain-abstraction/intent validation (C41)', () => {
  test('a mainnet to a testnet, an unknown network, different coins and a route without settlers are refused', async () => {
    await refused({ ...valid, toNetwork: 'arbitrum-sepolia' }, 'toNetwork');
    await refused({ ...valid, fromNetwork: 'ethereum-sepolia' }, 'toNetwork');
    await refused({ ...valid, toNetwork: 'nowhere' }, 'toNetwork');
    await refused({ ...valid, fromNetwork: 'nowhere' }, 'fromNetwork');
    await refused({ ...valid, toNetwork: 'polygon' }, 'toNetwork');
    await refused({ ...valid, toNetwork: 'ethereum' }, 'toNetwork');
    // A default route, but no settlers on optimism: not served.
    await refused({ ...valid, toNetwork: 'optimism' }, 'toNetwork');
  });

  test('amounts that are not positive decimals of at most 18 decimals are refused', async () => {
    for (const amount of ['0', '0.0', 'abc', '-1', '1e18', '1.0000000000000000001', ' 1', '']) await refused({ ...valid, amount }, 'amount');
  });

  test('bad sender and recipient addresses are refused', async () => {
    await refused({ ...valid, sender: '0x123' }, 'sender');
    await refused({ ...valid, sender: '0x70997970C51812dc3A010C7d01b50e0d17dc79c8' }, 'sender'); // bad checksum
    await refused({ ...valid, sender: 'xdc70997970c51812dc3a010c7d01b50e0d17dc79c8' }, 'sender'); // xdc only on the native networks
    await refused({ ...valid, recipient: '0x0000000000000000000000000000000000000000' }, 'recipient');
    await refused({ ...valid, recipient: 'nope' }, 'recipient');
    // A settler or the solver can never be paid a fill: the intent could only wait for its refund.
    for (const recipient of [SETTLERS.origin, SETTLERS.destination, privateKeyToAddress(SOLVER_KEY)]) await refused({ ...valid, recipient }, 'recipient');
  });

  test('deadlines out of range and unknown fields are refused', async () => {
    await refused({ ...valid, openDeadlineSeconds: 9 }, 'openDeadlineSeconds');
    await refused({ ...valid, openDeadlineSeconds: 3601 }, 'openDeadlineSeconds');
    await refused({ ...valid, fillDeadlineSeconds: 29 }, 'fillDeadlineSeconds');
    await refused({ ...valid, fillDeadlineSeconds: 86_401 }, 'fillDeadlineSeconds');
    await refused({ ...valid, fillDeadlineSeconds: 60.5 }, 'fillDeadlineSeconds');
    await refused({ ...valid, outputAmount: '1' }, 'outputAmount');
  });

  test('nothing is stored for a refused intent, and the routes need a token', async () => {
    assert.equal((await t.storage.db.select().from(intents)).length, 0);
    for (const [method, url] of [
      ['POST', '/api/v1/chain-abstraction/intent'],
      ['GET', '/api/v1/chain-abstraction/intents'],
      ['GET', '/api/v1/chain-abstraction/intents/in_x'],
    ] as const) {
      const res = await t.app.inject({ method, url, ...(method === 'POST' ? { payload: valid } : {}) });
      assert.equal(res.statusCode, 401, url);
    }
  });

  test('the routes are in the OpenAPI document with operation ids', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/docs/json' })).json<{ paths: Record<string, Record<string, { operationId?: string }>> }>();
    assert.equal(doc.paths['/api/v1/chain-abstraction/intent']?.post?.operationId, 'createIntent');
    assert.equal(doc.paths['/api/v1/chain-abstraction/intents']?.get?.operationId, 'listIntents');
    assert.equal(doc.paths['/api/v1/chain-abstraction/intents/{id}']?.get?.operationId, 'getIntent');
  });
});
