// The dashboard's shell (C43): served at `/` under a strict CSP, pages reloadable at their own
// address, the API's 404s untouched, sign up / sign out / sign in in a real browser. The API docs
// (/docs, C3) under the same policy, in the same browser.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { browserSkip, type Dashboard, SCREENSHOTS, startDashboard } from './support.ts';

describe('dashboard shell in chromium (C43)', { skip: await browserSkip() }, () => {
  let d: Dashboard;
  before(async () => {
    d = await startDashboard();
  });
  after(() => d?.close());

  test('a guest at / lands on sign in; the sign-in and sign-up pages pass axe at both widths', async () => {
    const page = await d.newPage();
    await d.go(page, '/');
    await page.waitForURL(/\/signin$/);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await d.check(page, 'signin');
    await d.go(page, '/signup');
    await page.getByRole('heading', { level: 1, name: 'Create an account' }).waitFor();
    await d.check(page, 'signup');
    await page.close();
  });

  test('the API docs at /docs render under their Content-Security-Policy (C3): operations listed, Try it out answers, no violation', async () => {
    const page = await d.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    const res = await page.goto('/docs/', { waitUntil: 'load' });
    assert.match(String(res?.headers()['content-security-policy']), /script-src 'self';/);
    const op = page.locator('#operations-networks-listNetworks');
    await op.waitFor();
    assert.ok((await page.locator('.opblock').count()) > 20, 'the operations are listed');
    await op.locator('.opblock-summary-control').click();
    await op.getByRole('button', { name: 'Try it out' }).click();
    await op.getByRole('button', { name: 'Execute' }).click();
    // The live answer of the gateway, fetched from the page (connect-src 'self').
    await op.locator('.live-responses-table .response-col_status', { hasText: '200' }).waitFor();
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'docs-desktop.png') });
    await page.getByRole('button', { name: /Authorize/ }).first().click();
    await page.locator('.modal-ux').waitFor();
    assert.deepEqual(violations, []);
    await page.close();
  });

  test('a newcomer signs up, signs out, and signs in again; a wrong password is said in words', async () => {
    const m = await d.newMember();
    const { page } = m;
    await page.getByRole('button', { name: 'Sign out' }).first().click();
    await page.waitForURL(/\/signin/);
    await d.signIn(page, m.email, 'not the password', { expect: 'refused' });
    const words = (await page.getByRole('alert').textContent()) ?? '';
    assert.doesNotMatch(words, /[{}"]/, `an error in words, not JSON: ${words}`);
    assert.ok(words.length > 5);
    await d.signIn(page, m.email, m.password);
    await page.close();
  });
});
