// The account and balance pages in chromium (C43; C5, C8, C9, C40), and the texts that come from
// the plan configuration: the sign-up page's free plan, the account's limits, the key edit form's
// own rate limit with the plan's as a hint. The free plan is changed from the shipped one here, so
// a figure written into a page instead of read from the gateway would show.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { browserSkip, type Dashboard, startDashboard } from './support.ts';

const FREE = { requestsPerMinute: 90, dailyLimit: 9000, monthlyComputeUnits: 90_000, maxKeys: 4, maxNetworks: 6 };
const mainText = async (page: Page) => ((await page.locator('main').innerText()) ?? '').replace(/\s+/g, ' ');

describe('dashboard: account, balance and plan texts (C43)', { skip: await browserSkip() }, () => {
  let d: Dashboard;
  before(async () => {
    d = await startDashboard({ devnet: ['native-mainnet', 'ethereum'], overrides: { plans: { free: FREE } } });
  });
  after(() => d?.close());

  test("the sign-up page states the free plan's figures from the configuration", async () => {
    const page = await d.newPage();
    await d.go(page, '/signup');
    const line = page.getByTestId('free-plan');
    await line.waitFor();
    assert.equal(await line.innerText(), 'Free plan: 4 API keys, up to 6 networks, 90 requests a minute, 90,000 compute units a month; no card.');
    await d.check(page, 'signup');
    await page.close();
  });

  test('the account page shows the plan and its limits from the configuration, and an override from the admin', async () => {
    const m = await d.newMember();
    const { page } = m;
    await d.go(page, '/account');
    await page.getByTestId('account-tier').waitFor();
    assert.equal(await page.getByTestId('account-tier').innerText(), 'Free');
    const cell = (limit: string, col: number) => page.locator(`tr[data-limit="${limit}"] td`).nth(col).innerText();
    assert.equal(await cell('requestsPerMinute', 0), '90');
    assert.equal(await cell('dailyLimit', 0), '9,000');
    assert.equal(await cell('dailyLimit', 1), '9,000', 'nothing used yet');
    assert.equal(await cell('monthlyLimit', 0), '90,000');
    assert.equal(await cell('maxKeys', 0), '4');
    assert.equal(await cell('maxNetworks', 0), '6');
    // Left now for keys and networks too, from the account's keys (none yet), not a dash.
    assert.equal(await cell('maxKeys', 1), '4');
    assert.equal(await cell('maxNetworks', 1), '6');
    await page.getByText('Every plan').click();
    assert.match(await mainText(page), /Free \(yours\) 90 9,000 90,000 4 6 Pro 1,000 100,000 1,000,000 10 all/);
    await d.check(page, 'account');

    // A plan change shows on the next visit (the page reads GET /me each time).
    await d.setTier(m.email, 'pro');
    await d.go(page, '/account');
    await page.getByTestId('account-tier').getByText('Pro').waitFor();
    assert.equal(await cell('maxKeys', 0), '10');
    assert.equal(await cell('maxNetworks', 0), 'all');
  });

  test('change password: the wrong current one is refused in words; then the new one signs in and the old one does not', async () => {
    const m = await d.newMember();
    const { page } = m;
    await d.go(page, '/account');
    const fresh = 'another long passphrase 42';
    await page.getByLabel('Current password').fill('not my password at all');
    await page.getByLabel('New password').fill(fresh);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('The current password is wrong.').waitFor();

    await page.getByLabel('Current password').fill(m.password);
    await page.getByLabel('New password').fill(fresh);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('The password is changed.').waitFor();
    // Still signed in here, across a reload (a new refresh cookie came with the new password).
    await page.reload();
    await page.getByTestId('account-tier').waitFor();

    assert.equal((await d.login(m.email, m.password)).status, 401, 'the old password no longer signs in');
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.waitForURL(/\/signin/);
    await d.signIn(page, m.email, fresh);
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  });

  test("sign out everywhere: another login's refresh token stops working and this browser is signed out", async () => {
    const m = await d.newMember();
    const { page } = m;
    const other = await d.login(m.email, m.password);
    assert.equal(other.status, 200);
    const refreshToken = other.body.data.tokens.refreshToken as string;
    await d.go(page, '/account');
    await page.getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Sign out everywhere' }).click();
    await page.waitForURL(/\/signin/);
    await page.getByText('You are signed out everywhere').waitFor();
    const refreshed = await d.api('/api/v1/auth/refresh', { body: { refreshToken } });
    assert.equal(refreshed.status, 401, "the other login's refresh token fails");
    assert.equal(refreshed.body.success, false);
    // A reload does not bring this browser back in: its cookie was revoked too.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    assert.equal((await d.login(m.email, m.password)).status, 200, 'signing in again works');
  });

  test('the balance page lists the address on every mainnet with USD and the total (C40)', async () => {
    const { page } = await d.newMember();
    const address = d.gateway.devnet!.accounts[5]!.address;
    await d.go(page, '/balance');
    await page.getByText('Enter an address').waitFor();
    await page.getByLabel('Address').fill(address.toLowerCase().replace(/^0x/, '0xZZ'));
    await page.getByRole('button', { name: 'Show balance' }).click();
    await page.getByText('Must be 0x followed by 40 hex digits.').waitFor();
    await page.getByLabel('Address').fill(address);
    await page.getByRole('button', { name: 'Show balance' }).click();
    await page.locator('tr[data-network="native-mainnet"]').waitFor();

    const reg = await d.api('/api/v1/auth/register', { body: { name: 'Reader', email: `reader-${Date.now()}@example.com`, password: 'a long reader password' } });
    const token = reg.body.data.tokens.accessToken as string;
    const api = (await d.api(`/api/v1/chain-abstraction/balance/${address}`, { token })).body.data;
    const usd = (x: number) => x.toLocaleString('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 2 });
    assert.equal(await page.getByTestId('total-usd').innerText(), usd(api.totalUsd));
    assert.ok(api.totalUsd > 0, 'a priced balance');
    for (const slug of ['native-mainnet', 'ethereum']) {
      const cells = await page.locator(`tr[data-network="${slug}"]`).first().locator('td').allInnerTexts();
      // C45: every dev account holds 10,000,000 coins on every devnet chain.
      assert.equal(cells[1], '10,000,000', `${slug}: ${cells.join(' | ')}`);
      const chain = api.assets.flatMap((a: { chains: Array<{ network: string; usd: number | null }> }) => a.chains).find((c: { network: string }) => c.network === slug);
      assert.equal(cells[2], chain.usd === null ? 'no price' : usd(chain.usd));
    }
    assert.match(await page.locator('tfoot').innerText(), new RegExp(`Total\\s+${usd(api.totalUsd).replace(/[$.]/g, '\\$&')}`));
    await d.check(page, 'balance');
  });

  test("the key form says the plan's network allowance before a submit; the key box says where the key can be seen again; the edit form holds the key's own rate, the plan's as a hint; the account counts the key", async () => {
    const { page } = await d.newMember();
    // C16: said up front, not only in a refusal after the submit (once GET /me has answered).
    const allowance = page.getByTestId('network-allowance').first();
    await allowance.filter({ hasText: 'Your plan allows' }).waitFor();
    assert.equal(
      await allowance.innerText(),
      'Your plan allows 6 networks over all your keys; they use 0 now. None checked: the networks your plan gives by default.',
    );
    await page.getByLabel('Name', { exact: true }).fill('hinted');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.locator('.new-key').getByText('the Endpoints page shows it in full').waitFor();
    assert.equal(await page.getByText('shown in full only here').count(), 0);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('button', { name: 'Edit hinted' }).click();
    const rate = page.getByLabel('Rate limit of this key (requests per minute)');
    assert.equal(await rate.inputValue(), '', 'no rate set on the key');
    assert.equal(await rate.getAttribute('placeholder'), "the plan's: 90 / min");
    await page.getByText("Empty: the key follows your plan's rate (90 / min).").waitFor();
    await rate.fill('30');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('"hinted" is saved.').waitFor();
    await page.getByRole('button', { name: 'Edit hinted' }).click();
    assert.equal(await page.getByLabel('Rate limit of this key (requests per minute)').inputValue(), '30');
    await d.check(page, 'keys-edit');

    // The account's "Left now" counts the key and its networks.
    await d.go(page, '/account');
    await page.getByTestId('account-tier').waitFor();
    const cell = (limit: string, col: number) => page.locator(`tr[data-limit="${limit}"] td`).nth(col).innerText();
    assert.equal(await cell('maxKeys', 1), '3');
    assert.match(await cell('maxNetworks', 1), /^[0-5]$/, 'fewer than the 6 networks are left');
  });
});
