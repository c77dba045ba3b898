// Access and refresh tokens (C5): issuing, rotating, reuse detection and revocation.
import { createHash, createSecretKey, type KeyObject, randomUUID, webcrypto } from 'node:crypto';
import { and, eq, isNull } from 'drizzle-orm';
import { SignJWT } from 'jose';
import { HttpError } from '../errors/http.ts';
import type { Db } from '../storage/db.ts';
import { verifyHs256 } from './jwt-verify.ts';
import { refreshTokens } from './schema.ts';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
}

/** Who an access token speaks for: the account and the login (token family) it belongs to. */
export interface AccessClaims {
  userId: string;
  familyId: string;
}

// Every claim the gateway issues must be present: a token without `exp` would never expire (C5).
const REQUIRED_CLAIMS = ['iss', 'sub', 'iat', 'exp', 'jti'];

export interface TokenOptions {
  secret: string;
  issuer: string;
  accessTtlSeconds: number; // 900 by default (C5)
  refreshTtlSeconds: number; // 30 days by default (C5)
}

/**
 * JWTs (HS256). Access tokens are stateless; refresh tokens are rows so that rotation and reuse
 * detection (C5) survive a restart and hold across instances.
 */
export class TokenService {
  /** Signing only, imported once: a raw key makes jose import it again at every sign (about half its cost). */
  readonly #key: Promise<CryptoKey>;
  /** The same key for verifying, synchronously (jwt-verify.ts). */
  readonly #verifyKey: KeyObject;
  readonly #db: Db;
  readonly #opts: TokenOptions;

  constructor(db: Db, opts: TokenOptions) {
    this.#db = db;
    this.#opts = opts;
    // Derive a dedicated signing key so the configured secret is never used raw elsewhere.
    const raw = createHash('sha256').update(`junction-jwt:${opts.secret}`).digest();
    this.#key = webcrypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    this.#verifyKey = createSecretKey(raw);
  }

  /** Starts a new family (a login or registration). */
  issue(userId: string): Promise<TokenPair> {
    return this.#pair(userId, randomUUID());
  }

  async #pair(userId: string, familyId: string): Promise<TokenPair> {
    const now = Math.floor(Date.now() / 1000);
    const jti = randomUUID();
    await this.#db.insert(refreshTokens).values({
      id: jti,
      familyId,
      userId,
      expiresAt: new Date((now + this.#opts.refreshTtlSeconds) * 1000),
    });
    const accessToken = await new SignJWT({ typ: 'access', fam: familyId })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(userId)
      .setIssuer(this.#opts.issuer)
      .setIssuedAt(now)
      .setExpirationTime(now + this.#opts.accessTtlSeconds)
      .setJti(randomUUID())
      .sign(await this.#key);
    const refreshToken = await new SignJWT({ typ: 'refresh', fam: familyId })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(userId)
      .setIssuer(this.#opts.issuer)
      .setIssuedAt(now)
      .setExpirationTime(now + this.#opts.refreshTtlSeconds)
      .setJti(jti)
      .sign(await this.#key);
    return { accessToken, refreshToken };
  }

  async #verify(token: string, typ: 'access' | 'refresh') {
    const verified = verifyHs256(token, this.#verifyKey, { issuer: this.#opts.issuer, required: REQUIRED_CLAIMS });
    if (!verified.ok) {
      if (verified.reason === 'expired') throw new HttpError('TOKEN_EXPIRED', `The ${typ} token has expired`);
      throw new HttpError('UNAUTHORIZED', `Invalid ${typ} token`);
    }
    const payload = verified.claims;
    if (payload.typ !== typ || typeof payload.sub !== 'string' || typeof payload.jti !== 'string' || typeof payload.fam !== 'string') {
      throw new HttpError('UNAUTHORIZED', `Invalid ${typ} token`);
    }
    return payload as typeof payload & { sub: string; jti: string; fam: string };
  }

  /** The account and login of a valid access token, else a 401 HttpError. */
  async verifyAccess(token: string): Promise<AccessClaims> {
    const claims = await this.#verify(token, 'access');
    return { userId: claims.sub, familyId: claims.fam };
  }

  /**
   * Rotates a refresh token (C5): the presented one stops working; presenting one that was already
   * used revokes its whole family.
   */
  async refresh(token: string): Promise<TokenPair> {
    const claims = await this.#verify(token, 'refresh');
    const now = new Date();
    // Atomic claim: only one concurrent refresh can mark the row used.
    const claimed = await this.#db
      .update(refreshTokens)
      .set({ usedAt: now })
      .where(and(eq(refreshTokens.id, claims.jti), isNull(refreshTokens.usedAt), isNull(refreshTokens.revokedAt)))
      .returning({ userId: refreshTokens.userId, familyId: refreshTokens.familyId, expiresAt: refreshTokens.expiresAt });
    const row = claimed[0];
    if (!row) {
      const [known] = await this.#db
        .select({ familyId: refreshTokens.familyId, usedAt: refreshTokens.usedAt })
        .from(refreshTokens)
        .where(eq(refreshTokens.id, claims.jti));
      if (known?.usedAt) {
        await this.revokeFamily(known.familyId);
        throw new HttpError('TOKEN_REUSED', 'Refresh token was already used; every session of that login is signed out');
      }
      throw new HttpError('UNAUTHORIZED', 'Invalid refresh token');
    }
    if (row.expiresAt <= now) throw new HttpError('TOKEN_EXPIRED', 'The refresh token has expired');
    return this.#pair(row.userId, row.familyId);
  }

  /** Signs every login of the account out (their refresh tokens stop working). */
  async revokeAll(userId: string): Promise<void> {
    await this.#db
      .update(refreshTokens)
      .set({ revokedAt: new Date() })
      .where(and(eq(refreshTokens.userId, userId), isNull(refreshTokens.revokedAt)));
  }

  /** Signs one login out: every refresh token of its family stops working. */
  async revokeFamily(familyId: string): Promise<void> {
    await this.#db
      .update(refreshTokens)
      .set({ revokedAt: new Date() })
      .where(and(eq(refreshTokens.familyId, familyId), isNull(refreshTokens.revokedAt)));
  }
}
