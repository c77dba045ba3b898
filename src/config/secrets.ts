// The gateway's secrets (token and key encryption keys): from config or env, or generated once
// in embedded mode.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../errors/config.ts';
import type { Config } from './schema.ts';

export interface Secrets {
  jwtSecret: string;
  keyEncryptionSecret: string;
}

/**
 * Secrets come from config/env. In embedded mode (no DATABASE_URL) a missing one is generated
 * once into DATA_DIR/secrets.json (mode 0600) so tokens and keys survive a restart. With a shared
 * PostgreSQL every instance must hold the same secrets, so they must be given.
 */
export function resolveSecrets(cfg: Config, dataDir: string = cfg.storage.dataDir): Secrets {
  const given = { jwtSecret: cfg.auth.jwtSecret, keyEncryptionSecret: cfg.keys.encryptionSecret };
  if (given.jwtSecret && given.keyEncryptionSecret) return given as Secrets;
  if (cfg.storage.databaseUrl) {
    const missing = given.jwtSecret ? 'KEY_ENCRYPTION_SECRET (keys.encryptionSecret)' : 'JWT_SECRET (auth.jwtSecret)';
    throw new ConfigError(`${missing} must be set when DATABASE_URL is used (at least 32 characters)`);
  }
  const fresh = () => randomBytes(32).toString('base64url');
  if (dataDir === 'memory') {
    return { jwtSecret: given.jwtSecret ?? fresh(), keyEncryptionSecret: given.keyEncryptionSecret ?? fresh() };
  }
  const file = path.resolve(dataDir, 'secrets.json');
  let stored: Partial<Secrets> = {};
  let onDisk = false;
  try {
    stored = JSON.parse(readFileSync(file, 'utf8')) as Partial<Secrets>;
    onDisk = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`cannot read ${file}: ${String(err)}`);
  }
  const out: Secrets = {
    jwtSecret: given.jwtSecret ?? stored.jwtSecret ?? fresh(),
    keyEncryptionSecret: given.keyEncryptionSecret ?? stored.keyEncryptionSecret ?? fresh(),
  };
  if (out.jwtSecret !== stored.jwtSecret || out.keyEncryptionSecret !== stored.keyEncryptionSecret) {
    // DATA_DIR, when created here, is the owner's only, as storage makes it (0700).
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    const toStore = {
      jwtSecret: given.jwtSecret ? stored.jwtSecret : out.jwtSecret,
      keyEncryptionSecret: given.keyEncryptionSecret ? stored.keyEncryptionSecret : out.keyEncryptionSecret,
    };
    writeFileSync(file, JSON.stringify(toStore), { mode: 0o600 });
    onDisk = true;
  }
  // The mode given on writing applies only to a new file: an older, looser one is tightened too.
  if (onDisk) chmodSync(file, 0o600);
  return out;
}
