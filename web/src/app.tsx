// The shell: header with the navigation, the page of the current address, the sign-in guard.
import type { ComponentType } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { signOut, useSession } from './api.ts';
import { ErrorBanner, Link, Loading, Page } from './components/page.tsx';
import { type PageDef, pages } from './registry.ts';
import { HOME_SIGNED_IN, HOME_SIGNED_OUT, navigate, useLocation } from './router.ts';

const loaded = new Map<string, ComponentType>();

function usePage(def: PageDef | undefined): { Component: ComponentType | undefined; error: unknown } {
  const [, rerender] = useState(0);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    if (!def || loaded.has(def.path)) return;
    setError(undefined);
    def.load().then(
      (m) => {
        loaded.set(def.path, m.default);
        rerender((n) => n + 1);
      },
      (e: unknown) => setError(e instanceof Error ? new Error('This page could not be loaded. Reload to try again.') : e),
    );
  }, [def?.path]);
  return { Component: def ? loaded.get(def.path) : undefined, error };
}

function Nav(props: { path: string; email: string }) {
  const links = pages.filter((p) => p.nav);
  const item = (p: PageDef) => (
    <li key={p.path}>
      <Link href={p.path} aria-current={props.path === p.path ? 'page' : undefined}>
        {p.title}
      </Link>
    </li>
  );
  return (
    <nav class="top container" aria-label="Main">
      <ul>
        <li>
          <Link href={HOME_SIGNED_IN} class="brand">
            Junction
          </Link>
        </li>
      </ul>
      <ul class="wide-only">{links.map(item)}</ul>
      <ul>
        <li class="wide-only account">
          <Link href="/account" aria-current={props.path === '/account' ? 'page' : undefined} title={`Account: ${props.email}`}>
            {props.email}
          </Link>
        </li>
        <li>
          <button type="button" class="secondary outline small" onClick={() => void signOut().then(() => navigate(HOME_SIGNED_OUT))}>
            Sign out
          </button>
        </li>
      </ul>
      <details class="narrow-only menu">
        <summary>Menu</summary>
        <ul>
          {links.map(item)}
          <li>
            <Link href="/account" aria-current={props.path === '/account' ? 'page' : undefined}>
              Account
            </Link>
          </li>
        </ul>
      </details>
    </nav>
  );
}

export function App() {
  const session = useSession();
  const { path } = useLocation();
  const def = pages.find((p) => p.path === path);
  const { Component, error } = usePage(def);

  // Who may see what: guests go to sign in, members away from sign-in pages; `/` picks for them.
  let redirect: string | undefined;
  if (session.status === 'signed-in' && (path === '/' || def?.access === 'signed-out')) redirect = HOME_SIGNED_IN;
  if (session.status === 'signed-out' && (path === '/' || def?.access === 'signed-in')) {
    redirect = path === '/' ? HOME_SIGNED_OUT : `${HOME_SIGNED_OUT}?next=${encodeURIComponent(path + location.search)}`;
  }
  useEffect(() => {
    if (redirect) navigate(redirect, { replace: true });
  }, [redirect]);

  // After each navigation the new page's heading takes the focus (keyboard and screen readers).
  // Not on the page the browser loaded (or reloaded): there the focus starts at the top of the
  // document, where the first Tab reaches "Skip to the page", as on any site.
  const landed = useRef<string | null>(path);
  useEffect(() => {
    if (landed.current !== null) {
      if (path === landed.current) return;
      landed.current = null;
    }
    window.scrollTo(0, 0);
    const t = setTimeout(() => document.querySelector<HTMLElement>('main h1')?.focus({ preventScroll: true }), 0);
    return () => clearTimeout(t);
  }, [path, Component]);

  const signedIn = session.status === 'signed-in';
  let body;
  if (session.status === 'unknown' || redirect) body = <Loading />;
  else if (!def)
    body = (
      <Page title="Page not found">
        <p>
          Nothing lives at this address. <Link href="/">Back to the dashboard</Link>.
        </p>
      </Page>
    );
  else if (error) body = <ErrorBanner error={error} />;
  else body = Component ? <Component /> : <Loading />;

  return (
    <>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header class="site">
        {signedIn ? (
          <Nav path={path} email={session.user.email} />
        ) : (
          <nav class="top container" aria-label="Main">
            <ul>
              <li>
                <Link href="/" class="brand">
                  Junction
                </Link>
              </li>
            </ul>
            <ul>
              <li>
                <Link href="/signin" aria-current={path === '/signin' ? 'page' : undefined}>
                  Sign in
                </Link>
              </li>
              <li>
                <Link href="/signup" aria-current={path === '/signup' ? 'page' : undefined}>
                  Sign up
                </Link>
              </li>
            </ul>
          </nav>
        )}
      </header>
      <main id="main" class="container">
        {session.status === 'signed-out' && session.reason && def?.access !== 'signed-in' ? (
          <div class="banner info" role="status">
            {session.reason}
          </div>
        ) : null}
        {body}
      </main>
      <footer class="container site muted">
        <small>
          Junction · <a href="/docs">API reference</a>
        </small>
      </footer>
    </>
  );
}
