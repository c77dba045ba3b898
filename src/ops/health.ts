import type { FastifyInstance } from 'fastify';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

/** Per-network upstream health, reported but never a reason to be unready (C3). */
export type UpstreamHealthReport = () => Record<string, unknown>;

/** `GET /health/live` and `GET /health/ready` (C3). */
export function healthRoutes(app: FastifyInstance, checks: ReadinessCheck[], upstreams: UpstreamHealthReport): void {
  app.get('/health/live', { schema: { tags: ['health'], summary: 'The process is up' } }, async () => ({
    status: 'ok',
  }));

  app.get('/health/ready', { schema: { tags: ['health'], summary: 'Storage and Redis reachable; upstream health' } }, async (_req, reply) => {
    const results: Record<string, { ok: boolean; error?: string }> = { config: { ok: true } };
    await Promise.all(
      checks.map(async (c) => {
        try {
          await withTimeout(c.check(), 2000);
          results[c.name] = { ok: true };
        } catch (err) {
          results[c.name] = { ok: false, error: (err as Error).message.slice(0, 200) };
        }
      }),
    );
    const ready = Object.values(results).every((r) => r.ok);
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unready', checks: results, networks: upstreams() });
  });
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
