import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
import type { CheckState, Limiter } from './limiter.ts';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

function headersOf(limit: number, s: CheckState): Record<string, string> {
  const resetAt = s.remaining === 0 ? Date.now() + Math.max(1, s.retryAfterMs) : s.resetAt;
  return {
    'x-ratelimit-limit': String(limit),
    'x-ratelimit-remaining': String(s.remaining),
    'x-ratelimit-reset': String(Math.ceil(resetAt / 1000)),
    'x-cu-remaining': '-1',
  };
}

function throttled(s: CheckState, message: string): HttpError {
  const retryAfter = Math.max(1, Math.ceil(s.retryAfterMs / 1000));
  return new HttpError('RATE_LIMITED', message, { details: { retryAfter }, headers: { 'retry-after': String(retryAfter) } });
}

/**
 * The REST API's own limits (C17): requests per account (per client IP before sign-in), failed
 * logins per (IP, e-mail), registrations per IP. Same limiter as RPC, so they hold across
 * instances with Redis. Responses carry the C13 headers for the per-account (or per-IP) limit.
 */
export class RestLimits {
  readonly #limiter: Limiter;
  readonly #cfg: Config['limits'];

  constructor(config: Config, limiter: Limiter) {
    this.#limiter = limiter;
    this.#cfg = config.limits;
  }

  /** The general REST limit; `userId` once the bearer token is known, else the client IP. */
  async request(req: FastifyRequest, reply: FastifyReply, userId?: string): Promise<void> {
    const key = userId ? `rest:u:${userId}` : `rest:ip:${req.ip}`;
    const limit = this.#cfg.restPerMinute;
    const r = await this.#limiter.consume([{ kind: 'window', key, limit, windowMs: MINUTE_MS, cost: 1 }]);
    const s = r.states[0] as CheckState;
    reply.headers(headersOf(limit, s));
    if (!r.allowed) throw throttled(s, 'Too many requests: REST API limit reached');
  }

  /**
   * C17: counts one failed bearer authentication (missing, malformed, expired or forged token)
   * from this client IP, atomically, so failures sent at once are counted too. Within
   * `failedAuthPerMinute` the answer stays the 401 given; past it, the 429 returned here. Valid
   * tokens are never counted nor refused by this limit.
   */
  async bearerFailed(req: FastifyRequest): Promise<HttpError | undefined> {
    const r = await this.#limiter.consume([
      { kind: 'window', key: `authfail:${req.ip}`, limit: this.#cfg.failedAuthPerMinute, windowMs: MINUTE_MS, cost: 1 },
    ]);
    return r.allowed ? undefined : throttled(r.states[0] as CheckState, 'Too many failed authentications from this address; try again later');
  }

  /** Before checking a password: refuse while this (IP, e-mail) has used up its failed logins. */
  async loginAllowed(req: FastifyRequest, email: string): Promise<void> {
    const r = await this.#limiter.consume([this.#login(req, email, 0)]);
    const s = r.states[0] as CheckState;
    if (s.remaining === 0) throw throttled({ ...s, retryAfterMs: s.resetAt - Date.now() }, 'Too many failed logins; try again later');
  }

  /** Counts one failed login of this (IP, e-mail). */
  async loginFailed(req: FastifyRequest, email: string): Promise<void> {
    await this.#limiter.consume([this.#login(req, email, 1)]);
  }

  /** Counts one registration from this IP; refuses past the hourly limit. */
  async registration(req: FastifyRequest): Promise<void> {
    const r = await this.#limiter.consume([
      { kind: 'window', key: `reg:${req.ip}`, limit: this.#cfg.registrationsPerHour, windowMs: HOUR_MS, cost: 1 },
    ]);
    if (!r.allowed) throw throttled(r.states[0] as CheckState, 'Too many registrations from this address; try again later');
  }

  #login(req: FastifyRequest, email: string, cost: number) {
    return {
      kind: 'window' as const,
      key: `login:${req.ip}:${email.trim().toLowerCase()}`,
      limit: this.#cfg.failedLoginsPerMinute,
      windowMs: MINUTE_MS,
      cost,
    };
  }
}
