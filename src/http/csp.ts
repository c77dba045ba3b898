/** A plain host[:port] (or [IPv6]:port): the only kind of Host header repeated in a policy. */
const PLAIN_HOST = /^[a-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-f:.]+\](:\d{1,5})?$/i;

/**
 * The Content-Security-Policy of the pages the gateway serves: the dashboard (C43) and the API
 * docs at /docs (C3). Scripts, styles, connections and images from this origin only, nothing
 * inline, no frames, no <base>. With `host` (the request's), `connect-src` also names the
 * WebSocket of that host, which the dashboard uses; `styleHashes` admits inline styles of exactly
 * these contents (`sha256-...`), no other.
 */
export function contentSecurityPolicy(opts: { host?: string | undefined; styleHashes?: readonly string[] } = {}): string {
  const { host, styleHashes = [] } = opts;
  // The host comes from the request: only a plain host[:port] is repeated in the header.
  const ws = host && PLAIN_HOST.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    ["style-src 'self'", ...styleHashes.map((h) => `'${h}'`)].join(' '),
    "img-src 'self' data:",
    `connect-src 'self'${ws}`,
    "font-src 'self'",
    "object-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
}

/**
 * The one inline style of Swagger UI (@fastify/swagger-ui 6): the `<style>` of its stock logo,
 * drawn before the page swaps in its own. The docs page's test in chromium fails on any CSP
 * violation, so a Swagger UI that changes it is noticed.
 */
export const SWAGGER_UI_STYLE_HASHES = ['sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='] as const;
