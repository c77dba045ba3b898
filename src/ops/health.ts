// GET /health/live and /health/ready (C3): liveness, and readiness as `health.readyWhen` says.
import { Type as T } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { DeadlineError } from '../errors/deadline.ts';
import { failureCause } from '../errors/storage.ts';
import type { NetworkHealth } from '../upstreams/upstreams.ts';

export interface ReadinessCheck {
  name: string;
  /**
   * Resolves when the part answers, rejects when it does not (the instance is unready). Resolves
   * with `{ degraded }` when it does not answer but the instance serves without it (C48: Redis).
   */
  check(): Promise<void | { degraded: string }>;
}

/** Per-network upstream health, reported, and a reason to be unready as `health.readyWhen` says (C3). */
export type UpstreamHealthReport = () => Record<string, NetworkHealth>;

const Nullable = <S extends ReturnType<typeof T.Integer> | ReturnType<typeof T.Number>>(s: S) => T.Union([s, T.Null()]);

const UpstreamReport = T.Object(
  {
    index: T.Integer({ description: 'Position of the upstream in the network’s list' }),
    name: T.String({ description: 'The upstream’s name from the config (`<network>-<index>` when none is set); never its URL' }),
    state: T.Union([T.Literal('unknown'), T.Literal('up'), T.Literal('down')], {
      description: '`unknown` until it first answered or failed, then the outcome of its latest call or health probe',
    }),
    healthy: T.Boolean({ description: 'True while its latest call or probe got an answer' }),
    head: Nullable(T.Integer({ description: 'Latest block number it reported' })),
    lag: Nullable(T.Integer({ description: 'Blocks behind the head the network agrees on (0 for one ahead of it)' })),
    latencyMs: Nullable(T.Integer({ description: 'Smoothed round trip of the health probe, milliseconds' })),
    lastError: T.Optional(T.String({ description: 'Why its latest call or probe failed, in words (absent once it answers)' })),
    outlier: T.Optional(
      T.Literal(true, { description: 'Present while its head is far above the head the network agrees on: not trusted, read after the others (C26)' }),
    ),
    misbehaving: T.Optional(
      T.Object(
        {
          disagreements: T.Integer({ description: 'Times its answers disagreed with the majority of the other nodes (consensus reads and sampled checks) since the start' }),
          outOfRotation: T.Boolean({ description: 'True while it is left out of the choice: a consensus penalty, or repeated disagreement in sampled checks until one finds it agreeing again' }),
        },
        {
          additionalProperties: false,
          description: 'Present while it is marked misbehaving: its answers disagreed with the other nodes\' at the same block (C49, C55); read after every node not marked',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

const NetworkReport = T.Object(
  {
    status: T.Union([T.Literal('idle'), T.Literal('unknown'), T.Literal('up'), T.Literal('degraded'), T.Literal('down')], {
      description:
        '`idle`: not used yet, so not probed; `unknown`: no answer yet; `up`: every upstream answers; `degraded`: some do; `down`: none does (calls fail at once with -32000 while probes go on)',
    }),
    summary: T.String({ description: 'In words, e.g. "1 of 2 upstreams answer"' }),
    answering: T.Integer({ description: 'Upstreams that answer now' }),
    total: T.Integer({ description: 'Upstreams configured' }),
    head: Nullable(T.Integer({ description: 'The head the answering upstreams agree on (at least half reach it; a jump the chain could not have made is not believed)' })),
    upstreams: T.Array(UpstreamReport),
  },
  { additionalProperties: false },
);

const ReadyBody = T.Object(
  {
    status: T.Union([T.Literal('ready'), T.Literal('unready')]),
    checks: T.Record(
      T.String(),
      T.Object(
        {
          ok: T.Boolean({ description: 'False: this part makes the instance unready' }),
          state: T.Union([T.Literal('up'), T.Literal('degraded'), T.Literal('down')], {
            description: '`degraded`: the part does not answer but the instance serves without it (C48: Redis away, limits enforced per instance in memory)',
          }),
          error: T.Optional(T.String()),
        },
        { additionalProperties: false },
      ),
      {
        description: 'What readiness depends on: the config, storage, (when configured) Redis, and `networks` when health.readyWhen makes them unready',
      },
    ),
    networks: T.Record(T.String(), NetworkReport, { description: 'Upstreams of each network, by slug; a reason to be unready only as health.readyWhen says' }),
  },
  { additionalProperties: false },
);

/**
 * `GET /health/live` and `GET /health/ready` (C3). Probes call them every few seconds, so they are
 * not logged at info (a failure still is).
 */
export function healthRoutes(app: FastifyInstance, checks: ReadinessCheck[], upstreams: UpstreamHealthReport, readyWhen: ReadyWhen = 'storage'): void {
  // Readiness changes are logged once each, not at every probe.
  let wasReady = true;
  app.get(
    '/health/live',
    {
      logLevel: 'warn',
      schema: {
        tags: ['health'],
        operationId: 'getLiveness',
        summary: 'The process is up',
        response: { 200: T.Object({ status: T.Literal('ok') }, { additionalProperties: false }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/health/ready',
    {
      logLevel: 'warn',
      schema: {
        tags: ['health'],
        operationId: 'getReadiness',
        summary: 'Storage reachable, Redis up or degraded, networks as health.readyWhen says; how many upstreams of each network answer',
        description:
          '200 when the config is loaded and storage answers, else 503. Redis (when configured) that does not answer leaves the instance ready with `checks.redis.state: "degraded"` (C48: limits are enforced per instance in memory meanwhile). Networks, by `health.readyWhen` (`READY_WHEN`): `any-network` (default) is unready (`checks.networks`) only when every network is known down, `every-network` when any is, `storage` never; a network not used or not probed yet never counts as down. Each network says how many upstreams answer, their head, lag and last error.',
        response: { 200: ReadyBody, 503: ReadyBody },
      },
    },
    async (_req, reply) => {
      const results: Record<string, { ok: boolean; state: 'up' | 'degraded' | 'down'; error?: string }> = { config: { ok: true, state: 'up' } };
      await Promise.all(
        checks.map(async (c) => {
          try {
            const outcome = await withTimeout(c.check(), 2000);
            results[c.name] = outcome ? { ok: true, state: 'degraded', error: outcome.degraded.slice(0, 200) } : { ok: true, state: 'up' };
          } catch (err) {
            // C3: the cause (a refused connection), not the statement that probed it.
            results[c.name] = { ok: false, state: 'down', error: failureCause(err).slice(0, 200) };
          }
        }),
      );
      const networks = upstreams();
      const down = networksDown(networks, readyWhen);
      if (down !== null) results.networks = { ok: false, state: 'down', error: down };
      const ready = Object.values(results).every((r) => r.ok);
      if (ready !== wasReady) {
        wasReady = ready;
        const failed = Object.entries(results).filter(([, r]) => !r.ok).map(([name, r]) => `${name}: ${r.error ?? 'failed'}`);
        if (ready) app.log.info('ready again: every readiness check passes');
        else app.log.warn({ checks: results }, `not ready: ${failed.join('; ')}`);
      }
      return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unready', checks: results, networks });
    },
  );
}

/** What `/health/ready` waits for besides storage (`health.readyWhen`, C3). */
export type ReadyWhen = 'storage' | 'any-network' | 'every-network';

/**
 * Why the networks make the instance unready, or null. Only a network known down counts against
 * it: one not used yet (idle) or not probed yet (unknown) may still answer, so a gateway whose
 * networks start lazily is not held unready by them.
 */
export function networksDown(networks: Record<string, NetworkHealth>, readyWhen: ReadyWhen): string | null {
  if (readyWhen === 'storage') return null;
  const entries = Object.entries(networks);
  const down = entries.filter(([, n]) => n.status === 'down').map(([slug]) => slug);
  if (down.length === 0) return null;
  if (readyWhen === 'every-network') return `${down.length} of ${entries.length} networks have no upstream answering: ${down.slice(0, 8).join(', ')}${down.length > 8 ? ', ...' : ''}`;
  const mayAnswer = entries.some(([, n]) => n.status !== 'down');
  return mayAnswer ? null : `no node answers on any network (${down.length} down): offline? try --devnet`;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineError(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
