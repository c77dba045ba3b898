// Browser tests of the dashboard (C43): the gateway on a real port (with anvil chains when a page
// needs them) and Debian's chromium driven by playwright-core. Every page a test opens is
// watched: a console error, an uncaught script error or a request to another origin fails the
// suite at `close()`. `check()` runs axe-core and saves screenshots (desktop and 375 px wide).
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { startTestApp, type TestApp, uniqueEmail } from '../support/app.ts';
import { ROOT } from '../support/process.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Where screenshots go (git-ignored): look at them before calling a page done. */
export const SCREENSHOTS = path.join(ROOT, 'test-results', 'screenshots');
export const ADMIN_TOKEN = 'admin-token-for-dashboard-tests-0123';
const NARROW = { width: 375, height: 812 };
const DESKTOP = { width: 1280, height: 860 };

/**
 * `skip` option for a browser suite: false when chromium is there (or REQUIRE_SERVICES=1, so that
 * a missing browser fails the run), else the reason printed as the skip.
 */
export async function browserSkip(): Promise<false | string> {
  if (process.env.REQUIRE_SERVICES === '1' || existsSync(CHROMIUM)) return false;
  return `chromium is not at ${CHROMIUM}: dashboard browser tests skipped (apt-get install -y chromium; REQUIRE_SERVICES=1 fails instead)`;
}

/** Builds web/dist/ when it is missing or older than web/ (a no-op otherwise), as npm start does. */
async function ensureBuilt(): Promise<void> {
  const mod = (await import(pathToFileURL(path.join(ROOT, 'scripts/build.mjs')).href)) as { buildWeb(): Promise<boolean> };
  await mod.buildWeb();
  assert.ok(existsSync(path.join(ROOT, 'web/dist/index.html')), 'the dashboard is built');
}

export interface Member {
  page: Page;
  email: string;
  password: string;
  name: string;
}

export interface Dashboard {
  gateway: TestApp;
  /** The gateway's origin, e.g. http://127.0.0.1:40123. */
  url: string;
  browser: Browser;
  context: BrowserContext;
  /** Every URL the pages requested. */
  requests: string[];
  /** Console errors and uncaught errors of the pages. */
  errors: string[];
  /** A new watched tab (desktop size). */
  newPage(): Promise<Page>;
  /**
   * Signs a new account up through the form; resolves on the keys page. The browser context keeps
   * one login at a time (the refresh cookie), so whoever it has signed in is signed out first.
   */
  newMember(opts?: { page?: Page; name?: string }): Promise<Member>;
  /**
   * Fills the sign-in form (the page is on /signin) and submits it; resolves on the keys page, or,
   * with `expect: 'refused'`, once the form shows its alert.
   */
  signIn(page: Page, email: string, password: string, opts?: { expect?: 'keys' | 'refused' }): Promise<void>;
  /** POST /auth/login through the REST API (setting things up beside the browser). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers read freely in tests
  login(email: string, password: string): Promise<{ status: number; body: any }>;
  /** A member's bearer token, through the REST API; fails the test if the login is refused. */
  tokenOf(m: Pick<Member, 'email' | 'password'>): Promise<string>;
  /** Goes to a dashboard address (a path) and waits for the page to settle. */
  go(page: Page, pathname: string): Promise<void>;
  /** axe-core (no serious or critical violation), nothing wider than 375 px, and the two screenshots `<name>-desktop.png`, `<name>-375.png`. */
  check(page: Page, name: string): Promise<void>;
  /** A REST call to the gateway (JSON in, JSON out). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers read freely in tests
  api(pathname: string, opts?: { method?: string; token?: string; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any }>;
  /** Changes an account's plan through the admin API. */
  setTier(email: string, tier: 'free' | 'pro' | 'max' | 'enterprise'): Promise<void>;
  /** Closes browser and gateway, then asserts no console error and no request off the gateway's origin. */
  close(): Promise<void>;
}

let axeSource: string | undefined;

export async function startDashboard(opts: { devnet?: string[]; env?: Record<string, string>; overrides?: Record<string, unknown> } = {}): Promise<Dashboard> {
  await ensureBuilt();
  const gateway = await startTestApp({
    listen: true,
    env: { ADMIN_TOKEN, ...opts.env },
    ...(opts.overrides ? { overrides: opts.overrides } : {}),
    ...(opts.devnet ? { devnet: true, devnetNetworks: opts.devnet } : {}),
  });
  const url = gateway.url;
  let browser: Browser;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
      timeout: 60_000,
    });
  } catch (err) {
    await gateway.close();
    throw err;
  }
  const context = await browser.newContext({ viewport: DESKTOP, baseURL: url, locale: 'en-GB', timezoneId: 'UTC' });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
  context.setDefaultTimeout(30_000);
  const requests: string[] = [];
  const errors: string[] = [];

  const newPage = async () => {
    const page = await context.newPage();
    page.on('console', (m) => {
      // A 4xx the page asked for is bad input refused in words (the tests check the words); a
      // 5xx, a refused connection or anything else the browser reports is a failure.
      if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) {
        errors.push(`console: ${m.text()} (${page.url()})`);
      }
    });
    page.on('pageerror', (e) => errors.push(`script error: ${e.message} (${page.url()})`));
    page.on('request', (r) => requests.push(r.url()));
    return page;
  };

  const go = async (page: Page, pathname: string) => {
    await page.goto(pathname, { waitUntil: 'load' });
    await page.locator('main h1').first().waitFor();
  };

  const api: Dashboard['api'] = async (pathname, o = {}) => {
    const res = await fetch(`${url}${pathname}`, {
      method: o.method ?? (o.body === undefined ? 'GET' : 'POST'),
      headers: {
        ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(o.token ? { authorization: `Bearer ${o.token}` } : {}),
        ...o.headers,
      },
      ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.status, body };
  };

  const login: Dashboard['login'] = (email, password) => api('/api/v1/auth/login', { body: { email, password } });

  return {
    gateway,
    url,
    browser,
    context,
    requests,
    errors,
    newPage,
    go,
    api,
    login,
    async tokenOf(m) {
      const res = await login(m.email, m.password);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.tokens.accessToken as string;
    },
    async signIn(page, email, password, o = {}) {
      await page.getByLabel('E-mail').fill(email);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      if (o.expect === 'refused') await page.getByRole('alert').waitFor();
      else await page.waitForURL(/\/keys/);
    },
    async newMember(o = {}) {
      const page = o.page ?? (await newPage());
      const email = uniqueEmail('web');
      const password = 'a long dashboard password';
      const name = o.name ?? 'Ada Lovelace';
      await go(page, '/signin');
      await page.waitForURL(/\/(signin|keys)/);
      if (new URL(page.url()).pathname === '/keys') {
        await page.getByRole('button', { name: 'Sign out' }).first().click();
        await page.waitForURL(/\/signin/);
      }
      await go(page, '/signup');
      await page.getByLabel('Name').fill(name);
      await page.getByLabel('E-mail').fill(email);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.waitForURL(/\/keys/);
      await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
      return { page, email, password, name };
    },
    async check(page, name) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      axeSource ??= readFileSync(path.join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8');
      // Evaluated through the DevTools protocol, which the page's CSP does not govern.
      await page.evaluate(`${axeSource}\n;0`);
      const axe = async (size: string) => {
        const found = (await page.evaluate(async () => {
          const w = window as unknown as { axe: { run(ctx: Document, o: unknown): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: unknown }> }> }> } };
          const r = await w.axe.run(document, { resultTypes: ['violations'] });
          return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map((n) => JSON.stringify(n.target)) }));
        })) as Array<{ id: string; impact: string; help: string; targets: string[] }>;
        const bad = found.filter((v) => v.impact === 'serious' || v.impact === 'critical');
        assert.deepEqual(bad, [], `${name} (${size}): accessibility violations: ${JSON.stringify(bad)}`);
      };
      await axe('desktop');
      await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-desktop.png`), fullPage: true });
      const before = page.viewportSize() ?? DESKTOP;
      await page.setViewportSize(NARROW);
      try {
        await page.waitForFunction(() => window.innerWidth === 375);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        // Names the outermost elements that reach past the viewport, so a failure says what overflows.
        const culprits =
          width <= NARROW.width
            ? []
            : await page.evaluate(() => {
                const out: string[] = [];
                for (const el of Array.from(document.body.querySelectorAll('*'))) {
                  const r = el.getBoundingClientRect();
                  if (r.right <= window.innerWidth + 1 || (el.parentElement && el.parentElement.getBoundingClientRect().right > window.innerWidth + 1)) continue;
                  out.push(`${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''} (${Math.round(r.width)} px)`);
                  if (out.length >= 5) break;
                }
                return out;
              });
        assert.ok(width <= NARROW.width, `${name}: the page is ${width} px wide at 375 px (something overflows: ${culprits.join(', ')})`);
        await axe('375 px');
        await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-375.png`), fullPage: true });
      } finally {
        await page.setViewportSize(before);
      }
    },
    async setTier(email, tier) {
      const headers = { 'x-admin-token': ADMIN_TOKEN };
      const found = await api(`/api/v1/admin/users?email=${encodeURIComponent(email)}`, { headers });
      const user = (found.body.data as Array<{ id: string; email: string }>).find((u) => u.email === email.toLowerCase());
      assert.ok(user, `account ${email}`);
      const res = await api(`/api/v1/admin/users/${user.id}`, { method: 'PATCH', headers, body: { tier } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    },
    async close() {
      await browser.close().catch(() => {});
      await gateway.close();
      const origin = new URL(url).origin;
      const away = requests.filter((r) => !r.startsWith(`${origin}/`) && !r.startsWith('data:') && !r.startsWith('blob:'));
      assert.deepEqual(away, [], 'every request stays on the gateway origin');
      assert.deepEqual(errors, [], `no console or script error: ${errors.join(' | ')}`);
    },
  };
}
