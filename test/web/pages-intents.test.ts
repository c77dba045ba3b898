// The intents page (C41, C42) in chromium: a quote (route, amount, fee) before anything is locked,
// the open transaction, sent with an injected wallet (window.ethereum) when the browser has one,
// and the status view following the intent to `settled`. Two devnet chains (ethereum, arbitrum)
// with the settlers deployed, as test/intents does. The test's wallet lives in Node (exposed to
// the page as a function), so the page itself talks to nothing but the gateway.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type Hex, parseEther } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import { type IntentChains, intentChainsEnv, intentOverrides, startIntentChains } from '../intents/helpers.ts';
import { browserSkip, type Dashboard, startDashboard } from './support.ts';

const mainText = async (page: Page) => (await page.locator('main').innerText()).replace(/\s+/g, ' ');

describe('dashboard: intents (C41)', { skip: await browserSkip() }, () => {
  let chains: IntentChains;
  let d: Dashboard;

  before(async () => {
    chains = await startIntentChains();
    d = await startDashboard({ env: intentChainsEnv(chains), overrides: intentOverrides(chains) });
  });
  after(async () => {
    await d?.close();
    await chains?.stop();
  });

  test("the form starts on a route the account's keys cover, or says which networks to add and the plan's allowance; the amount starts empty, with no look-alike value", async () => {
    const m = await d.newMember();
    const { page } = m;
    await d.go(page, '/intents');
    await page.getByText('No intents yet').waitFor();
    const amount = page.getByLabel(/^Amount \(/);
    assert.equal(await amount.inputValue(), '');
    assert.equal(await amount.getAttribute('placeholder'), null, 'a placeholder such as 0.5 looks filled in');
    // No key yet: the first testnet route, and what to add (C16: the free plan allows 5 networks).
    const note = page.getByTestId('route-keys');
    assert.match(await note.innerText(), /^Your API keys do not cover .+: the wallet sends the open through a key that does\. Add them to a key on the Keys page \(your plan allows 5 networks over all your keys\)\.$/);
    await d.check(page, 'intents-form-no-key');

    const token = await d.tokenOf(m);
    await d.api('/api/v1/api-keys', { token, body: { name: 'for intents', networks: ['ethereum', 'arbitrum'] } });
    await d.go(page, '/intents');
    await page.getByText('No intents yet').waitFor();
    assert.equal(await page.getByLabel('From', { exact: true }).inputValue(), 'ethereum');
    assert.equal(await page.getByLabel('To', { exact: true }).inputValue(), 'arbitrum');
    assert.equal(await page.getByTestId('route-keys').count(), 0, 'the route is covered');
    await d.check(page, 'intents-form');
    await page.close();
  });

  test('without a wallet: the quote shows route, amount, fee and the open transaction to send elsewhere', async () => {
    const { page } = await d.newMember();
    await d.go(page, '/intents');
    await page.getByText('No intents yet').waitFor();
    await page.getByLabel('From', { exact: true }).selectOption('ethereum');
    await page.getByLabel('To', { exact: true }).selectOption('arbitrum');
    const sender = chains.devnet.accounts[2]?.address as string;
    // C28's address rule here too: a broken checksum is pointed out before anything is sent.
    await page.getByLabel('Amount (ETH)').fill('1');
    await page.getByLabel('Sender (the address that sends the open)').fill(sender.replace(/[a-f]/, (c) => c.toUpperCase()));
    await page.getByRole('button', { name: 'Get a quote' }).click();
    await page.getByText('checksum (EIP-55) does not match').waitFor();
    assert.ok(!d.requests.some((u) => u.endsWith('/api/v1/chain-abstraction/intent')), 'nothing sent with a bad address');

    await page.getByLabel('Sender (the address that sends the open)').fill(sender);
    await page.getByRole('button', { name: 'Get a quote' }).click();
    await page.getByRole('heading', { name: 'Quote' }).waitFor();
    const words = await mainText(page);
    assert.match(words, /Route Ethereum Mainnet → Arbitrum One/);
    assert.match(words, /You lock 1 ETH on Ethereum Mainnet/);
    const fee = /Fee ([0-9.]+) ETH/.exec(words)?.[1];
    const out = /Recipient gets ([0-9.]+) ETH/.exec(words)?.[1];
    assert.ok(fee && out, words);
    // C41: outputAmount = inputAmount - fee, exactly.
    assert.equal(parseEther(out) + parseEther(fee), parseEther('1'));
    assert.match(words, /No browser wallet was found/);
    // The open transaction (C41 `open`): value is the amount in wei, data the open(order) call.
    assert.ok(words.includes(parseEther('1').toString()));
    await page.getByText(chains.settlers.ethereum?.origin as string).first().waitFor();
    await page.getByText('waiting for the open').first().waitFor();
    await d.check(page, 'intents-quote');
    await page.close();
  });

  test('with an injected wallet: the open is sent through it and the status view follows the intent to settled', async () => {
    const m = await d.newMember();
    const { page } = m;
    const account = chains.devnet.accounts[3] as { address: Hex; privateKey: Hex };
    const seen: string[] = [];
    // An EIP-1193 wallet for the page, answering from Node with anvil's unlocked dev account.
    await page.exposeFunction('__testWallet', async (method: string, params: unknown[]) => {
      seen.push(method);
      switch (method) {
        case 'eth_requestAccounts':
        case 'eth_accounts':
          return [account.address];
        case 'eth_chainId':
          return '0x1';
        case 'eth_estimateGas':
        case 'eth_sendTransaction':
          return chains.rpc('origin', method, params);
        default:
          throw Object.assign(new Error(`unsupported ${method}`), { code: 4200 });
      }
    });
    await page.addInitScript({
      // A string, not a function: the test's compiler would wrap a function with helpers the page does not have.
      content: 'window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params ?? []) };',
    });
    await d.go(page, '/intents');
    await page.getByLabel('From', { exact: true }).selectOption('ethereum');
    await page.getByLabel('To', { exact: true }).selectOption('arbitrum');
    await page.getByLabel('Amount (ETH)').fill('0.5');
    await page.getByRole('button', { name: "Use my wallet's address" }).click();
    await waitValue(page, 'Sender (the address that sends the open)', account.address);
    await page.getByRole('button', { name: 'Get a quote' }).click();
    await page.getByRole('heading', { name: 'Quote' }).waitFor();
    // The wallet's estimate of the open's gas is shown before confirming.
    await page.getByText(/about [0-9,]+ gas for the open/).waitFor();
    const before = await chains.pub.origin.getBalance({ address: account.address });
    await page.getByRole('button', { name: 'Send the open with my wallet' }).click();
    await page.getByText('Open sent:').waitFor();
    assert.ok(seen.includes('eth_sendTransaction'));
    // The status view follows it by itself: opened, filled, settled (C41).
    await page.locator('.intent-follow .tag', { hasText: 'settled' }).waitFor({ timeout: 90_000 });
    const after = await chains.pub.origin.getBalance({ address: account.address });
    assert.ok(before - after >= parseEther('0.5'), 'the amount left the sender');
    const steps = (await page.locator('.intent-follow .steps').innerText()).replace(/\s+/g, ' ');
    assert.match(steps, /Opened .*0x[0-9a-f]{6}/);
    assert.match(steps, /Filled .*0x[0-9a-f]{6}/);
    assert.match(steps, /Settled .*0x[0-9a-f]{6}/);
    // Ethereum has an explorer (this gateway's ethereum is not a devnet network): the open's hash links to it.
    const open = await waitForOpenHash(page);
    assert.equal(await page.locator(`.intent-follow a[href="https://etherscan.io/tx/${open}"]`).count(), 1);
    // The list shows it settled too.
    await page.locator('tbody tr', { hasText: 'Ethereum Mainnet → Arbitrum One' }).locator('.tag', { hasText: 'settled' }).first().waitFor({ timeout: 30_000 });
    assert.equal(privateKeyToAddress(account.privateKey), account.address);
    await d.check(page, 'intents-settled');
    await page.close();
  });
});

async function waitValue(page: Page, label: string, value: string): Promise<void> {
  await page.waitForFunction(
    ([l, v]) => [...document.querySelectorAll('label')].some((el) => el.textContent?.trim() === l && (document.getElementById(el.htmlFor) as HTMLInputElement | null)?.value === v),
    [label, value] as const,
  );
}

/** The open transaction's hash, from the "Open sent" notice. */
async function waitForOpenHash(page: Page): Promise<string> {
  const text = await page.getByText('Open sent:').innerText();
  const hash = /0x[0-9a-f]{64}/.exec(text)?.[0];
  assert.ok(hash, text);
  return hash;
}
