// A small router over the History API: addresses are real paths (/keys), which the gateway
// answers with the dashboard on a reload (routes.json, src/http/dashboard.ts).
import { useEffect, useState } from 'preact/hooks';

/** Where `/` leads (here, not in the page registry: pages use them, and the registry loads the pages). */
export const HOME_SIGNED_IN = '/keys';
export const HOME_SIGNED_OUT = '/signin';

const listeners = new Set<() => void>();
const notify = () => listeners.forEach((l) => l());
window.addEventListener('popstate', notify);

export interface Location {
  path: string;
  query: URLSearchParams;
}

const current = (): Location => ({ path: location.pathname.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) });

/** Goes to `to` (a path with an optional query) without reloading the page. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (to === location.pathname + location.search) return;
  history[opts.replace ? 'replaceState' : 'pushState'](null, '', to);
  notify();
}

/** The current path and query; the component re-renders when they change. */
export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () => setLoc(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return loc;
}

/** Replaces the query string (filters, a selected key) without adding a history entry. */
export function setQuery(params: Record<string, string | undefined>): void {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === '') q.delete(k);
    else q.set(k, v);
  }
  const s = q.toString();
  navigate(`${location.pathname}${s ? `?${s}` : ''}`, { replace: true });
}

/** A link that changes page without a reload; modified clicks (new tab) keep the browser's way. */
export function onLinkClick(e: MouseEvent): void {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target) return;
  if (a.origin !== location.origin) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}
