// Dashboard pages (C43) in chromium: faucet (C28), whale alerts
// (C35, C36), webhooks (C37–C39) and analytics (C46), against the gateway in front of the two
// native devnet chains. Plan-gated pages are seen by a free account and by one whose plan has them.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { createWalletClient, defineChain, type Hex, http, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { waitFor } from '../support/wait.ts';
import { browserSkip, type Dashboard, startDashboard } from './support.ts';

const MAINNET = { slug: 'native-mainnet', chainId: 50 };
const TESTNET = { slug: 'native-testnet', chainId: 51 };

async function chainRpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/** The visible text of the page's main element. */
const mainText = async (page: Page) => (await page.locator('main').innerText()).replace(/\s+/g, ' ');

describe('dashboard: faucet, whale alerts, webhooks, analytics (C43, C46)', { skip: await browserSkip() }, () => {
  let d: Dashboard;
  /** A local receiver for webhook deliveries: every request it got. */
  const received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
  let receiver: Server;
  let receiverUrl: string;

  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
    d = await startDashboard({
      devnet: [MAINNET.slug, TESTNET.slug],
      overrides: {
        // As --devnet: a block counts once it is in the chain; the follower asks often.
        events: { confirmations: 1, pollIntervalMs: 200 },
        webhooks: { allowPrivateTargets: true },
      },
    });
  });
  after(async () => {
    await d?.close();
    receiver?.close();
  });

  test('faucet: the address is checked as C28 says before sending; a grant shows the real transaction hash, unlinked on the devnet', async () => {
    const { page } = await d.newMember();
    await d.go(page, '/faucet');
    await page.getByRole('heading', { level: 1, name: 'Faucet' }).waitFor();
    // The faucet wallets' balances are listed.
    await page.getByRole('rowheader', { name: 'Native Chain Testnet' }).waitFor();
    const network = page.getByLabel('Network');
    assert.equal(await network.inputValue(), TESTNET.slug);

    const requestsBefore = d.requests.filter((u) => u.includes('/faucet/request')).length;
    const recipient = privateKeyToAddress(generatePrivateKey());
    // C28: mixed case must be the EIP-55 checksum: one letter's case flipped is refused here, before any request.
    const flipped = recipient.replace(/[a-f]/, (c) => c.toUpperCase()) === recipient ? recipient.replace(/[A-F]/, (c) => c.toLowerCase()) : recipient.replace(/[a-f]/, (c) => c.toUpperCase());
    await page.getByLabel('Recipient address').fill(flipped);
    await page.getByRole('button', { name: 'Send test coins' }).click();
    await page.getByText('checksum (EIP-55) does not match').waitFor();
    assert.equal(await page.getByLabel('Recipient address').getAttribute('aria-invalid'), 'true');
    await page.getByLabel('Recipient address').fill('0x1234');
    await page.getByText('Must be 0x followed by 40 hex digits.').waitFor();
    assert.equal(d.requests.filter((u) => u.includes('/faucet/request')).length, requestsBefore, 'an invalid address is never sent');

    // The xdc prefix of the native networks is accepted (C28) and answered as 0x.
    await page.getByLabel('Recipient address').fill(`xdc${recipient.slice(2).toLowerCase()}`);
    await page.getByLabel('Amount (tNAT), optional').fill('0.5');
    await page.getByRole('button', { name: 'Send test coins' }).click();
    const done = page.locator('.banner.ok.grant');
    await done.waitFor({ timeout: 60_000 });
    const text = (await done.innerText()).replace(/\s+/g, ' ');
    assert.match(text, /Sent 0\.5 tNAT to 0x[0-9a-fA-F]{40} on Native Chain Testnet/);
    assert.ok(text.includes(recipient), `the recipient in EIP-55 form: ${text}`);
    const hash = /0x[0-9a-f]{64}/.exec(text)?.[0] as Hex;
    assert.ok(hash, `a transaction hash is shown: ${text}`);
    // The hash is the real transaction's, on the chain, to the recipient.
    const tx = await chainRpc<{ to: string; value: string } | null>(d.gateway.devnet?.upstreams[TESTNET.slug]?.http as string, 'eth_getTransactionByHash', [hash]);
    assert.ok(tx, 'the transaction is known to the chain');
    assert.equal(tx.to.toLowerCase(), recipient.toLowerCase());
    assert.equal(BigInt(tx.value), parseEther('0.5'));
    // The devnet has no explorer (explorerUrl null): the hash is shown, not linked.
    assert.equal(await done.locator('a').count(), 0, 'no explorer link on the devnet');
    assert.match(text, /no block explorer/);
    // The recipient's balance on the network is read again by the page until it shows the grant.
    await page.getByText('holds 0.5 tNAT').waitFor({ timeout: 60_000 });
    await d.check(page, 'faucet');

    // C29: a second grant to the same address is refused; the page says when the next one is possible, in words.
    await page.getByRole('button', { name: 'Send test coins' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    const said = (await refusal.innerText()).replace(/\s+/g, ' ');
    assert.match(said, /The next grant is possible in 2[34] h \d+ min/, said);
    assert.doesNotMatch(said, /[{}"]|FAUCET_COOLDOWN/, 'words, not JSON or codes');
    // The browser logs the 429 itself ("Failed to load resource"): expected here, and only here.
    const expected = (e: string) => e.includes('status of 429') && e.includes('/faucet');
    await waitFor(() => d.errors.some(expected), { timeoutMs: 10_000, what: 'the browser to log the 429' }).catch(() => undefined);
    d.errors.splice(0, d.errors.length, ...d.errors.filter((e) => !expected(e)));
    await page.close();
  });

  test('whale alerts: a free account sees what the plan would give, without asking the API for alerts', async () => {
    const { page } = await d.newMember();
    await d.go(page, '/whale-alerts');
    await page.getByRole('heading', { name: 'Whale alerts come with the Max and Enterprise plans' }).waitFor();
    const words = await mainText(page);
    assert.match(words, /Your account is on the Free plan/);
    assert.equal(await page.getByRole('alert').count(), 0, 'an explanation, not an error');
    assert.ok(!d.requests.some((u) => u.includes('/api/v1/whale-alerts')), 'no whale-alert request for a plan without them');
    await d.check(page, 'whale-alerts-free');
    await page.close();
  });

  test('whale alerts: a max account sees a transfer appear by itself, with its amount and USD value', async () => {
    const m = await d.newMember();
    await d.setTier(m.email, 'max');
    const { page } = m;
    await d.go(page, '/whale-alerts');
    await page.getByText('Live: checks every 5 s').waitFor();
    await page.getByRole('heading', { level: 1, name: 'Whale alerts' }).waitFor();
    // A whale-sized transfer (C45: dev accounts hold 10,000,000 coins), sent after the page is open.
    const chainUrl = d.gateway.devnet?.upstreams[MAINNET.slug]?.http as string;
    const chain = defineChain({ id: MAINNET.chainId, name: 'native', nativeCurrency: { name: 'N', symbol: 'NAT', decimals: 18 }, rpcUrls: { default: { http: [chainUrl] } } });
    const account = privateKeyToAccount(d.gateway.devnet?.accounts[3]?.privateKey as Hex);
    const to = privateKeyToAddress(generatePrivateKey());
    const hash = await createWalletClient({ chain, transport: http(chainUrl), account }).sendTransaction({ to, value: parseEther('123456') });
    // No reload: the list asks again on its own (C36: listed within 5 s of its block being confirmed).
    const row = page.locator('tbody tr', { hasText: '123,456 NAT' });
    await row.waitFor({ timeout: 60_000 });
    const line = (await row.innerText()).replace(/\s+/g, ' ');
    // C45: the devnet prices the native coin at 0.05 USD: 123,456 × 0.05 = 6,172.80.
    assert.match(line, /\$6,172\.80/);
    assert.ok(line.includes(to.slice(2, 6).toLowerCase()), `the recipient, shortened: ${line}`);
    // A minimum above the transfer filters it out; the filter lives in the address.
    await page.getByLabel('Minimum amount (whole coins)').fill('200000');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/minValue=200000/);
    await page.getByText('No whale transfers yet').waitFor();
    await page.getByLabel('Minimum amount (whole coins)').fill('100000');
    await page.getByRole('button', { name: 'Apply' }).click();
    await row.waitFor();
    assert.ok(hash);
    await d.check(page, 'whale-alerts');
    await page.close();
  });

  test('webhooks: a free account sees the plan explanation; a max account creates one, sees the secret once, tests it and deletes it', async () => {
    const m = await d.newMember();
    const { page } = m;
    await d.go(page, '/webhooks');
    await page.getByRole('heading', { name: 'Webhooks come with the Max and Enterprise plans' }).waitFor();
    await d.check(page, 'webhooks-free');

    await d.setTier(m.email, 'max');
    await d.go(page, '/webhooks');
    await page.getByText('No webhooks yet').waitFor();
    await page.getByRole('button', { name: 'New webhook' }).click();
    await page.getByLabel('Endpoint URL').fill(receiverUrl);
    await page.getByLabel('Description, optional').fill('dashboard test');
    await page.getByLabel('Minimum amount (whole coins), optional').fill('50000');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secretBox = page.locator('.secret-once');
    await secretBox.waitFor();
    const secret = (await secretBox.getByLabel('signing secret', { exact: true }).innerText()).trim();
    assert.match(secret, /^whsec_[A-Za-z0-9+/=]{40,}$/, 'the signing secret (C37)');
    assert.match(await secretBox.innerText(), /shown only this once/);
    await d.check(page, 'webhooks-created');
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await secretBox.waitFor({ state: 'detached' });
    assert.ok(!(await page.content()).includes(secret), 'the secret is gone from the page');
    // C37: the API never shows it again either.
    const token = await d.tokenOf(m);
    const listed = await d.api('/api/v1/webhooks', { token });
    assert.ok(!JSON.stringify(listed.body).includes(secret));

    // Test: the delivery is listed as delivered, and it was signed with the secret the page showed.
    const card = page.locator('.card-list > li', { hasText: receiverUrl });
    await card.getByRole('button', { name: 'Send test event' }).click();
    await card.locator('.deliveries tbody tr', { hasText: 'webhook.test' }).waitFor();
    await card.locator('.deliveries .tag', { hasText: 'delivered' }).waitFor({ timeout: 30_000 });
    const got = await waitFor(() => received.find((r) => r.body.includes('webhook.test')), { what: 'the test delivery' });
    const wh = new Webhook(secret);
    assert.doesNotThrow(() =>
      wh.verify(got.body, {
        'webhook-id': String(got.headers['webhook-id']),
        'webhook-timestamp': String(got.headers['webhook-timestamp']),
        'webhook-signature': String(got.headers['webhook-signature']),
      }),
    );
    // Figures grouped as on every other page (100,000), not 50000.
    assert.equal(await card.getByTestId('webhook-min').innerText(), '50,000 coins');
    await d.check(page, 'webhooks');

    // Delete, after a confirmation; Cancel first keeps it.
    await card.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this webhook?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.equal((await d.api('/api/v1/webhooks', { token })).body.data.length, 1);
    await card.getByRole('button', { name: 'Delete' }).click();
    await dialog.getByRole('button', { name: 'Delete webhook' }).click();
    await page.getByText('No webhooks yet').waitFor();
    assert.equal((await d.api('/api/v1/webhooks', { token })).body.data.length, 0);
    await page.close();
  });

  test('analytics: free sees what Pro would give; pro sees its calls: top methods, latency and refusals (C46)', async () => {
    const m = await d.newMember();
    const { page } = m;
    await d.go(page, '/analytics');
    await page.getByRole('heading', { name: 'Advanced analytics come with the Pro, Max and Enterprise plans' }).waitFor();
    assert.ok(!d.requests.some((u) => u.includes('/api/v1/usage/analytics')), 'no analytics request for a free account');
    await d.check(page, 'analytics-free');

    await d.setTier(m.email, 'pro');
    const token = await d.tokenOf(m);
    const key = await d.api('/api/v1/api-keys', { token, body: { name: 'analytics key', networks: [MAINNET.slug] } });
    assert.equal(key.status, 200, JSON.stringify(key.body));
    const call = (chainId: number, method: string) =>
      fetch(`${d.url}/rpc/main/evm/${chainId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key.body.data.key },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }),
      }).then((r) => r.json());
    for (let i = 0; i < 6; i++) await call(MAINNET.chainId, 'eth_blockNumber');
    await call(MAINNET.chainId, 'eth_chainId');
    // A network the key does not allow: refused, counted by reason (C46), never usage.
    const refused = (await call(TESTNET.chainId, 'eth_blockNumber')) as { error?: unknown };
    assert.ok(refused.error, 'the key is refused on a network it does not have');

    await d.go(page, '/analytics');
    // Flushed with usage (every 2 s): the page's Refresh shows it once it is in. The calls and the
    // refusal may land in two flushes, so both are waited for.
    await waitFor(
      async () => {
        const text = await mainText(page);
        if ((await page.locator('table.top-methods').count()) && text.includes('eth_blockNumber') && text.includes('network not allowed: 1')) return true;
        await page.getByRole('button', { name: 'Refresh' }).click();
        await page.waitForTimeout(1000);
        return false;
      },
      { timeoutMs: 60_000, what: 'the calls in the analytics' },
    );
    const methods = (await page.locator('table.top-methods').innerText()).replace(/\s+/g, ' ');
    assert.match(methods, /eth_blockNumber 6\b/);
    assert.match(methods, /eth_chainId 1\b/);
    await page.getByText('network not allowed: 1').waitFor();
    // Charts are drawn by Chart.js on canvases: latency, rates, methods.
    assert.equal(await page.locator('main canvas').count(), 3);
    const words = await mainText(page);
    assert.match(words, /Requests 7\b/);
    await d.check(page, 'analytics');
    await page.close();
  });
});
