// The REST API's own limits (C17): requests per account or client IP, and failed logins.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LimitsConfig } from '../config/schema.ts';
import { HttpError } from '../errors/http.ts';
import { type CheckState, type Limiter, type WindowCheck, windowHeaders } from './limiter.ts';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

function throttled(s: CheckState, message: string): HttpError {
  const retryAfter = Math.max(1, Math.ceil(s.retryAfterMs / 1000));
  return new HttpError('RATE_LIMITED', message, { details: { retryAfter }, headers: { 'retry-after': String(retryAfter) } });
}

/** A reserved failed-login place (C17), given back by `release()`. */
export interface LoginAttempt {
  release(): Promise<void>;
}

/**
 * The REST API's own limits (C17): requests per account (per client IP before sign-in), failed
 * logins per (IP, e-mail), registrations per IP. Same limiter as RPC, so they hold across
 * instances with Redis. Responses carry the C13 headers for the per-account (or per-IP) limit.
 */
export class RestLimits {
  readonly #limiter: Limiter;
  readonly #cfg: LimitsConfig;

  readonly #cuLeft: ((req: FastifyRequest) => Promise<number>) | undefined;

  /**
   * `cuLeft` answers the signed-in account's (`req.userId`) compute units left this month (-1: unlimited), read
   * without consuming: C13's X-CU-Remaining on REST answers is the account's, as on its RPC answers.
   */
  constructor(limits: LimitsConfig, limiter: Limiter, cuLeft?: (req: FastifyRequest) => Promise<number>) {
    this.#limiter = limiter;
    this.#cfg = limits;
    this.#cuLeft = cuLeft;
  }

  /** The general REST limit; `userId` once the bearer token is known, else the client IP. */
  async request(req: FastifyRequest, reply: FastifyReply, userId?: string): Promise<void> {
    const key = userId ? `rest:u:${userId}` : `rest:ip:${req.ip}`;
    const limit = this.#cfg.restPerMinute;
    const [r, cuLeft] = await Promise.all([
      this.#limiter.consume([{ kind: 'window', key, limit, windowMs: MINUTE_MS, cost: 1 }]),
      userId && this.#cuLeft ? this.#cuLeft(req) : -1,
    ]);
    const s = r.states[0] as CheckState;
    reply.headers(windowHeaders(limit, s, cuLeft));
    if (!r.allowed) throw throttled(s, 'Too many requests: REST API limit reached');
  }

  /**
   * C17: counts one failed bearer authentication (missing, malformed, expired or forged token)
   * from this client IP, atomically, so failures sent at once are counted too. Within
   * `failedAuthPerMinute` the answer stays the 401 given; past it, the 429 returned here. Valid
   * tokens are never counted nor refused by this limit. Either answer carries the C13 headers of
   * this window (set on `reply`): its limit, what is left after this failure, its reset, and
   * X-CU-Remaining -1 (no account is signed in).
   */
  async bearerFailed(req: FastifyRequest, reply: FastifyReply): Promise<HttpError | undefined> {
    const limit = this.#cfg.failedAuthPerMinute;
    const r = await this.#limiter.consume([{ kind: 'window', key: `authfail:${req.ip}`, limit, windowMs: MINUTE_MS, cost: 1 }]);
    const s = r.states[0] as CheckState;
    reply.headers(windowHeaders(limit, s, -1));
    return r.allowed ? undefined : throttled(s, 'Too many failed authentications from this address; try again later');
  }

  /**
   * C17: reserves one of this (IP, e-mail)'s failed logins before the password is checked, so that
   * guesses sent at once are counted too: at most `failedLoginsPerMinute` are ever checked per
   * window, the rest are 429 with Retry-After. Call `release()` when the attempt was not a wrong
   * guess (the password was right, or never checked); a wrong one keeps its place.
   */
  async loginAttempt(req: FastifyRequest, email: string): Promise<LoginAttempt> {
    const check = this.#login(req, email);
    const r = await this.#limiter.consume([check]);
    if (!r.allowed) throw throttled(r.states[0] as CheckState, 'Too many failed logins; try again later');
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        await this.#limiter.refund([check]);
      },
    };
  }

  /** Counts one registration from this IP; refuses past the hourly limit. */
  async registration(req: FastifyRequest): Promise<void> {
    const r = await this.#limiter.consume([
      { kind: 'window', key: `reg:${req.ip}`, limit: this.#cfg.registrationsPerHour, windowMs: HOUR_MS, cost: 1 },
    ]);
    if (!r.allowed) throw throttled(r.states[0] as CheckState, 'Too many registrations from this address; try again later');
  }

  #login(req: FastifyRequest, email: string): WindowCheck {
    return {
      kind: 'window',
      key: `login:${req.ip}:${email.trim().toLowerCase()}`,
      limit: this.#cfg.failedLoginsPerMinute,
      windowMs: MINUTE_MS,
      cost: 1,
    };
  }
}
