// Serves the built dashboard at `/` (C43), never at the API's, RPC's or operations' addresses.
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { contentSecurityPolicy } from './csp.ts';

/** Where the build (scripts/build.mjs) puts the dashboard: web/dist/ at the project's root, from src/ or dist/ alike. */
export const DASHBOARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web/dist');

/**
 * Addresses that belong to the API, the RPC and the operations: the dashboard never answers them,
 * not even as a fallback, so their unknown paths keep their own 404 (C1, C7).
 */
const RESERVED = ['api', 'v1', 'rpc', 'public', 'ws', 'health', 'docs', 'metrics', 'assets'];

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

interface Cached {
  mtimeMs: number;
  size: number;
  body: Buffer;
  gzip: Buffer | undefined;
  etag: string;
}

/**
 * Serves the dashboard built in `dir` at `/` (C43): its files as they are, hashed assets
 * (/assets/*) cached for a year, everything else revalidated (`no-cache` with an ETag), and
 * index.html for a reload of one of its pages (the paths of routes.json, written by its build).
 * Any other path goes on to the usual 404. When the dashboard was never built, `/` says how.
 */
export function dashboardRoutes(app: FastifyInstance, opts: { dir?: string } = {}): void {
  const dir = opts.dir ?? DASHBOARD_DIR;
  const cache = new Map<string, Cached>();

  /** A file of the build, or undefined when there is none; re-read when it changed on disk. */
  const load = async (rel: string): Promise<Cached | undefined> => {
    const file = path.join(dir, rel);
    if (!file.startsWith(dir + path.sep)) return undefined;
    let st;
    try {
      st = await stat(file);
    } catch {
      return undefined;
    }
    if (!st.isFile()) return undefined;
    const hit = cache.get(file);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
    const body = await readFile(file);
    const compressible = body.length > 1024 && /\.(html|js|css|svg|json|txt)$/.test(file);
    const entry = {
      mtimeMs: st.mtimeMs,
      size: st.size,
      body,
      gzip: compressible ? gzipSync(body) : undefined,
      etag: `"${createHash('sha1').update(body).digest('base64url').slice(0, 22)}"`,
    };
    cache.set(file, entry);
    return entry;
  };

  const send = (req: FastifyRequest, reply: FastifyReply, rel: string, file: Cached, status = 200) => {
    reply
      .header('content-security-policy', contentSecurityPolicy({ host: req.headers.host }))
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cache-control', rel.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache')
      .header('etag', file.etag)
      .header('vary', 'accept-encoding')
      .type(TYPES[path.extname(rel)] ?? 'application/octet-stream');
    if (status === 200 && req.headers['if-none-match'] === file.etag) return reply.status(304).send();
    if (file.gzip && /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
      return reply.status(status).header('content-encoding', 'gzip').send(file.gzip);
    }
    return reply.status(status).send(file.body);
  };

  const notBuilt = (reply: FastifyReply) =>
    reply
      .status(503)
      .header('cache-control', 'no-store')
      .header('content-security-policy', "default-src 'none'")
      .type('text/plain; charset=utf-8')
      .send('The dashboard is not built. Run `npm run build` (or `npm install`) and reload.\n');

  /** The page paths of the build (routes.json), '/' included. */
  const pagePaths = async (): Promise<Set<string>> => {
    const f = await load('routes.json');
    const paths = new Set(['/']);
    if (!f) return paths;
    try {
      for (const p of JSON.parse(f.body.toString('utf8')) as unknown[]) if (typeof p === 'string') paths.add(p);
    } catch {}
    return paths;
  };

  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const url = req.url.split('?')[0] ?? '/';
    let pathname;
    try {
      pathname = decodeURIComponent(url);
    } catch {
      return reply.callNotFound();
    }
    const first = pathname.split('/')[1] ?? '';
    if (pathname.includes('\0') || pathname.split('/').some((s) => s === '..' || s.startsWith('.'))) return reply.callNotFound();
    if (first === 'assets' || (pathname !== '/' && !RESERVED.includes(first) && path.extname(pathname))) {
      const rel = pathname.slice(1);
      const file = rel === 'routes.json' ? undefined : await load(rel);
      return file ? send(req, reply, rel, file) : reply.callNotFound();
    }
    if (RESERVED.includes(first)) return reply.callNotFound();
    const page = pathname.replace(/\/+$/, '') || '/';
    if (!(await pagePaths()).has(page)) return reply.callNotFound();
    const index = await load('index.html');
    return index ? send(req, reply, 'index.html', index) : notBuilt(reply);
  };

  app.get('/', { schema: { hide: true } }, handler);
  app.get('/*', { schema: { hide: true } }, handler);
}
