// The dashboard's pages: one line each (see web/PAGES.md). `path` must be a plain string literal:
// the build copies the paths into routes.json, which tells the gateway which addresses are pages.
import type { ComponentType } from 'preact';

export interface PageDef {
  /** The address, e.g. '/keys': lower case, digits, '-' and '/'; never /api, /v1, /rpc, /ws, /health, /docs, /metrics, /public, /assets. */
  path: string;
  /** The navigation label and the document title. */
  title: string;
  /** Shown in the top navigation (signed in). */
  nav: boolean;
  /** Who may see it: signed-in pages send others to /signin, signed-out pages (sign in, sign up) send members to /keys. */
  access: 'signed-in' | 'signed-out' | 'any';
  /** The page's module; its default export is the page component. Loaded on first visit. */
  load: () => Promise<{ default: ComponentType }>;
}

export const pages: PageDef[] = [
  { path: '/signin', title: 'Sign in', nav: false, access: 'signed-out', load: () => import('./pages/signin.tsx') },
  { path: '/signup', title: 'Sign up', nav: false, access: 'signed-out', load: () => import('./pages/signup.tsx') },
  { path: '/keys', title: 'API keys', nav: true, access: 'signed-in', load: () => import('./pages/keys.tsx') },
  { path: '/endpoints', title: 'Endpoints', nav: true, access: 'signed-in', load: () => import('./pages/endpoints.tsx') },
  { path: '/usage', title: 'Usage', nav: true, access: 'signed-in', load: () => import('./pages/usage.tsx') },
  { path: '/analytics', title: 'Analytics', nav: true, access: 'signed-in', load: () => import('./pages/analytics.tsx') },
  { path: '/faucet', title: 'Faucet', nav: true, access: 'signed-in', load: () => import('./pages/faucet.tsx') },
  { path: '/whale-alerts', title: 'Whale alerts', nav: true, access: 'signed-in', load: () => import('./pages/whale-alerts.tsx') },
  { path: '/webhooks', title: 'Webhooks', nav: true, access: 'signed-in', load: () => import('./pages/webhooks.tsx') },
  { path: '/intents', title: 'Intents', nav: true, access: 'signed-in', load: () => import('./pages/intents.tsx') },
  { path: '/balance', title: 'Balance', nav: true, access: 'signed-in', load: () => import('./pages/balance.tsx') },
  // Not in the list of the top navigation: the signed-in e-mail beside "Sign out" links to it.
  { path: '/account', title: 'Account', nav: false, access: 'signed-in', load: () => import('./pages/account.tsx') },
  // More pages: one line each, in the order of the navigation.
];
