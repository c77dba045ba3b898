// The dashboard's shell (C43): served at `/` under a strict CSP, pages reloadable at their own
// address, the API's 404s untouched, sign up / sign out / sign in in a real browser.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { browserSkip, type Dashboard, startDashboard } from './support.ts';

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

  test('a newcomer signs up, signs out, and signs in again; a wrong password is said in words', async () => {
    const m = await d.newMember();
    const { page } = m;
    await page.getByRole('button', { name: 'Sign out' }).first().click();
    await page.waitForURL(/\/signin/);
    await page.getByLabel('E-mail').fill(m.email);
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const words = (await alert.textContent()) ?? '';
    assert.doesNotMatch(words, /[{}"]/, `an error in words, not JSON: ${words}`);
    assert.ok(words.length > 5);
    await page.getByLabel('Password').fill(m.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/keys/);
    await page.close();
  });
});
