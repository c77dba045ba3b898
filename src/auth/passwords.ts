// Password hashing (C5): scrypt hashes and their verification, with a bound on hashes at once.
import { randomBytes, scrypt, type ScryptOptions, timingSafeEqual } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { HttpError } from '../errors/http.ts';

// C5: scrypt with N=2^15, r=8, p=1 (about 32 MiB and ~60 ms per hash on this class of machine).
const PARAMS = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } satisfies ScryptOptions;
const KEY_LEN = 32;
/** log2 of N for new hashes (`auth.passwordHashCost`); C5 sets 15. Verification reads N from the hash. */
export const DEFAULT_HASH_COST = 15;

/**
 * At most `max` hashes at once in this process; the others wait in line, and one that waits longer
 * than `waitMs` is refused with 503 SERVICE_UNAVAILABLE (Retry-After: 1). Each scrypt holds a
 * thread of libuv's pool and ~32 MiB, so without a bound a flood of logins or registrations takes
 * every core and stalls DNS lookups and file access behind it.
 */
export class HashSlots {
  #max: number;
  #waitMs: number;
  #busy = 0;
  // A Set keeps arrival order and drops a timed-out waiter in O(1).
  readonly #waiting = new Set<() => void>();

  constructor(max: number, waitMs: number) {
    this.#max = max;
    this.#waitMs = waitMs;
  }

  configure(max: number, waitMs: number): void {
    this.#max = max;
    this.#waitMs = waitMs;
    while (this.#busy < this.#max && this.#waiting.size > 0) {
      this.#busy++;
      this.#next();
    }
  }

  /** Hashes running now. */
  get busy(): number {
    return this.#busy;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    await this.#acquire();
    try {
      return await task();
    } finally {
      if (this.#waiting.size > 0) this.#next(); // the slot passes on
      else this.#busy--;
    }
  }

  #next(): void {
    const grant = this.#waiting.values().next().value as () => void;
    this.#waiting.delete(grant);
    grant();
  }

  #acquire(): Promise<void> {
    if (this.#busy < this.#max) {
      this.#busy++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiting.delete(grant);
        reject(
          new HttpError('SERVICE_UNAVAILABLE', 'Too many password checks at once; try again shortly', {
            headers: { 'retry-after': '1' },
          }),
        );
      }, this.#waitMs);
      this.#waiting.add(grant);
    });
  }
}

/** Cores, but at most 3: libuv's pool has 4 threads by default and DNS and files need one. */
export const defaultHashConcurrency = () => Math.max(1, Math.min(availableParallelism(), 3));

// Process-wide: the hashes of every app in this process share its cores and libuv pool.
const slots = new HashSlots(defaultHashConcurrency(), 3000);

/** Applies `auth.maxConcurrentHashes` (null: the default above) and `auth.hashWaitMs`. */
export function configureHashSlots(auth: { maxConcurrentHashes: number | null; hashWaitMs: number }): void {
  slots.configure(auth.maxConcurrentHashes ?? defaultHashConcurrency(), auth.hashWaitMs);
}

function derive(password: string, salt: Buffer, p: ScryptOptions): Promise<Buffer> {
  return slots.run(
    () =>
      new Promise<Buffer>((resolve, reject) =>
        scrypt(password.normalize('NFKC'), salt, KEY_LEN, p, (err, key) => (err ? reject(err) : resolve(key))),
      ),
  );
}

/** Hash in a self-describing form: `scrypt$N$r$p$salt$hash` (base64url). */
export async function hashPassword(password: string, cost = DEFAULT_HASH_COST): Promise<string> {
  const salt = randomBytes(16);
  const params = { ...PARAMS, N: 2 ** cost };
  const key = await derive(password, salt, params);
  return ['scrypt', params.N, params.r, params.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, salt, hash] = stored.split('$');
  if (alg !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: PARAMS.maxmem,
  });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash to compare against when the account does not exist, so timing does not reveal it. */
let dummy: Promise<string> | undefined;
let dummyCost = DEFAULT_HASH_COST;
export function dummyHash(cost = DEFAULT_HASH_COST): Promise<string> {
  // Same cost as the real hashes, or the time taken would tell.
  if (cost !== dummyCost) [dummy, dummyCost] = [undefined, cost];
  // A refusal (all hash slots busy) must not stay cached.
  dummy ??= hashPassword(randomBytes(16).toString('hex'), cost).catch((err: unknown) => {
    dummy = undefined;
    throw err;
  });
  return dummy;
}
