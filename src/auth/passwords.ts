import { randomBytes, scrypt, type ScryptOptions, timingSafeEqual } from 'node:crypto';

// C5: scrypt with N=2^15, r=8, p=1 (about 32 MiB and ~60 ms per hash on this class of machine).
const PARAMS = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } satisfies ScryptOptions;
const KEY_LEN = 32;
/** log2 of N for new hashes (`auth.passwordHashCost`); C5 sets 15. Verification reads N from the hash. */
export const DEFAULT_HASH_COST = 15;

function derive(password: string, salt: Buffer, p: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LEN, p, (err, key) => (err ? reject(err) : resolve(key))),
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
  dummy ??= hashPassword(randomBytes(16).toString('hex'), cost);
  return dummy;
}
