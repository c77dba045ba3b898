// A newcomer in a real browser (C43): signs up, creates a key (shown once, copied with its
// button) that works at once on the RPC address of the devnet chain; copies an endpoint and
// calls it; sees the calls on the usage page; manages the key (edit, disable, rotate, delete
// after confirming); revokes another after confirming (it stays listed as revoked, refused with
// -32002); stays signed in across a reload without any script seeing the refresh token.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { createPublicClient, http } from 'viem';
import { waitFor } from '../support/wait.ts';
import { browserSkip, type Dashboard, type Member, startDashboard } from './support.ts';

const NET = 'native-mainnet';
const rpc = (url: string, key: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }) });
/** The JSON-RPC error code a call with the key gets (undefined when it is answered). */
const rpcErrorCode = async (url: string, key: string) => ((await (await rpc(url, key)).json()) as { error?: { code: number } }).error?.code;
const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());

describe('dashboard: a newcomer in chromium (C43)', { skip: await browserSkip() }, () => {
  let d: Dashboard;
  let m: Member;
  let key = '';
  before(async () => {
    d = await startDashboard({ devnet: [NET] });
  });
  after(() => d?.close());

  test('signs up, creates a key shown once with a copy button, and the key works on the RPC address', async () => {
    m = await d.newMember();
    const { page } = m;
    await page.getByText('No API keys yet').waitFor();
    await d.check(page, 'keys-empty');
    await page.getByLabel('Name', { exact: true }).fill('my first app');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.locator('.new-key code');
    await shown.waitFor();
    key = (await shown.textContent()) ?? '';
    assert.ok(key.length > 20, `a key: ${key}`);
    await page.locator('.new-key').getByRole('button', { name: 'Copy API key' }).click();
    await page.locator('.new-key').getByText('Copied', { exact: true }).waitFor();
    assert.equal(await clipboard(page), key);
    await page.getByRole('heading', { level: 3, name: 'my first app' }).waitFor();
    await d.check(page, 'keys-created');

    // The key works at once, through viem, on the address the API documents.
    const client = createPublicClient({ transport: http(`${d.url}/v1/${NET}/${key}`) });
    assert.equal(await client.getChainId(), 50);
    assert.equal(typeof (await client.getBlockNumber()), 'bigint');

    // Shown once: after "I have copied it" the page holds only its prefix.
    await page.getByRole('button', { name: 'I have copied it' }).click();
    assert.equal(await page.getByText(key).count(), 0);
  });

  test('copies an endpoint with its button, and the copied address answers', async () => {
    const { page } = m;
    await page.getByRole('link', { name: 'Endpoints' }).first().click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await page.getByRole('button', { name: 'Copy Native Chain Mainnet HTTP address' }).click();
    const address = await clipboard(page);
    assert.ok(address.endsWith(`/v1/${NET}/${key}`), address);
    const port = new URL(d.url).port;
    const res = await fetch(address.replace(/^http:\/\/localhost:\d+/, `http://127.0.0.1:${port}`), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'eth_chainId', params: [] }),
    });
    assert.deepEqual(await res.json(), { jsonrpc: '2.0', id: 7, result: '0x32' });
    await page.getByRole('button', { name: 'Copy Native Chain Mainnet WebSocket address' }).click();
    assert.match(await clipboard(page), new RegExp(`/ws/${NET}\\?apiKey=${key}$`));
    const curl = await page.locator('code[aria-label^="curl line"]').textContent();
    assert.match(curl ?? '', new RegExp(`^curl -s http\\S+/v1/${NET}/${key} `));
    await d.check(page, 'endpoints');
  });

  test('sees the calls on the usage page: per day, by network, by method, quota and plan', async () => {
    const { page } = m;
    for (let i = 0; i < 3; i++) assert.equal((await rpc(`${d.url}/rpc/main/evm/50`, key)).status, 200);
    await page.getByRole('link', { name: 'Usage' }).first().click();
    await page.getByRole('heading', { level: 1, name: 'Usage' }).waitFor();
    // Counts reach storage within a few seconds (C27): refresh until they show.
    const total = page.getByTestId('total-requests');
    await waitFor(
      async () => {
        const n = Number(((await total.textContent()) ?? '').replace(/,/g, ''));
        if (n >= 5) return n;
        await page.getByRole('button', { name: 'Refresh' }).click();
        await page.waitForTimeout(500);
        return undefined;
      },
      { timeoutMs: 30_000, what: 'the usage page to count the calls' },
    ).catch(async (err: unknown) => {
      await page.screenshot({ path: 'test-results/screenshots/usage-failure.png', fullPage: true });
      throw new Error(`${String(err)}; the page says: ${await page.locator('main').innerText()}`);
    });
    await page.locator('canvas[aria-label^="Requests per day"]').waitFor();
    await page.getByRole('cell', { name: 'eth_blockNumber' }).waitFor();
    await page.getByRole('cell', { name: 'Native Chain Mainnet' }).waitFor();
    await page.getByText(/of [\d,]+/).first().waitFor();
    await page.getByRole('rowheader', { name: 'Requests per minute' }).waitFor();
    await d.check(page, 'usage');
  });

  test('edits, disables, rotates and deletes the key; each refusal and confirmation in words', async () => {
    const { page } = m;
    await page.getByRole('link', { name: 'API keys' }).first().click();
    // A navigation gives the new page's heading the focus (keyboard and screen-reader users start there).
    await page.waitForFunction(() => document.activeElement?.tagName === 'H1' && document.activeElement.textContent === 'API keys');
    await page.getByRole('heading', { level: 3, name: 'my first app' }).waitFor();
    await page.getByRole('button', { name: 'Edit my first app' }).click();
    await page.getByLabel(/Rate limit of this key/).fill('99999999');
    await page.getByRole('button', { name: 'Save' }).click();
    const refusal = page.locator('form.edit [role="alert"]');
    await refusal.waitFor();
    assert.doesNotMatch((await refusal.textContent()) ?? '', /[{}"]/, 'the C7 message, not JSON');
    await page.getByLabel(/Rate limit of this key/).fill('30');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('30 / min').waitFor();

    await page.getByRole('button', { name: 'Disable my first app' }).click();
    await page.locator('.status-inactive').waitFor();
    assert.notEqual((await rpc(`${d.url}/rpc/main/evm/50`, key)).status, 200, 'a disabled key is refused');
    await page.getByRole('button', { name: 'Enable my first app' }).click();
    await page.locator('.status-active').waitFor();

    await page.getByRole('button', { name: 'Rotate my first app' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await d.check(page, 'keys-confirm');
    await dialog.getByRole('button', { name: 'Rotate key' }).click();
    const fresh = (await page.locator('.new-key code').textContent()) ?? '';
    assert.ok(fresh && fresh !== key);
    await waitFor(async () => ((await rpc(`${d.url}/rpc/main/evm/50`, key)).status !== 200 ? true : undefined), { timeoutMs: 15_000, what: 'the old value refused' });
    assert.equal((await rpc(`${d.url}/rpc/main/evm/50`, fresh)).status, 200);
    await page.getByRole('button', { name: 'I have copied it' }).click();

    // Delete: Cancel leaves it, the confirmation removes it; the list falls back to its empty state.
    await page.getByRole('button', { name: 'Delete my first app' }).click();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await page.getByRole('heading', { level: 3, name: 'my first app' }).count(), 1);
    await page.getByRole('button', { name: 'Delete my first app' }).click();
    await dialog.getByRole('button', { name: 'Delete key' }).click();
    await page.getByText('No API keys yet').waitFor();
  });

  test('revokes a key after confirming: Cancel leaves it active, then it stays listed as revoked and is refused with -32002', async () => {
    const { page } = m;
    const NAME = 'revoked app';
    const url = `${d.url}/rpc/main/evm/50`;
    await page.getByLabel('Name', { exact: true }).fill(NAME);
    await page.getByRole('button', { name: 'Create key' }).click();
    const value = (await page.locator('.new-key code').textContent()) ?? '';
    assert.ok(value.length > 20, `a key: ${value}`);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    const card = page.getByRole('article', { name: NAME });
    await card.locator('.status-active').waitFor();
    assert.equal((await rpc(url, value)).status, 200);
    const token = await d.tokenOf(m);
    const stored = async () => {
      const res = await d.api('/api/v1/api-keys', { token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (res.body.data as Array<{ name: string; status: string }>).filter((k) => k.name === NAME);
    };

    // The confirmation says it is for good; Cancel changes nothing.
    const dialog = page.getByRole('dialog');
    await card.getByRole('button', { name: `Revoke ${NAME}` }).click();
    await dialog.waitFor();
    assert.equal(await dialog.getByRole('heading', { name: `Revoke "${NAME}"?` }).count(), 1);
    assert.match((await dialog.innerText()) ?? '', /cannot be undone/);
    await d.check(page, 'keys-revoke-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await card.locator('.status-active').waitFor();
    assert.equal(await card.getByRole('button', { name: `Revoke ${NAME}` }).count(), 1);
    assert.deepEqual((await stored()).map((k) => k.status), ['active'], 'Cancel leaves the key active');
    assert.equal((await rpc(url, value)).status, 200, 'and working');

    // Confirmed: the key stays listed, shown as revoked, with only Delete left to do.
    await card.getByRole('button', { name: `Revoke ${NAME}` }).click();
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByRole('status').getByText(`"${NAME}" is revoked.`).waitFor();
    await card.locator('.status-revoked').waitFor();
    assert.equal((await card.locator('.key-head .tag').textContent())?.trim(), 'revoked');
    assert.equal(await card.locator('.status-active, .status-inactive').count(), 0);
    for (const gone of ['Edit', 'Disable', 'Enable', 'Rotate', 'Revoke']) {
      assert.equal(await card.getByRole('button', { name: `${gone} ${NAME}` }).count(), 0, `a revoked key offers no ${gone}`);
    }
    assert.equal(await card.getByRole('link', { name: 'Endpoints' }).count(), 0, 'nor its endpoints');
    assert.equal(await card.getByRole('button', { name: `Delete ${NAME}` }).count(), 1, 'it can still be deleted');
    await d.check(page, 'keys-revoked');

    // The server holds it: listed as revoked, and the RPC path refuses it with -32002 (C20).
    assert.deepEqual((await stored()).map((k) => k.status), ['revoked']);
    await waitFor(async () => ((await rpcErrorCode(url, value)) === -32002 ? true : undefined), { timeoutMs: 15_000, what: 'the revoked key refused with -32002' });
    const refused = await rpc(url, value);
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: { code: number } }).error.code, -32002);

    // A reload reads it back from the server the same way.
    await page.reload();
    await card.locator('.status-revoked').waitFor();
    assert.equal(await card.getByRole('button', { name: `Revoke ${NAME}` }).count(), 0);
  });

  test('a reload keeps the member signed in; no script can read the refresh cookie; sign out ends it', async () => {
    const { page } = m;
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    assert.doesNotMatch(await page.evaluate(() => document.cookie), /junction_refresh/);
    const cookie = (await d.context.cookies()).find((c) => c.name === 'junction_refresh');
    assert.ok(cookie, 'the refresh cookie');
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Strict');
    assert.equal(cookie.path, '/api/v1/auth');
    // The keyboard reaches the navigation and the sign-out button. A loaded page keeps the focus at
    // the top: once the page's effects have run (two frames and a task later), the first Tab is the skip link.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(resolve, 0)))));
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the page');
    await page.getByRole('button', { name: 'Sign out' }).first().click();
    await page.waitForURL(/\/signin/);
    assert.equal((await d.context.cookies()).find((c) => c.name === 'junction_refresh'), undefined, 'cleared');
    await page.goto('/usage');
    await page.waitForURL(/\/signin\?next=%2Fusage/);
  });
});
