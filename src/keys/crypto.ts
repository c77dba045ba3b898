// Key values (C19): generation, the lookup hash and the encryption of the stored key.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { StorageError } from '../errors/storage.ts';

/**
 * C19: a key is `<prefix><secret>`. The prefix (e.g. `jk_live_3f9a1c2b`) is the configured
 * tag plus 8 hex characters, unique per key, and safe to show and log; the secret is 32 random
 * bytes in base64url (256 bits).
 */
export function generateKey(tag: string): { key: string; prefix: string } {
  const prefix = `${tag}${randomBytes(4).toString('hex')}`;
  return { key: `${prefix}${randomBytes(32).toString('base64url')}`, prefix };
}

/** SHA-256 of the whole key, hex: the lookup column. A fast hash is right for 256-bit secrets. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** AES-256-GCM under a key derived from the server secret; stored as `v1.iv.tag.ciphertext`. */
export class KeyCipher {
  readonly #key: Buffer;
  constructor(secret: string) {
    this.#key = Buffer.from(hkdfSync('sha256', secret, 'junction', 'api-key-encryption', 32));
  }

  encrypt(plain: string, aad: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.#key, iv);
    c.setAAD(Buffer.from(aad));
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
  }

  decrypt(stored: string, aad: string): string {
    const [v, iv, tag, body] = stored.split('.');
    if (v !== 'v1' || !iv || !tag || body === undefined) throw new StorageError('unknown key ciphertext format');
    const d = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(body, 'base64url')), d.final()]).toString('utf8');
  }
}
