// A real local HTTP receiver for webhook tests, and accounts on a plan with webhooks.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { registerUser, setTier } from '../support/app.ts';

export const ADMIN_TOKEN = 'webhooks-test-admin-token-0123456789';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** Date.now() when it arrived. */
  at: number;
  path: string;
}

export interface Answer {
  /** Default 200. */
  status?: number;
  headers?: Record<string, string>;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
  /** Never answer (the sender's timeout ends it). */
  hang?: boolean;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** The most requests it held unanswered at once. */
  maxOpen: number;
  /** How the n-th request (0-based) is answered; default 200. */
  answer: (n: number, req: Received) => Answer;
  close(): Promise<void>;
}

export async function startReceiver(answer: Receiver['answer'] = () => ({ status: 200 })): Promise<Receiver> {
  const received: Received[] = [];
  const r = { received, answer, maxOpen: 0 } as Receiver;
  let open = 0;
  const server: Server = createServer((req, res) => {
    open++;
    r.maxOpen = Math.max(r.maxOpen, open);
    res.on('close', () => open--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const got: Received = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now(), path: req.url ?? '/' };
      const n = received.length;
      received.push(got);
      const a = r.answer(n, got);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(a.status ?? 200, { 'content-type': 'text/plain', ...a.headers });
        res.end('ok');
      };
      if (a.hang) return;
      if (a.delayMs) setTimeout(send, a.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  r.port = port;
  r.url = `http://127.0.0.1:${port}/hook`;
  r.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return r;
}

export type User = Awaited<ReturnType<typeof registerUser>>;

/** A new account on `tier` (default max); the app needs ADMIN_TOKEN in env. */
export async function userOn(app: FastifyInstance, tier = 'max'): Promise<User> {
  const u = await registerUser(app);
  if (tier !== 'free') await setTier(app, u.id, tier, ADMIN_TOKEN);
  return u;
}

/** POST /webhooks; throws unless 200. */
export async function createWebhook(
  app: FastifyInstance,
  user: User,
  body: Record<string, unknown>,
): Promise<{ id: string; secret: string; [k: string]: unknown }> {
  const res = await app.inject({ method: 'POST', url: '/api/v1/webhooks', headers: user.auth, payload: body });
  if (res.statusCode !== 200) throw new Error(`webhook creation failed: ${res.statusCode} ${res.body}`);
  return res.json().data;
}

export async function deliveries(app: FastifyInstance, user: User, id: string): Promise<Array<Record<string, unknown>>> {
  const res = await app.inject({ method: 'GET', url: `/api/v1/webhooks/${id}/deliveries?limit=100`, headers: user.auth });
  if (res.statusCode !== 200) throw new Error(`deliveries failed: ${res.statusCode} ${res.body}`);
  return res.json().data;
}

/** Small retry delays so tests see retries in seconds (C39's schedule is 5 s ... 10 h). */
export const FAST_WEBHOOKS = {
  allowPrivateTargets: true,
  retryDelaysSeconds: [1, 1, 1],
  pollIntervalMs: 100,
  timeoutMs: 2000,
};
