// The dashboard's only way to the gateway: the REST API under /api/v1, same origin.
//
// Sign-in (C5, C43): the access token lives in this module's memory only (never in storage, so a
// reload or another tab gets a fresh one). The refresh token is an HttpOnly cookie that the
// gateway sets when the dashboard asks for `"session": "cookie"` and that only /api/v1/auth/*
// receives: scripts never see it. The access token is renewed a minute before it expires and
// again, once, when a call answers 401; the user notices neither.
//
// Calls are typed by the route: `api.get('/api/v1/usage/stats', { query })` resolves with the
// generated type of that route's `data` (web/src/api-types.ts, from the gateway's OpenAPI
// document), so no page writes an API type of its own.
import { useEffect, useState } from 'preact/hooks';
import type { ApiRoutes, RefreshTokensData, Session, User } from './api-types.ts';

/** A failed REST call: the C7 envelope's code and message, or words for what went wrong on the way. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  constructor(status: number, code: string, message: string, details?: unknown) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** Words for any error, for the page to show: never raw JSON. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof TypeError) return 'The gateway could not be reached. Check the connection and try again.';
  if (err instanceof Error && err.message) return err.message;
  return 'Something went wrong. Try again.';
}

/** The field messages of a 400 (C7 `details`), by field name without its `body.` or `querystring.` part. */
export function fieldErrors(err: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!(err instanceof ApiError) || !Array.isArray(err.details)) return out;
  for (const d of err.details as Array<{ field?: unknown; message?: unknown }>) {
    if (typeof d.field === 'string' && typeof d.message === 'string') out[d.field.replace(/^(body|querystring|params)\.?/, '') || 'body'] = d.message;
  }
  return out;
}

// ---- session -------------------------------------------------------------------------------

export type SessionState = { status: 'unknown' } | { status: 'signed-out'; reason?: string } | { status: 'signed-in'; user: User };

let state: SessionState = { status: 'unknown' };
const watchers = new Set<(s: SessionState) => void>();
let access: { token: string; expiresAt: number } | undefined;
let renewTimer: ReturnType<typeof setTimeout> | undefined;
/** Not a secret: only says that this browser signed in, so a reload tries the cookie. */
const HINT = 'junction.signedIn';

function setState(s: SessionState): void {
  state = s;
  for (const w of watchers) w(s);
}

export function sessionState(): SessionState {
  return state;
}

/** The session, re-rendering the component when it changes. */
export function useSession(): SessionState {
  const [s, set] = useState(state);
  useEffect(() => {
    watchers.add(set);
    set(state);
    return () => void watchers.delete(set);
  }, []);
  return s;
}

function expiryOf(token: string): number {
  try {
    const payload = JSON.parse(atob(token.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/'))) as { exp?: number };
    return typeof payload.exp === 'number' ? payload.exp * 1000 : Date.now() + 60_000;
  } catch {
    return Date.now() + 60_000;
  }
}

function keepAccess(token: string): void {
  access = { token, expiresAt: expiryOf(token) };
  clearTimeout(renewTimer);
  // A minute before expiry (C5: 15 minutes), at the earliest 5 s from now.
  const wait = Math.max(5_000, access.expiresAt - Date.now() - 60_000);
  renewTimer = setTimeout(() => void renew(), wait);
}

function forget(reason?: string): void {
  access = undefined;
  clearTimeout(renewTimer);
  try {
    localStorage.removeItem(HINT);
  } catch {}
  setState(reason ? { status: 'signed-out', reason } : { status: 'signed-out' });
}

let renewing: Promise<boolean> | undefined;

/**
 * A new access token from the refresh cookie (which the gateway rotates, C5). One at a time across
 * this browser's tabs (Web Locks), so two tabs never present the same refresh token: a second use
 * would count as reuse and end the login.
 */
function renew(): Promise<boolean> {
  renewing ??= (async () => {
    const run = async () => {
      const res = await fetch('/api/v1/auth/refresh', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ session: 'cookie' }),
        credentials: 'same-origin',
      });
      if (!res.ok) return false;
      const body = (await res.json()) as { data: RefreshTokensData };
      keepAccess(body.data.accessToken);
      return true;
    };
    try {
      const ok = navigator.locks ? await navigator.locks.request('junction-refresh', run) : await run();
      if (!ok) forget('Your session has ended. Sign in again.');
      return ok;
    } catch {
      // The gateway did not answer: keep what we have, try again at the next call.
      return access !== undefined && access.expiresAt > Date.now();
    }
  })().finally(() => {
    renewing = undefined;
  });
  return renewing;
}

// ---- calls ---------------------------------------------------------------------------------

type Query = Record<string, string | number | boolean | undefined>;

async function send(method: string, path: string, body: unknown, query: Query | undefined, retried = false): Promise<unknown> {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (access) headers.authorization = `Bearer ${access.token}`;
  const res = await fetch(url, { method, headers, body: body === undefined ? null : JSON.stringify(body), credentials: 'same-origin' });
  if (res.status === 401 && access && !retried && !path.startsWith('/api/v1/auth/')) {
    if (await renew()) return send(method, path, body, query, true);
  }
  let json: { success?: boolean; data?: unknown; message?: string; error?: { code?: string; message?: string; details?: unknown } } | undefined;
  try {
    json = (await res.json()) as typeof json;
  } catch {
    json = undefined;
  }
  if (res.ok && json?.success) return json.data !== undefined ? json.data : json.message;
  if (res.status === 401 && state.status === 'signed-in' && !path.startsWith('/api/v1/auth/')) forget('Your session has ended. Sign in again.');
  const e = json?.error;
  if (e?.message) {
    const words = res.status === 429 && res.headers.get('retry-after') ? `${e.message} Try again in ${res.headers.get('retry-after')} s.` : e.message;
    throw new ApiError(res.status, e.code ?? 'ERROR', words.replace(/\b(body|querystring)\./g, ''), e.details);
  }
  throw new ApiError(res.status, 'HTTP_ERROR', res.status >= 500 ? `The gateway answered with an error (${res.status}). Try again in a moment.` : `The request failed (${res.status}).`);
}

type Method = keyof ApiRoutes;
/** What a call takes besides its path, as the route's schema says: `params` (the `{name}` parts of the path), `query`, `body`. */
type Input<R> = Omit<R, 'data'>;
/** The input may be left out when nothing in it is required. */
type InputArg<R> = Record<never, never> extends Input<R> ? [input?: Input<R>] : [input: Input<R>];
type DataOf<R> = R extends { data: infer D } ? D : never;

function caller<M extends Method>(method: M) {
  return async <P extends keyof ApiRoutes[M] & string>(path: P, ...[input]: InputArg<ApiRoutes[M][P]>): Promise<DataOf<ApiRoutes[M][P]>> => {
    const given = (input ?? {}) as { params?: Record<string, string>; query?: Query; body?: unknown };
    const url = path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = given.params?.[name];
      if (value === undefined) throw new Error(`${path}: no value for {${name}}`);
      return encodeURIComponent(value);
    });
    // A POST without a body sends `{}`: the routes that take nothing validate it as that.
    const body = method === 'post' ? (given.body ?? {}) : given.body;
    return send(method.toUpperCase(), url, body, given.query) as Promise<DataOf<ApiRoutes[M][P]>>;
  };
}

/**
 * Calls to the REST API by method and path as the OpenAPI document writes them
 * (`api.get('/api/v1/webhooks/{id}/deliveries', { params: { id }, query: { limit: 20 } })`): each
 * resolves with the answer's `data` (or `message`), typed from web/src/api-types.ts, and rejects
 * with an ApiError.
 */
export const api = {
  get: caller('get'),
  post: caller('post'),
  patch: caller('patch'),
  delete: caller('delete'),
};

// ---- signing in and out --------------------------------------------------------------------

function signedIn(answer: Session): void {
  keepAccess(answer.tokens.accessToken);
  try {
    localStorage.setItem(HINT, '1');
  } catch {}
  setState({ status: 'signed-in', user: answer.user });
}

export async function signIn(email: string, password: string): Promise<void> {
  signedIn(await api.post('/api/v1/auth/login', { body: { email, password, session: 'cookie' } }));
}

export async function signUp(name: string, email: string, password: string): Promise<void> {
  signedIn(await api.post('/api/v1/auth/register', { body: { name, email, password, session: 'cookie' } }));
}

/** Signs this login out at the gateway (its refresh token stops working, the cookie is cleared). */
export async function signOut(): Promise<void> {
  try {
    if (access) await api.post('/api/v1/auth/logout');
  } catch {
    // Signed out here all the same; the refresh token expires on its own.
  }
  forget();
}

/**
 * Changes the password (C5). The gateway signs every login out and answers fresh tokens in the
 * body; the page keeps no refresh token, so that fresh login is closed at once and this browser
 * signs in again with the new password, which puts a new refresh token in the HttpOnly cookie.
 */
export async function changePassword(currentPassword: string, newPassword: string): Promise<void> {
  if (state.status !== 'signed-in') throw new ApiError(401, 'UNAUTHORIZED', 'Not signed in.');
  const email = state.user.email;
  const fresh = await api.post('/api/v1/auth/password', { body: { currentPassword, newPassword } });
  keepAccess(fresh.accessToken);
  try {
    await api.post('/api/v1/auth/logout');
  } catch {
    // That login's refresh token was never kept here; it expires on its own.
  }
  await signIn(email, newPassword);
}

/** Signs every login of the account out, this browser's included (POST /auth/logout-all). */
export async function signOutEverywhere(): Promise<void> {
  await api.post('/api/v1/auth/logout-all');
  forget('You are signed out everywhere: every browser and app that was signed in must sign in again.');
}

/** At load: back in with the refresh cookie when this browser signed in before, else signed out. */
export async function restoreSession(): Promise<void> {
  let hinted = false;
  try {
    hinted = localStorage.getItem(HINT) === '1';
  } catch {}
  if (!hinted || !(await renew())) {
    if (state.status === 'unknown') forget();
    return;
  }
  try {
    const me = await api.get('/api/v1/me');
    setState({ status: 'signed-in', user: { id: me.id, email: me.email, name: me.name, tier: me.tier } });
  } catch {
    forget('Your session has ended. Sign in again.');
  }
}

// ---- data for pages ------------------------------------------------------------------------

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** Loads again (after a change). */
  reload: () => void;
}

/** Runs `load` when the component appears and whenever `deps` change; keeps the last data while reloading. */
export function useApi<T>(load: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(undefined);
        setLoading(false);
      },
      (e: unknown) => {
        if (!live) return;
        setError(e);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data, error, loading, reload: () => setTick((n) => n + 1) };
}
